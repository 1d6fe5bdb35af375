"""Row values and row views shared by the SQL stores, free of SQLAlchemy.

The SQLAlchemy store and the stdlib-``sqlite3`` store write the same column values and read
rows back into the same :mod:`orchestrator.records` views; keeping that here means both agree
by construction, and the SQLite run path never imports SQLAlchemy to get at it. A row is any
object with the columns as attributes (a SQLAlchemy ``Row`` or a named tuple).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from orchestrator import jsonio
from orchestrator.records import GateView, ModelCallView, RunView, StepRecordView
from orchestrator.store.base import UNCHANGED, GateRow, Lease, ModelCall, NewStepRecord, shown_status

STEP_COLUMNS = ("run_pk", "workflow_id", "step_id", "step_type", "agent", "attempt", "status", "origin",
                "started_at", "ended_at", "inputs", "output", "error_type", "error_message", "consumed",
                "injected", "llm", "inputs_digest", "output_digest", "gate_count", "gates_failed", "traceback",
                "item_index", "skip_reason", "iteration")
GATE_COLUMNS = ("record_id", "run_pk", "step_id", "gate", "passed", "score", "reason", "details", "severity",
                "duration")
MODEL_CALL_COLUMNS = ("run_pk", "record_id", "step_id", "attempt", "purpose", "gate", "provider", "model",
                      "started_at", "ended_at", "input_tokens", "output_tokens", "cost", "finish_reason", "error",
                      "messages", "response")
RUN_COLUMNS = ("run_id", "workflow_id", "workflow", "status", "kind", "inputs", "parent_run_id", "parent_step",
               "owner", "heartbeat_at", "lease_token", "lease_expires_at", "created_at", "updated_at", "reference")
"""In the table's column order (the SQLite fast path binds them positionally)."""


def new_run_id() -> str:
    return "r" + secrets.token_hex(5)


def run_values(run_id: str, workflow_id: int, workflow: str, inputs: dict[str, Any], *, status: str, kind: str,
               parent_run_id: str | None, parent_step: str | None, owner: str | None, lease: Lease | None,
               reference: Any) -> tuple[Any, ...]:
    """A new run's column values in ``RUN_COLUMNS`` order; with ``lease``, the run is created held."""
    now = time.time()
    return (run_id, workflow_id, workflow, status, kind, jsonio.dumps(inputs), parent_run_id, parent_step,
            lease.holder if lease else owner, now, lease.token if lease else None,
            now + lease.seconds if lease else None, now, now, None if reference is None else jsonio.dumps(reference))


def step_values(record: NewStepRecord, run_pk: int) -> tuple[Any, ...]:
    """A record's column values in ``STEP_COLUMNS`` order."""
    return (run_pk, record.workflow_id, record.step_id, record.step_type, record.agent, record.attempt,
            record.status, record.origin, record.started_at, record.ended_at, record.inputs, record.output,
            record.error_type, record.error_message, record.consumed, record.injected, record.llm,
            record.inputs_digest, record.output_digest, len(record.gates), sum(1 for g in record.gates if not g.passed),
            record.traceback, record.item_index, record.skip_reason, record.iteration)


def gate_values(gate: GateRow, record_id: int, run_pk: int, step_id: str) -> tuple[Any, ...]:
    """A verdict's column values in ``GATE_COLUMNS`` order."""
    return (record_id, run_pk, step_id, gate.gate, gate.passed, gate.score, gate.reason, gate.details,
            gate.severity, gate.duration)


def model_call_values(call: ModelCall, run_pk: int, record_id: int | None, step_id: str,
                      attempt: int) -> tuple[Any, ...]:
    """A model call's column values in ``MODEL_CALL_COLUMNS`` order."""
    return (run_pk, record_id, step_id, attempt, call.purpose, call.gate, call.provider, call.model, call.started_at,
            call.ended_at, call.input_tokens, call.output_tokens, call.cost, call.finish_reason, call.error,
            jsonio.dumps(call.messages), call.response)


def model_call_view(row: Any, run_id: str) -> ModelCallView:
    return ModelCallView(id=row.id, run_id=run_id, record_id=row.record_id, step_id=row.step_id,
                         attempt=row.attempt, purpose=row.purpose, gate=row.gate, provider=row.provider,
                         model=row.model, started_at=row.started_at, ended_at=row.ended_at,
                         input_tokens=int(row.input_tokens or 0), output_tokens=int(row.output_tokens or 0),
                         cost=row.cost, finish_reason=row.finish_reason, error=row.error,
                         messages=jsonio.loads(row.messages), response=row.response)


def run_update_values(status: str, output: Any, error: str | None, owner: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"status": status, "updated_at": time.time()}
    if output is not None:
        values["output"] = jsonio.dumps(output)
    if error is not None:
        values["error"] = error
    if owner is not UNCHANGED:
        values["owner"] = owner
    return values


def run_view(row: Any) -> RunView:
    return RunView(id=row.id, run_id=row.run_id, workflow=row.workflow, workflow_id=row.workflow_id,
                   status=shown_status(row.status, row.lease_expires_at), kind=row.kind,
                   inputs=jsonio.loads(row.inputs) or {},
                   output=jsonio.loads(row.output), error=row.error, parent_run_id=row.parent_run_id,
                   parent_step=row.parent_step, created_at=row.created_at, updated_at=row.updated_at,
                   trace_id=row.trace_id, owner=row.owner, lease_expires_at=row.lease_expires_at,
                   reference=jsonio.loads(row.reference))


def gate_view(g: Any) -> GateView:
    return GateView(gate=g.gate, passed=bool(g.passed), score=g.score, reason=g.reason,
                    details=jsonio.loads(g.details) or {}, severity=g.severity, duration=g.duration,
                    record_id=g.record_id)


def record_view(r: Any, run_id: str, gates: list[GateView]) -> StepRecordView:
    consumed = [{"record_id": c[0], "step_id": c[1], "delay": c[2]} for c in (jsonio.loads(r.consumed) or [])]
    return StepRecordView(id=r.id, run_id=run_id, step_id=r.step_id, step_type=r.step_type, agent=r.agent,
                          attempt=r.attempt, status=r.status, origin=r.origin, started_at=r.started_at,
                          ended_at=r.ended_at, inputs=jsonio.loads(r.inputs), output=jsonio.loads(r.output),
                          error_type=r.error_type, error_message=r.error_message, consumed=consumed,
                          injected=jsonio.loads(r.injected) or [], gates=gates, llm=jsonio.loads(r.llm),
                          superseded_by=r.superseded_by, traceback=r.traceback, index=r.item_index,
                          skip_reason=r.skip_reason, iteration=r.iteration)
