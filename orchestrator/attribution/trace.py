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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.attribution.result import AttributionResult, Candidate, agent_totals, save
from orchestrator.attribution.signals import Signal, collect_signals
from orchestrator.engine.tree import MAX_DEPTH, children
from orchestrator.spec import graph
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import (
    OutcomeView,
    ReviewView,
    RunView,
    StepRecordView,
    iso,
    join_path,
    parse_unit,
    split_path,
    unit_ran,
)
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


@dataclass
class TreeLevel:
    """One child run as the backward trace reads it: its structure, records and reviews, its status, and the
    child runs its own units started (by unit)."""

    spec: WorkflowSpec
    status: str
    records: list[StepRecordView]
    reviews: list[ReviewView]
    children: dict[str, TreeLevel] = field(default_factory=dict)


@dataclass
class _Unit:
    """A candidate of the trace: a unit of the run, or a path into one of its child runs."""

    path: str
    agent: str
    signals: list[Signal]
    checked: bool
    record: StepRecordView | None
    upstream: list[str]
    """Candidates upstream of it (whose mistakes it could be processing), in the run and its ancestors."""


def _units(spec: WorkflowSpec, status: str, records: list[StepRecordView], reviews: list[ReviewView],
           children: Mapping[str, TreeLevel], prefix: str = "", above: Sequence[str] = ()) -> list[_Unit]:
    """The candidates of one run of the tree, in workflow order: units that reach its output (every unit
    that ran, for a failed run), a mapped step's instances and a loop's iterations right after their step,
    and the candidates of a unit's child run (as paths, ``research > retrieve``) right before the unit."""
    order = graph.topological_order(spec)
    output = spec.output_step
    relevant = graph.ancestors(spec, output) | {output}
    if status in ("failed", "rejected"):
        relevant |= {r.step_id for r in records}  # the step that ended the run explains it, whether or not
        # it feeds the output
    # a mapped step's instances and a loop's iterations are candidates of their own, right after their step
    # (``summarize[7]``, ``improve#2``)
    parts: dict[str, list[StepRecordView]] = {}
    for record in records:
        if record.index is not None or record.iteration is not None:
            parts.setdefault(record.step_id, []).append(record)
    local: list[str] = []
    for sid in order:
        if sid in relevant:
            local.append(sid)
            units = {r.unit: (-1 if r.index is None else r.index, -1 if r.iteration is None else r.iteration)
                     for r in parts.get(sid, [])}
            local.extend(sorted(units, key=lambda u: units[u]))
    signals = collect_signals(spec, records, reviews)
    checked = _checked(spec)
    latest = {r.unit: r for r in records}
    found: list[_Unit] = []
    paths_of: dict[str, list[str]] = {}
    """Each local unit's candidates: itself and the paths into its child run."""
    for unit in local:
        if not unit_ran(latest.get(unit)):  # a unit that did not run cannot have caused the outcome through its output
            continue
        step_id = parse_unit(unit)[0]
        before = graph.ancestors(spec, step_id)
        upstream = [*above, *(p for u in local if u in paths_of and _feeds(u, unit, before) for p in paths_of[u])]
        path = join_path(prefix, unit) if prefix else unit
        mine: list[str] = []
        child = children.get(unit)
        if child is not None:
            inner = _units(child.spec, child.status, child.records, child.reviews, child.children, path, upstream)
            found.extend(inner)
            mine.extend(u.path for u in inner)
        found.append(_Unit(path, spec.step(step_id).agent_name, signals.get(unit, []), step_id in checked,
                           latest.get(unit), upstream))
        paths_of[unit] = [*mine, path]
    return found


def _feeds(other: str, unit: str, before: set[str]) -> bool:
    """Whether ``other`` runs upstream of ``unit`` (whose step's ancestors are ``before``): an upstream step's
    unit, or an earlier iteration of the same loop (its ``previous``)."""
    o_step, o_index, o_iteration = parse_unit(other)
    step_id, index, iteration = parse_unit(unit)
    return o_step in before or (iteration is not None and o_step == step_id and o_index == index
                                and o_iteration is not None and o_iteration < iteration)


