"""Counterfactual replay: what would the outcome have been had this one step behaved as its reference?

For each step that can reach the output (for a loop, each of its iterations: ``improve#2``), replay
its descendants with its output replaced by its reference (a reviewer's edit, else its ``baseline``
callable, else a fresh re-execution), score the replay with the outcome evaluator and credit the step
with the difference:
``credit = v(actual) - v(step replaced)``. A step whose replacement would have improved the
outcome gets negative credit (blame); one whose replacement would have hurt gets positive
credit (it helped, e.g. a step that compensated an earlier error).

Every candidate's replay is stored as a run of kind ``counterfactual`` whose ``parent_step`` is
the replaced step, so each credit can be inspected with ``orchestrator show REPLAY``.

A replay that a side-effecting step blocks (its inputs changed and it declares no ``simulate``)
has no value: its candidate gets no credit, its evidence names the blocker, and the result's
explanation says ``blocked by STEP: ...`` so nobody reads the missing credit as "no effect".
"""

from __future__ import annotations

from typing import Any

from orchestrator.attribution.replay import Plan, ReplayEngine
from orchestrator.attribution.result import (
    AttributionResult,
    Candidate,
    agent_totals,
    blame_share,
    blamed,
    rank,
    require_evaluator,
)
from orchestrator.attribution.trace import agent_graph, iteration_of
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.spec.records import iso
from orchestrator.store import Store


def counterfactual(store: Store, run_id: str, *, workflow: BoundWorkflow | None = None,
                   engine: ReplayEngine | None = None, failure_value: float = 0.0) -> AttributionResult:
    """One stored replay per candidate step; credits are outcome differences. Stores nothing else."""
    engine = engine or ReplayEngine(store, run_id, workflow=workflow, failure_value=failure_value)
    require_evaluator(engine.workflow)
    actual = engine.evaluate(Plan(), kind="counterfactual", label=None)
    if actual.status == "blocked":  # the original never ran a side-effecting step (a paused run, say)
        assert actual.blocked_by is not None and actual.blocked_reason is not None
        return blocked_result(engine, run_id, "counterfactual", actual.blocked_by, actual.blocked_reason,
                              {"candidates": "the output step and its ancestors"}, actual.run_id)
    assert actual.value is not None, "require_evaluator ran above, so every replay is scored"
    candidates = []
    blockers: dict[str, str] = {}
    for sid in engine.candidates:  # steps, and a loop's iterations (``improve#2``)
        replay = engine.evaluate(Plan(reference=frozenset({sid})), kind="counterfactual", label=sid,
                                 force_run=True)
        rec = engine.record_of(sid)
        evidence = {
            "reference": engine.reference_kind(sid), "value_actual": actual.value,
            "value_with_reference": replay.value, "replay_run_id": replay.run_id, "replay_status": replay.status,
            "executions": replay.executions, "side_effects": engine.side_effects_of(sid),
            "record_id": rec.id if rec else None, "started_at": iso(rec.started_at) if rec else None,
            "consumed": rec.consumed if rec else []}
        if rec is not None and rec.run_id != run_id:  # a path into a child run: the child run its record is in
            evidence["run_id"] = rec.run_id
        if (iteration := iteration_of(sid)) is not None:
            evidence["iteration"] = iteration
        if replay.run_id is not None and engine.child_replays.get(replay.run_id):
            evidence["child_replays"] = engine.child_replays[replay.run_id]
        evidence.update(engine.route_taken(replay.run_id))
        if replay.status == "blocked":
            assert replay.blocked_by is not None and replay.blocked_reason is not None
            evidence.update(blocked_by=replay.blocked_by, blocked_reason=replay.blocked_reason)
            blockers[replay.blocked_by] = replay.blocked_reason
            candidates.append(Candidate(sid, engine.agent_of(sid), 0.0, evidence))
            continue
        assert replay.value is not None, "require_evaluator ran above, so every replay is scored"
        candidates.append(Candidate(sid, engine.agent_of(sid), actual.value - replay.value, evidence))
    ranked = rank(candidates, engine.order, engine.candidates)
    blamed_id = blamed(ranked)
    shortfall = max(1e-9, 1.0 - actual.value)
    blocked_ids = [c.step_id for c in candidates if "blocked_by" in c.evidence]
    if blamed_id is None and blockers:
        confidence = 0.0
        explanation = (f"{blocked_note(blockers)}: the replays of {', '.join(blocked_ids)} could not finish, so "
                       f"their credit is unknown (actual {actual.value:.3f}); declare `simulate:` on the blocking "
                       "step to replay through it")
    elif blamed_id is None:
        confidence = 0.0
        explanation = ("no single step's reference improves the outcome "
                       f"(actual {actual.value:.3f}); the loss needs several steps changed at once (try shapley)")
    else:
        top = ranked[0]
        restored = min(1.0, -top.credit / shortfall)
        confidence = round(blame_share(ranked) * (0.5 + 0.5 * restored), 4)
        explanation = (f"replacing step {blamed_id!r} by its {top.evidence['reference']} raises the outcome from "
                       f"{actual.value:.3f} to {top.evidence['value_with_reference']:.3f}"
                       f" (replay {top.evidence['replay_run_id']})")
        if top.evidence.get("child_replays"):  # the blamed unit is inside a child run: its replay comes first
            explanation += "; its child run replayed as " + ", ".join(
                f"{unit}: {child}" for unit, child in top.evidence["child_replays"].items())
        if top.evidence.get("route_changed"):  # the blamed step is a router: say which way its replay went
            explanation += "; the replay took another route: " + ", ".join(top.evidence["route_changed"])
        if blockers:  # some candidates could not be measured: the blame is among the others only
            confidence = round(confidence * (1 - len(blocked_ids) / len(candidates)), 4)
            explanation += f"; {blocked_note(blockers)} (no credit for {', '.join(blocked_ids)})"
    evidence = {
        "explanation": explanation, "value_actual": actual.value, "actual_run_id": actual.run_id,
        "replays": [c.evidence["replay_run_id"] for c in candidates],
        "references": {c.step_id: c.evidence["reference"] for c in candidates},
        "executions_by_step": dict(engine.executions_by_step), "cache_hits": engine.cache.hits,
        "notes": engine.notes, "trace_id": run_id, "agent_graph": agent_graph(list(engine.latest.values())),
        "route": engine.original_route,
        "blocked": [{"step_id": step, "reason": reason, "candidates": [c.step_id for c in candidates
                                                                        if c.evidence.get("blocked_by") == step]}
                    for step, reason in blockers.items()],
    }
    if blamed_id is not None and (blamed_iteration := iteration_of(blamed_id)) is not None:
        evidence["blamed_iteration"] = blamed_iteration
    params = {"candidates": "the output step and its ancestors", "reference": "edit > baseline > resample",
              "replay_gates": "warn", "failure_value": engine.failure_value,
              "credit": "v(actual) - v(step replaced by its reference)"}
    return AttributionResult(run_id, "counterfactual", params, ranked, agent_totals(ranked), blamed_id,
                             confidence, evidence, cost=engine.executions)


