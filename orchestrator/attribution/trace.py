"""Backward tracing: blame from the signals a run already recorded, without re-executing anything.

From the final output, walk the DAG backwards and rank the steps that can reach it by their
signals. Strongest first: a gate or critic that failed and was overridden (approved despite
failing), rejected, left the run paused, or a step that ended the run with an error; then gate
warnings; then retries and edits that recovered. Within a tier the earliest step comes first:
when step 4 and step 7 both fail their gates, step 7 most likely faithfully processed step 4's
mistake (a propagated error).

Every attempt of every step is read (``orchestrator.attribution.signals``), so a failing gate or
critic that a reviewer approved or edited counts, whatever records came after it; a critic's
failing verdict counts against the critic and against the verified step it implicates.

Confidence says how much the ranking can be trusted and why: it is high for a strong signal
whose upstream steps are all checked by gates or critics, and it falls with every unchecked
upstream step (an unchecked step earlier in the run could be the real source and would leave
no trace). With no signal at all nothing is blamed and confidence is 0.

``backward_trace`` is pure (stored views in, result out); ``trace_run`` reads and stores.
"""

from __future__ import annotations

from orchestrator import graph
from orchestrator.attribution.result import AttributionResult, Candidate, agent_totals, save
from orchestrator.attribution.signals import Signal, collect_signals
from orchestrator.model import WorkflowSpec
from orchestrator.records import OutcomeView, ReviewView, RunView, StepRecordView, iso, parse_unit
from orchestrator.store import Store

TIERS = {3: "failed or overridden gate, critic, rejection or error", 2: "gate warning",
         1: "retry or edit that recovered"}
BASE_CONFIDENCE = {3: 0.9, 2: 0.7, 1: 0.4}


def _checked(spec: WorkflowSpec) -> set[str]:
    """Steps with a quality signal: their own gates, or a critic that verifies them (a critic's
    verdict is stored as its own gate, so a critic is checked too)."""
    checked = {s.id for s in spec.steps if s.gates}
    for s in spec.steps:
        if s.type == "critic":
            checked |= {s.id, *s.verifies}
    return checked


def agent_graph(records: list[StepRecordView]) -> list[list[str]]:
    """Which agent consumed which agent's output in a run: ``[[producer, consumer], ...]``."""
    agent_of = {r.id: r.agent for r in records}
    edges: list[list[str]] = []
    for rec in records:
        for link in rec.consumed:
            src = agent_of.get(link["record_id"])
            if src is not None and src != rec.agent and [src, rec.agent] not in edges:
                edges.append([src, rec.agent])
    return edges


def backward_trace(spec: WorkflowSpec, run: RunView, records: list[StepRecordView], reviews: list[ReviewView],
                   outcome: OutcomeView | None) -> AttributionResult:
    """Rank the steps that can reach the output by their recorded signals; pure, stores nothing.

    ``spec`` needs only the structure (steps, gates, critics, output); callables are not used.
    """
    order = graph.topological_order(spec)
    output = spec.output_step
    relevant = graph.ancestors(spec, output) | {output}
    ran = {r.step_id for r in records}
    if run.status in ("failed", "rejected"):
        relevant |= ran  # the step that ended the run explains it, whether or not it feeds the output
    # a mapped step's instances and a loop's iterations are candidates of their own, right after their step
    # (``summarize[7]``, ``improve#2``)
    parts: dict[str, list[StepRecordView]] = {}
    for record in records:
        if record.index is not None or record.iteration is not None:
            parts.setdefault(record.step_id, []).append(record)
    candidates_ids = []
    for sid in order:
        if sid in relevant:
            candidates_ids.append(sid)
            units = {r.unit: (-1 if r.index is None else r.index, -1 if r.iteration is None else r.iteration)
                     for r in parts.get(sid, [])}
            candidates_ids.extend(sorted(units, key=lambda u: units[u]))
    position = {unit: i for i, unit in enumerate(candidates_ids)}
    signals = collect_signals(spec, records, reviews)
    checked = _checked(spec)
    checked |= {unit for unit in candidates_ids if parse_unit(unit)[0] in checked}
    latest = {r.unit: r for r in records}

    def tier(sid: str) -> int:
        return strongest_tier(signals, sid)

    signalled = sorted((sid for sid in candidates_ids if tier(sid) > 0), key=lambda sid: (-tier(sid), position[sid]))
    quiet = sorted((sid for sid in candidates_ids if tier(sid) == 0),
                   key=lambda sid: (sid in checked, position[sid]))
    shortfall = 1.0 if outcome is None else max(0.0, 1.0 - float(outcome.value))
    weights = [tier(sid) * 0.5 ** k for k, sid in enumerate(signalled)]
    total = sum(weights) or 1.0
    credit = {sid: -shortfall * w / total for sid, w in zip(signalled, weights, strict=True)}

    candidates = []
    for sid in signalled + quiet:
        rec = latest.get(sid)
        step_signals = signals.get(sid, [])
        candidates.append(Candidate(sid, spec.step(parse_unit(sid)[0]).agent_name, credit.get(sid, 0.0), {
            "signals": [s.to_json() for s in step_signals], "tier": tier(sid),
            "score": sum({3: 4, 2: 2, 1: 1}[s.tier] for s in step_signals), "checked": sid in checked,
            "record_id": rec.id if rec else None, "started_at": iso(rec.started_at) if rec else None,
            "consumed": rec.consumed if rec else [], "position": position[sid]}))

    coverage = [sid for sid in candidates_ids if sid in checked]
    blamed_id = signalled[0] if signalled and shortfall > 0 else None
    confidence, explanation = _verdict(spec, signalled, signals, candidates_ids, checked, shortfall)
    evidence = {
        "explanation": explanation,
        "outcome": outcome.to_json() if outcome is not None else None,
        "run_status": run.status,
        "coverage": {"candidates": len(candidates_ids), "checked": len(coverage),
                     "ratio": round(len(coverage) / len(candidates_ids), 4) if candidates_ids else 0.0,
                     "unchecked": [sid for sid in candidates_ids if sid not in checked]},
        "signalled_steps": signalled,
        "agent_graph": agent_graph(records),
        "trace_id": run.run_id,
    }
    params = {"walk": "output backwards over the DAG", "rank": "signal tier, then earliest first",
              "credit": "outcome shortfall split over signalled steps, halving down the ranking"}
    return AttributionResult(run.run_id, "trace", params, candidates, agent_totals(candidates), blamed_id,
                             confidence, evidence, cost=0, outcome_id=outcome.id if outcome else None)


