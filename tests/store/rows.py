"""Small builders for the contract tests: a workflow, a run, a step record with gates."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from orchestrator.store import GateRow, Lease, NewReview, NewRun, NewStepRecord, Store

DEFINITION: dict[str, Any] = {"name": "wf", "steps": {"a": {"run": "m:f"}, "b": {"run": "m:g", "needs": ["a"]}}}


def add_workflow(store: Store, name: str = "wf", content_hash: str = "h1", source: str | None = "wf.yaml") -> int:
    return store.register_workflow(name, "1", DEFINITION, source, content_hash)


def add_run(store: Store, workflow_id: int, workflow: str = "wf", *, lease: Lease | None = None, **kwargs: Any) -> str:
    return store.create_run(NewRun(workflow_id, workflow, {"x": 1}, **kwargs), lease=lease)


def gate(name: str = "not_empty", passed: bool = True, details: dict[str, Any] | None = None,
         **kwargs: Any) -> GateRow:
    return GateRow(gate=name, passed=passed, score=kwargs.pop("score", 1.0 if passed else 0.0),
                   reason=kwargs.pop("reason", "ok" if passed else "empty"),
                   details=None if details is None else json.dumps(details), **kwargs)


def step(run_id: str, workflow_id: int, step_id: str, *, attempt: int = 1, status: str = "succeeded",
         output: Any = "out", started_at: float = 100.0, gates: Sequence[GateRow] = (), **kwargs: Any) -> NewStepRecord:
    return NewStepRecord(run_id=run_id, workflow_id=workflow_id, step_id=step_id, step_type="python",
                         agent=kwargs.pop("agent", f"agent-{step_id}"), attempt=attempt, status=status,
                         started_at=started_at, ended_at=started_at + 1.5, output=json.dumps(output), gates=gates,
                         **kwargs)


def review(run_id: str, record_id: int, step_id: str = "b", decision: str = "approve",
           reviewer: str = "ann", **kwargs: Any) -> NewReview:
    return NewReview(run_id=run_id, record_id=record_id, step_id=step_id, decision=decision, reviewer=reviewer,
                     comment=kwargs.pop("comment", "looks right"), output_before=kwargs.pop("output_before", "out"),
                     **kwargs)


def paused_run(store: Store) -> tuple[str, int, int]:
    """A run paused on step ``b``'s record: (run_id, workflow_id, the paused record's id)."""
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "a"))
    paused = store.insert_step_record(step(run_id, wf, "b", status="paused", gates=[gate(passed=False)]))
    assert store.set_run_status(run_id, "paused")
    return run_id, wf, paused


def lease(holder: str, run_id: str = "", *, seconds: float = 30.0) -> Lease:
    """A lease for ``holder`` with a fresh token."""
    return Lease(run_id, holder, secrets.token_hex(8), seconds)