def blocked_note(blockers: dict[str, str]) -> str:
    """``blocked by SEND_EMAIL: side-effecting step with changed inputs and no simulate`` (one per blocker)."""
    return "; ".join(f"blocked by {step}: {reason}" for step, reason in blockers.items())


def blocked_result(engine: ReplayEngine, run_id: str, method: str, blocked_by: str, reason: str,
                   params: dict[str, Any], replay_run_id: str | None = None) -> AttributionResult:
    """The result of an attribution that a side-effecting step stopped before credit could be measured:
    no step is blamed, every candidate's evidence and the explanation name the blocker."""
    candidates = [Candidate(sid, engine.agent_of(sid), 0.0,
                            {"blocked_by": blocked_by, "blocked_reason": reason,
                             "reference": engine.reference_kind(sid), "replay_run_id": replay_run_id,
                             "replay_status": "blocked"})
                  for sid in engine.candidates]
    evidence = {"explanation": f"{blocked_note({blocked_by: reason})}: the replays cannot finish, so no step can "
                               "be credited; declare `simulate:` on the blocking step to replay through it",
                "blocked": [{"step_id": blocked_by, "reason": reason, "candidates": list(engine.candidates)}],
                "replays": list(engine.replay_runs), "notes": engine.notes, "trace_id": run_id}
    return AttributionResult(run_id, method, params, rank(candidates, engine.order, engine.candidates),
                             agent_totals(candidates), None,
                             0.0, evidence, cost=engine.executions)
