"""The JSON documents of ``run``/``show`` and ``runs``: the keys are a contract for scripts."""

from __future__ import annotations

from typing import Any

from orchestrator.store import Store


def run_document(store: Store, run_id: str) -> dict[str, Any]:
    """``{"run_id", "workflow", "status", "output", "steps": [...], "reviews", "outcomes"}``.

    ``steps`` holds the latest record of each step, in execution order; ``attempts`` holds them all.
    """
    run = store.get_run(run_id)
    records = store.step_records(run_id)
    latest: dict[str, Any] = {}
    for rec in records:
        latest[rec.step_id] = rec
    reviews = store.reviews(run_id)
    decided = {r.record_id for r in reviews}
    doc = run.summary_json()
    doc.update({
        "output": run.output,
        "error": run.error,
        "inputs": run.inputs,
        "parent_step": run.parent_step,
        "steps": [rec.to_json() for rec in latest.values()],
        "attempts": [{"step_id": r.step_id, "attempt": r.attempt, "status": r.status, "origin": r.origin,
                      "error": r.error, "record_id": r.id} for r in records],
        "reviews": [r.to_json() for r in reviews],
        "outcomes": [o.to_json() for o in store.outcomes(run_id)],
        "paused_steps": [r.step_id for r in latest.values() if r.status == "gate_failed" and r.id not in decided],
    })
    return doc


def runs_document(store: Store, *, status: str | None = None, workflow: str | None = None) -> list[dict[str, Any]]:
    return [r.summary_json() for r in store.list_runs(status=status, workflow=workflow)]
