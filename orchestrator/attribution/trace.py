"""Backward tracing: blame from the signals a run already recorded, without re-executing anything.

From the final output, walk the DAG backwards and rank the steps that can reach it by their
signals. Strongest first: a gate or critic that failed and was overridden (approved despite
failing), rejected, left the run paused, or a step that ended the run with an error; then gate
warnings; then retries and edits that recovered. Within a tier the earliest step comes first:
when step 4 and step 7 both fail their gates, step 7 most likely faithfully processed step 4's
mistake (a propagated error).

Confidence says how much the ranking can be trusted and why: it is high for a strong signal
whose upstream steps are all checked by gates or critics, and it falls with every unchecked
upstream step (an unchecked step earlier in the run could be the real source and would leave
no trace). With no signal at all nothing is blamed and confidence is 0.

``backward_trace`` is pure (stored views in, result out); ``trace_run`` reads and stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator import graph
from orchestrator.attribution.result import AttributionResult, Candidate, agent_totals, save
from orchestrator.model import WorkflowSpec
from orchestrator.records import OutcomeView, ReviewView, RunView, StepRecordView, iso
from orchestrator.store import Store

TIERS = {3: "failed or overridden gate, critic, rejection or error", 2: "gate warning",
         1: "retry or edit that recovered"}
BASE_CONFIDENCE = {3: 0.9, 2: 0.7, 1: 0.4}


@dataclass
class Signal:
    """One piece of recorded evidence against a step."""

    kind: str
    tier: int
    detail: str
    record_id: int | None = None
    attempt: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "tier": self.tier, "detail": self.detail, "record_id": self.record_id,
                "attempt": self.attempt}


def _gate_text(rec: StepRecordView, *, include_critic: bool = False) -> str:
    failed = [g for g in rec.failed_gates if include_critic or g.gate != "critic"]
    return "; ".join(f"{g.gate}: {g.reason}" for g in failed)


def collect_signals(spec: WorkflowSpec, records: list[StepRecordView],
                    reviews: list[ReviewView]) -> dict[str, list[Signal]]:
    """Every step's signals, from its attempts, the reviews of those attempts and the critics."""
    by_record = {r.record_id: r for r in reviews}
    per_step: dict[str, list[StepRecordView]] = {}
    for rec in records:
        per_step.setdefault(rec.step_id, []).append(rec)
    signals: dict[str, list[Signal]] = {sid: [] for sid in spec.step_ids}
    critic_ids = {s.id for s in spec.steps if s.type == "critic"}

    for sid, recs in per_step.items():
        if sid not in signals:
            continue
        latest = recs[-1]
        for rec in recs:
            is_latest = rec is latest
            gates = _gate_text(rec)
            review = by_record.get(rec.id)
            if rec.status == "gate_failed" and gates:
                if review is None:
                    signals[sid].append(Signal("gate_failed", 3, f"failed {gates}; waiting for review",
                                               rec.id, rec.attempt))
                elif review.decision == "approve":
                    signals[sid].append(Signal("approved_despite_failing", 3,
                                               f"failed {gates}; approved by {review.reviewer}"
                                               + (f" ({review.comment})" if review.comment else ""),
                                               rec.id, rec.attempt))
                elif review.decision == "reject":
                    signals[sid].append(Signal("rejected", 3, f"failed {gates}; rejected by {review.reviewer}",
                                               rec.id, rec.attempt))
                elif review.decision == "edit" and review.forced:
                    signals[sid].append(Signal("forced_edit", 3, f"failed {gates}; replaced by "
                                               f"{review.reviewer} with an output that fails its gates too",
                                               rec.id, rec.attempt))
                elif review.decision == "edit":
                    signals[sid].append(Signal("edited", 1, f"failed {gates}; output replaced by {review.reviewer}",
                                               rec.id, rec.attempt))
                else:
                    signals[sid].append(Signal("retried", 1, f"failed {gates}; retried by {review.reviewer}",
                                               rec.id, rec.attempt))
            elif rec.status == "failed":
                what = gates if rec.error_type == "GateFailed" and gates else (rec.error or "failed")
                kind = "gate_failed" if rec.error_type == "GateFailed" else "error"
                if is_latest:
                    signals[sid].append(Signal(kind, 3, f"{what}; the run failed here", rec.id, rec.attempt))
                else:
                    signals[sid].append(Signal("retried", 1, f"attempt {rec.attempt}: {what}", rec.id, rec.attempt))
            elif rec.status == "succeeded" and gates:
                signals[sid].append(Signal("gate_warning", 2, f"failed {gates} (recorded as a warning)",
                                           rec.id, rec.attempt))
        # critics: a failing verdict is evidence against the steps it verifies
        if sid in critic_ids:
            verdict = next((g for g in latest.gates if g.gate == "critic"), None)
            if verdict is not None and not verdict.passed:
                review = by_record.get(latest.id)
                how = f"; approved by {review.reviewer} despite it" if review and review.decision == "approve" else ""
                kind = "critic_overridden" if how else "critic_failed"
                for target in spec.step(sid).verifies:
                    if target in signals:
                        signals[target].append(Signal(kind, 3, f"critic {sid!r}: {verdict.reason}{how}",
                                                      latest.id, latest.attempt))
    return signals


def _checked(spec: WorkflowSpec) -> set[str]:
    """Steps with a quality signal: their own gates, or a critic that verifies them."""
    checked = {s.id for s in spec.steps if s.gates}
    for s in spec.steps:
        if s.type == "critic":
            checked |= set(s.verifies)
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
    position = {sid: i for i, sid in enumerate(order)}
    output = spec.output_step
    relevant = graph.ancestors(spec, output) | {output}
    ran = {r.step_id for r in records}
    if run.status in ("failed", "rejected"):
        relevant |= ran  # the step that ended the run explains it, whether or not it feeds the output
    candidates_ids = [sid for sid in order if sid in relevant]
    signals = collect_signals(spec, records, reviews)
    checked = _checked(spec)
    latest = {r.step_id: r for r in records}

    def tier(sid: str) -> int:
        return max((s.tier for s in signals.get(sid, [])), default=0)

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
        candidates.append(Candidate(sid, spec.step(sid).agent_name, credit.get(sid, 0.0), {
            "signals": [s.to_json() for s in step_signals], "tier": tier(sid),
            "score": sum({3: 4, 2: 2, 1: 1}[s.tier] for s in step_signals), "checked": sid in checked,
            "record_id": rec.id if rec else None, "started_at": iso(rec.started_at) if rec else None,
            "consumed": rec.consumed if rec else [], "position": position[sid]}))

    coverage = [sid for sid in candidates_ids if sid in checked]
    blamed_id = signalled[0] if signalled and shortfall > 0 else None
    if signalled and shortfall > 0:
        top = signalled[0]
        upstream = [sid for sid in candidates_ids if sid in graph.ancestors(spec, top)]
        unchecked = [sid for sid in upstream if sid not in checked]
        factor = 1.0 if not upstream else 0.5 + 0.5 * (1 - len(unchecked) / len(upstream))
        confidence = round(BASE_CONFIDENCE[tier(top)] * factor, 3)
        first = signals[top][0].detail if signals[top] else ""
        why = [f"step {top!r} is the earliest step with the strongest signal ({TIERS[tier(top)]}): {first}"]
        others = [sid for sid in signalled[1:] if tier(sid) == tier(top)]
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