def strongest_tier(signals: dict[str, list[Signal]], step_id: str) -> int:
    """The strongest signal tier of a step (0 without any signal)."""
    return max((s.tier for s in signals.get(step_id, [])), default=0)


def _verdict(spec: WorkflowSpec, signalled: list[str], signals: dict[str, list[Signal]], candidates_ids: list[str],
             checked: set[str], shortfall: float) -> tuple[float, str]:
    """The trace's confidence and its explanation in words: why the top suspect, and how well the
    steps upstream of it are covered by gates or critics (an unchecked one could be the real source)."""
    def tier_of(sid: str) -> int:
        return strongest_tier(signals, sid)

    coverage = [sid for sid in candidates_ids if sid in checked]
    if signalled and shortfall > 0:
        top = signalled[0]
        above = graph.ancestors(spec, parse_unit(top)[0])
        upstream = [sid for sid in candidates_ids if parse_unit(sid)[0] in above]
        unchecked = [sid for sid in upstream if sid not in checked]
        factor = 1.0 if not upstream else 0.5 + 0.5 * (1 - len(unchecked) / len(upstream))
        confidence = round(BASE_CONFIDENCE[tier_of(top)] * factor, 3)
        first = next((s.detail for s in signals[top] if s.tier == tier_of(top)), "")  # its strongest signal
        why = [f"step {top!r} is the earliest step with the strongest signal ({TIERS[tier_of(top)]}): {first}"]
        others = [sid for sid in signalled[1:] if tier_of(sid) == tier_of(top)]
        if others:
            why.append(f"later steps with the same signal ({', '.join(others)}) most likely processed its output")
        if upstream:
            why.append(f"{len(upstream) - len(unchecked)} of {len(upstream)} steps upstream of it are checked by "
                       "gates or critics" + (f"; unchecked: {', '.join(unchecked)} could be the real source "
                                             "without leaving a signal" if unchecked else ""))
        else:
            why.append("it has no upstream steps")
        explanation = "; ".join(why)
    else:
        confidence = 0.0
        if shortfall <= 0:
            explanation = "the outcome is fully correct; there is nothing to blame"
        else:
            explanation = (f"no step that reaches the output produced a failing signal ({len(coverage)} of "
                           f"{len(candidates_ids)} are checked by gates or critics); a replay method "
                           "(`attribute --method counterfactual`) can still find the step")
    return confidence, explanation


def workflow_structure(store: Store, run: RunView) -> WorkflowSpec:
    """The stored workflow definition as a spec, without importing any of its callables."""
    definition, _ = store.workflow_definition(run.workflow_id)
    return WorkflowSpec.model_validate(definition)


def select_outcome(outcomes: list[OutcomeView], outcome_id: int | None = None) -> OutcomeView | None:
    """The outcome to explain: the given one, else the latest (a human label after the evaluator wins)."""
    if outcome_id is not None:
        for o in outcomes:
            if o.id == outcome_id:
                return o
    return outcomes[-1] if outcomes else None


def trace_run(store: Store, run_id: str, *, outcome_id: int | None = None, spec: WorkflowSpec | None = None,
              store_result: bool = True) -> AttributionResult:
    """Backward-trace a stored run's outcome and (by default) store the attribution record."""
    run = store.get_run(run_id)
    structure = spec if spec is not None else workflow_structure(store, run)
    outcome = select_outcome(store.outcomes(run_id), outcome_id)
    result = backward_trace(structure, run, store.step_records(run_id), store.reviews(run_id), outcome)
    if store_result:
        save(store, result)
    return result
