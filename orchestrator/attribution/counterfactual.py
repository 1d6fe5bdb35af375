"""Counterfactual replay: what would the outcome have been had this one step behaved as its reference?

For each step that can reach the output, replay its descendants with its output replaced by
its reference (a reviewer's edit, else its ``baseline`` callable, else a fresh re-execution),
score the replay with the outcome evaluator and credit the step with the difference:
``credit = v(actual) - v(step replaced)``. A step whose replacement would have improved the
outcome gets negative credit (blame); one whose replacement would have hurt gets positive
credit (it helped, e.g. a step that compensated an earlier error).

Every candidate's replay is stored as a run of kind ``counterfactual`` whose ``parent_step`` is
the replaced step, so each credit can be inspected with ``orchestrator show REPLAY``.
"""

from __future__ import annotations

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
from orchestrator.attribution.trace import agent_graph
from orchestrator.binding import BoundWorkflow
from orchestrator.records import iso
from orchestrator.store import Store


def counterfactual(store: Store, run_id: str, *, workflow: BoundWorkflow | None = None,
                   engine: ReplayEngine | None = None, failure_value: float = 0.0) -> AttributionResult:
    """One stored replay per candidate step; credits are outcome differences. Stores nothing else."""
    engine = engine or ReplayEngine(store, run_id, workflow=workflow, failure_value=failure_value)
    require_evaluator(engine.workflow)
    actual = engine.evaluate(Plan(), kind="counterfactual", label=None)
    assert actual.value is not None, "require_evaluator ran above, so every replay is scored"
    candidates = []
    for sid in engine.relevant:
        replay = engine.evaluate(Plan(reference=frozenset({sid})), kind="counterfactual", label=sid,
                                 force_run=True)
        assert replay.value is not None, "require_evaluator ran above, so every replay is scored"
        rec = engine.latest.get(sid)
        candidates.append(Candidate(sid, engine.steps[sid].agent_name, actual.value - replay.value, {
            "reference": engine.reference_kind(sid), "value_actual": actual.value,
            "value_with_reference": replay.value, "replay_run_id": replay.run_id, "replay_status": replay.status,
            "executions": replay.executions, "side_effects": engine.steps[sid].side_effects,
            "record_id": rec.id if rec else None, "started_at": iso(rec.started_at) if rec else None,
            "consumed": rec.consumed if rec else []}))
    ranked = rank(candidates, engine.order)
    blamed_id = blamed(ranked)
    shortfall = max(1e-9, 1.0 - actual.value)
    if blamed_id is None:
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
    evidence = {
        "explanation": explanation, "value_actual": actual.value, "actual_run_id": actual.run_id,
        "replays": [c.evidence["replay_run_id"] for c in candidates],
        "references": {c.step_id: c.evidence["reference"] for c in candidates},
        "executions_by_step": dict(engine.executions_by_step), "cache_hits": engine.cache.hits,
        "notes": engine.notes, "trace_id": run_id, "agent_graph": agent_graph(list(engine.latest.values())),
    }
    params = {"candidates": "the output step and its ancestors", "reference": "edit > baseline > resample",
              "replay_gates": "warn", "failure_value": engine.failure_value,
              "credit": "v(actual) - v(step replaced by its reference)"}
    return AttributionResult(run_id, "counterfactual", params, ranked, agent_totals(ranked), blamed_id,
                             confidence, evidence, cost=engine.executions)