def backward_trace(spec: WorkflowSpec, run: RunView, records: list[StepRecordView], reviews: list[ReviewView],
                   outcome: OutcomeView | None, children: Mapping[str, TreeLevel] | None = None) -> AttributionResult:
    """Rank the units that can reach the output by their recorded signals; pure, stores nothing.

    ``spec`` needs only the structure (steps, gates, critics, output); callables are not used. ``children``:
    the child runs the run's units started (:func:`tree_levels`), whose units are candidates by their paths
    (``research > retrieve``, ``per_ticket[3] > classify``, ``improve#2 > draft``).
    """
    units = _units(spec, run.status, records, reviews, children or {})
    candidates_ids = [u.path for u in units]
    by_path = {u.path: u for u in units}
    position = {path: i for i, path in enumerate(candidates_ids)}
    signals = {u.path: u.signals for u in units}
    checked = {u.path for u in units if u.checked}

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
        unit = by_path[sid]
        rec = unit.record
        step_signals = signals.get(sid, [])
        candidates.append(Candidate(sid, unit.agent, credit.get(sid, 0.0), {
            "signals": [s.to_json() for s in step_signals], "tier": tier(sid),
            "score": sum({3: 4, 2: 2, 1: 1}[s.tier] for s in step_signals), "checked": sid in checked,
            "record_id": rec.id if rec else None, "started_at": iso(rec.started_at) if rec else None,
            "consumed": rec.consumed if rec else [], "position": position[sid],
            **({"run_id": rec.run_id} if rec is not None and rec.run_id != run.run_id else {}),
            **({"iteration": iteration} if (iteration := iteration_of(sid)) is not None else {})}))

    coverage = [sid for sid in candidates_ids if sid in checked]
    blamed_id = signalled[0] if signalled and shortfall > 0 else None
    upstream_of = {u.path: u.upstream for u in units}
    confidence, explanation = _verdict(upstream_of, signalled, signals, candidates_ids, checked, shortfall)
    all_records = [*records, *(r for level in _levels(children or {}) for r in level.records)]
    evidence: dict[str, Any] = {
        "explanation": explanation,
        "outcome": outcome.to_json() if outcome is not None else None,
        "run_status": run.status,
        "coverage": {"candidates": len(candidates_ids), "checked": len(coverage),
                     "ratio": round(len(coverage) / len(candidates_ids), 4) if candidates_ids else 0.0,
                     "unchecked": [sid for sid in candidates_ids if sid not in checked]},
        "signalled_steps": signalled,
        "agent_graph": agent_graph(all_records),
        "trace_id": run.run_id,
    }
    if blamed_id is not None and (blamed_iteration := iteration_of(blamed_id)) is not None:
        evidence["blamed_iteration"] = blamed_iteration
    params = {"walk": "output backwards over the DAG, into child runs", "rank": "signal tier, then earliest first",
              "credit": "outcome shortfall split over signalled steps, halving down the ranking"}
    return AttributionResult(run.run_id, "trace", params, candidates, agent_totals(candidates), blamed_id,
                             confidence, evidence, cost=0, outcome_id=outcome.id if outcome else None)


def _levels(children: Mapping[str, TreeLevel]) -> list[TreeLevel]:
    found: list[TreeLevel] = []
    for level in children.values():
        found.append(level)
        found.extend(_levels(level.children))
    return found


def iteration_of(path: str) -> int | None:
    """The iteration a path's blame lands on: the innermost unit's that has one (``improve#2 > draft`` -> 2)."""
    for unit in reversed(split_path(path)):
        iteration = parse_unit(unit)[2]
        if iteration is not None:
            return iteration
    return None


def strongest_tier(signals: dict[str, list[Signal]], step_id: str) -> int:
    """The strongest signal tier of a step (0 without any signal)."""
    return max((s.tier for s in signals.get(step_id, [])), default=0)


def _verdict(upstream_of: Mapping[str, Sequence[str]], signalled: list[str], signals: dict[str, list[Signal]],
             candidates_ids: list[str], checked: set[str], shortfall: float) -> tuple[float, str]:
    """The trace's confidence and its explanation in words: why the top suspect, and how well the
    steps upstream of it are covered by gates or critics (an unchecked one could be the real source)."""
    def tier_of(sid: str) -> int:
        return strongest_tier(signals, sid)

    coverage = [sid for sid in candidates_ids if sid in checked]
    if signalled and shortfall > 0:
        top = signalled[0]
        upstream = list(upstream_of.get(top, []))
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


def tree_levels(store: Store, run_id: str, depth: int = 0) -> dict[str, TreeLevel]:
    """The child runs a run's units started (the latest of each unit), as the trace reads them, however deep."""
    if depth >= MAX_DEPTH:
        return {}
    levels = {}
    for unit, child in children(store, run_id).items():
        levels[unit] = TreeLevel(workflow_structure(store, child), child.status, store.step_records(child.run_id),
                                 store.reviews(child.run_id), tree_levels(store, child.run_id, depth + 1))
    return levels


def trace_run(store: Store, run_id: str, *, outcome_id: int | None = None, spec: WorkflowSpec | None = None,
              store_result: bool = True) -> AttributionResult:
    """Backward-trace a stored run's outcome through its child runs and (by default) store the attribution
    record."""
    run = store.get_run(run_id)
    structure = spec if spec is not None else workflow_structure(store, run)
    outcome = select_outcome(store.outcomes(run_id), outcome_id)
    result = backward_trace(structure, run, store.step_records(run_id), store.reviews(run_id), outcome,
                            tree_levels(store, run_id))
    if store_result:
        save(store, result)
    return result
