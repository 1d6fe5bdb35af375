"""A stored row's Python side, typed once: what is written, its column values, and the view it reads back as.

What is written arrives as typed rows (:class:`NewStepRecord`, :class:`GateRow`, ...), what is read
comes back as the views of :mod:`orchestrator.spec.records`. JSON columns of a step record arrive
already encoded: the executor encodes each output once and keeps the text. Every store writes
the values built here and reads rows back through the views built here, so they agree by
construction; free of SQLAlchemy, so the SQLite run path never imports it to get at them. A row
read back is any object with the columns as attributes (a SQLAlchemy ``Row`` or a named tuple).
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core import jsonio
from orchestrator.spec.context import ModelCall as ModelCall
from orchestrator.spec.datasets import (
    DatasetView,
    ExampleView,
    ExperimentRunLink,
    ExperimentView,
    NewExample,
    NewExperiment,
)
from orchestrator.spec.records import (
    AttributionView,
    GateView,
    ModelCallView,
    NotificationView,
    OutcomeView,
    ReviewView,
    RunView,
    StepRecordView,
)

UNCHANGED: Any = object()
"""Sentinel for :meth:`Store.set_run_status`: leave the owner column as it is."""


@dataclass(slots=True)
class GateRow:
    """One gate (or critic) verdict to store with a step record."""

    gate: str
    passed: bool
    score: float | None
    reason: str
    details: str | None
    """JSON text of the verdict's details, or None when there are none."""
    severity: str = "block"
    duration: float = 0.0


@dataclass(slots=True)
class NewRun:
    """A run to create, as :meth:`Store.create_run` stores it."""

    workflow_id: int
    workflow: str
    inputs: dict[str, Any]
    status: str = "running"
    kind: str = "run"
    parent_run_id: str | None = None
    """The run that started this one: a replay's or fork's original, a child run's parent."""
    parent_step: str | None = None
    """The unit of the parent that started it (a child run's), or what a replay replaced."""
    owner: str | None = None
    """Who holds the run (a lease given with the run replaces it with the lease's holder)."""
    reference: Any = None
    """JSON data: the answer the outcome evaluator compares with. Stored in the same row, so a queued
    run is never claimable without it."""


class NotKept(enum.Enum):
    """A record's ``output_value`` or ``inputs_value`` when its writer did not keep the value (None is JSON null)."""

    NOT_KEPT = "not kept"


NOT_KEPT = NotKept.NOT_KEPT


@dataclass(slots=True)
class NewStepRecord:
    """One attempt of one step, as the executor, a review or a replay writes it."""

    run_id: str
    workflow_id: int
    step_id: str
    step_type: str
    agent: str
    attempt: int
    status: str
    started_at: float
    ended_at: float
    inputs: str | None = None
    """JSON text; values taken from another step are ``{"$record": id}`` links."""
    output: str | None = None
    """JSON text of the output."""
    error_type: str | None = None
    error_message: str | None = None
    consumed: str | None = None
    """JSON text of the causal links ``[[record_id, step_id, delay_seconds], ...]``."""
    injected: str | None = None
    """JSON text of the next-step context the attempt was told."""
    origin: str = "executed"
    gates: Sequence[GateRow] = field(default_factory=tuple)
    llm: str | None = None
    """JSON text of the attempt's model call record, for LLM steps."""
    lease_token: str | None = None
    """When set, the record is written only while the run's lease has this token (else LeaseLostError)."""
    inputs_digest: str | None = None
    """Set by the store as it writes the record (``orchestrator.store.digests``); a caller's value is replaced."""
    output_digest: str | None = None
    """Set by the store as it writes the record, like ``inputs_digest``."""
    traceback: str | None = None
    """The full traceback of a failed attempt; ``error_message`` keeps the one-line error."""
    model_calls: Sequence[ModelCall] = field(default_factory=tuple)
    """Every model call the attempt made (the step, its gates, ``ctx.llm``), stored in its transaction."""
    item_index: int | None = None
    """The item of a ``for_each`` instance (0-based); None for a plain step or a mapped step's collected list."""
    skip_reason: str | None = None
    """Why a ``skipped`` record did not run."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a step without ``repeat:`` or a loop's result."""
    output_value: Any = field(default=NOT_KEPT, repr=False, compare=False)
    """The JSON data ``output`` was dumped from (``jsonio.dumps``), when the writer has it: the store's digest
    reads it instead of parsing the text back (``orchestrator.store.digests``). Never stored itself."""
    inputs_value: Any = field(default=NOT_KEPT, repr=False, compare=False)
    """The same for ``inputs``."""


@dataclass(frozen=True, slots=True)
class Lease:
    """Who executes a run right now: exactly one holder at a time, across hosts."""

    run_id: str
    holder: str
    """``host:pid`` of the executing process."""
    token: str
    """A random secret only the holder knows."""
    seconds: float
    """How long the lease lasts without a renewal."""
    issued_at: float = field(default=0.0, compare=False)
    """This process's monotonic clock just before the lease was asked for: once granted, it lasts at least
    ``seconds`` from then (0: unknown, the executor confirms it with the store before its first step)."""


@dataclass(frozen=True, slots=True)
class RunEnd:
    """A run's end, committed with the run's last record (one transaction instead of two): the lease
    that ends and what the run came to, as :meth:`Store.end_lease` writes it."""

    lease: Lease
    status: str
    output: Any = None
    notifications: Sequence[NewNotification] = ()
    """The end's notifications, written in its transaction (the outbox)."""


@dataclass(slots=True)
class NewNotification:
    """A notification to deliver, written in the transaction of the pause or end that causes it (the outbox)."""

    run_id: str
    workflow: str
    event: str
    target: dict[str, Any]
    body: dict[str, Any]
    key: str = field(default_factory=lambda: secrets.token_hex(16))
    """The idempotency key: the same on every try, so a receiver told twice can tell."""


@dataclass(slots=True)
class NewReview:
    """A human decision on a paused step record."""

    run_id: str
    record_id: int
    step_id: str
    decision: str
    reviewer: str
    comment: str | None
    output_before: Any
    output_after: Any = None
    forced: bool = False
    rerun_side_effects: bool | None = None
    """Set on a fix of an upstream step: whether re-running steps with side effects was accepted."""


@dataclass(slots=True)
class NewDecision:
    """A review with what it changes on its run, as :meth:`DecisionStore.decide` takes it (its keywords).

    A decision on one run can change others in its tree in the same transaction; a run changed without a
    pause of its own to bind a review to (a parent that goes on or ends with a child it waited on, a child a
    fix above it ends) has ``review`` None and names itself by ``run_id``."""

    review: NewReview | None
    new_records: Sequence[NewStepRecord] = ()
    run_status: str = "running"
    lease: Lease | None = None
    supersede: Sequence[int] = ()
    from_statuses: Sequence[str] = ("paused",)
    run_id: str = ""
    """The run changed, when ``review`` is None (else the review's run)."""
    error: str | None = None
    """The run's error after the decision (why it ended); None clears it (a fixed failed run continues)."""
    superseded_records: Sequence[NewStepRecord] = ()
    """Records written already superseded by this decision's review: history of what the decision replaced
    that had no record yet (a unit that waited inside a child run a fix ends)."""

    @property
    def target_run_id(self) -> str:
        return self.review.run_id if self.review is not None else self.run_id


@dataclass(slots=True)
class NewOutcome:
    """A final-output signal for a run."""

    run_id: str
    value: float
    correct: bool | None
    source: str
    termination: str
    reason: str | None = None
    reviewer: str | None = None
    evaluator_reason: str | None = None
    """Why the evaluator gave this score (an evaluator outcome whose evaluator returned a reason)."""


@dataclass(slots=True)
class NewAttribution:
    """How an outcome was distributed over steps and agents."""

    run_id: str
    method: str
    params: dict[str, Any]
    step_credits: list[dict[str, Any]]
    agent_credits: dict[str, float]
    blamed_step: str | None
    confidence: float | None
    evidence: dict[str, Any]
    cost: int = 0
    outcome_id: int | None = None


@dataclass(slots=True)
class StepHistoryRow:
    """The latest record of one step in one run, as ``stats`` aggregates it."""

    record_id: int
    run_id: str
    step_id: str
    agent: str
    status: str
    started_at: float
    attempt: int
    gates_passed: bool | None
    inputs: str | None
    output: str | None
    llm: str | None = None
    """JSON text of an executed LLM attempt's record (None for copies a review or replay made)."""


def shown_status(status: str, lease_expires_at: float | None) -> Any:
    """``interrupted`` for a running run whose lease lapsed (its executor died), else the stored status."""
    if status == "running" and lease_expires_at is not None and lease_expires_at < time.time():
        return "interrupted"
    return status


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
    """``r`` and 96 random bits in hex: no two runs ever collide, and the first characters tell them apart
    (a person types a unique prefix, :mod:`orchestrator.store.run_prefix`)."""
    return "r" + secrets.token_hex(12)


def run_values(run_id: str, run: NewRun, lease: Lease | None) -> tuple[Any, ...]:
    """A new run's column values in ``RUN_COLUMNS`` order; with ``lease``, the run is created held."""
    now = time.time()
    return (run_id, run.workflow_id, run.workflow, run.status, run.kind, jsonio.dumps(run.inputs), run.parent_run_id,
            run.parent_step, lease.holder if lease else run.owner, now, lease.token if lease else None,
            now + lease.seconds if lease else None, now, now,
            None if run.reference is None else jsonio.dumps(run.reference))


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


def model_call_values(call: ModelCall, run_pk: int, record_id: int | None, owner: Any) -> tuple[Any, ...]:
    """A model call's column values in ``MODEL_CALL_COLUMNS`` order. ``owner``: the step record the call was
    made for (a :class:`NewStepRecord`, or the stored row of record ``record_id``), whose step and attempt
    the call is counted under."""
    return (run_pk, record_id, owner.step_id, owner.attempt, call.purpose, call.gate, call.provider, call.model,
            call.started_at, call.ended_at, call.input_tokens, call.output_tokens, call.cost, call.finish_reason,
            call.error, jsonio.dumps(call.messages), call.response)


STEP_HISTORY_COLUMNS = ("id", "step_id", "agent", "status", "started_at", "attempt", "inputs", "output", "llm",
                        "origin")
"""The ``step_records`` columns :func:`step_history_row` reads (with the run's ``run_id``)."""

GATE_VERDICT_COLUMNS = ("record_id", "passed")
"""The ``gate_results`` columns :func:`gates_passed` reads."""


def gates_passed(verdicts: Iterable[Any]) -> dict[int, bool]:
    """Per record id, whether every gate that checked the record passed (records without gates left out)."""
    passed: dict[int, bool] = {}
    for verdict in verdicts:
        passed[verdict.record_id] = passed.get(verdict.record_id, True) and bool(verdict.passed)
    return passed


def step_history_row(row: Any, gates_passed: bool | None) -> StepHistoryRow:
    """A record as ``stats`` reads it: the model call record of an executed attempt only (a copy that a
    review or a replay made of an LLM step's output made no call)."""
    return StepHistoryRow(record_id=row.id, run_id=row.run_id, step_id=row.step_id, agent=row.agent,
                          status=row.status, started_at=row.started_at, attempt=row.attempt,
                          gates_passed=gates_passed, inputs=row.inputs, output=row.output,
                          llm=row.llm if row.origin == "executed" else None)


STORED_OUTPUT_DIGESTS = "SELECT id, output_digest FROM step_records WHERE id IN {ids}"
"""The output digests of stored records, as both stores read them for ``orchestrator.store.digests`` (plain
SQL, the same on SQLite and PostgreSQL); ``{ids}``: the store's parenthesised placeholders for the ids."""


def output_digests(rows: Iterable[Any]) -> dict[int, str | None]:
    """The rows of :data:`STORED_OUTPUT_DIGESTS` by record id."""
    return {int(row.id): row.output_digest for row in rows}


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


def renewal_values(lease: Lease, now: Any) -> dict[str, Any]:
    """A held lease extended from ``now`` (epoch seconds, or the SQL store's expression for the clock that
    judges leases): it lapses ``lease.seconds`` later unless renewed again."""
    return {"lease_expires_at": now + lease.seconds, "heartbeat_at": now}


def hand_back_values(now: Any) -> dict[str, Any]:
    """A lease handed back at ``now``: lapsed, and held by no token (a late renewal finds nothing to extend)."""
    return {"lease_token": None, "lease_expires_at": now, "heartbeat_at": now}


def lease_values(lease: Lease, now: Any) -> dict[str, Any]:
    """A run taken under ``lease`` at ``now`` (acquired, claimed from the queue): running, held by the lease's
    holder with its token, the lease lasting from ``now``."""
    return {"status": "running", "owner": lease.holder, "lease_token": lease.token, **renewal_values(lease, now),
            "updated_at": now}


def release_values(status: str, output: Any, error: str | None, review_due: float | None) -> dict[str, Any]:
    """A run's end: its status, output and error, nobody holding it, its lease released, and its review
    deadline replaced by ``review_due`` (None: no pause of it times out)."""
    return {**run_update_values(status, output, error, None), "lease_token": None, "lease_expires_at": None,
            "review_deadline": review_due}


def trace_values(trace: str) -> dict[str, Any]:
    """The run's OpenTelemetry trace id."""
    return {"trace_id": trace}


def reference_values(answer: Any) -> dict[str, Any]:
    """The run's reference answer, as JSON text."""
    return {"reference": jsonio.dumps(answer)}


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


def review_view(row: Any, run_id: str) -> ReviewView:
    return ReviewView(id=row.id, run_id=run_id, record_id=row.record_id, step_id=row.step_id,
                      decision=row.decision, reviewer=row.reviewer, comment=row.comment,
                      output_before=jsonio.loads(row.output_before), output_after=jsonio.loads(row.output_after),
                      forced=bool(row.forced), created_at=row.created_at,
                      rerun_side_effects=None if row.rerun_side_effects is None else bool(row.rerun_side_effects))


def review_values(review: NewReview, run_pk: int, now: float) -> dict[str, Any]:
    """A decision's column values by column name."""
    return {"run_pk": run_pk, "record_id": review.record_id, "step_id": review.step_id, "decision": review.decision,
            "reviewer": review.reviewer, "comment": review.comment, "output_before": jsonio.dumps(review.output_before),
            "output_after": None if review.output_after is None else jsonio.dumps(review.output_after),
            "forced": review.forced, "rerun_side_effects": review.rerun_side_effects, "created_at": now}


def outcome_values(outcome: NewOutcome, run_pk: int, now: float) -> dict[str, Any]:
    """An outcome's column values by column name."""
    return {"run_pk": run_pk, "value": outcome.value, "correct": outcome.correct, "source": outcome.source,
            "termination": outcome.termination, "reason": outcome.reason, "reviewer": outcome.reviewer,
            "created_at": now, "evaluator_reason": outcome.evaluator_reason}


def outcome_view(row: Any, run_id: str) -> OutcomeView:
    """SQLite stores a boolean as 0 or 1: ``correct`` is made a bool again (None stays None)."""
    return OutcomeView(id=row.id, run_id=run_id, value=row.value,
                       correct=None if row.correct is None else bool(row.correct), source=row.source,
                       termination=row.termination, reason=row.reason, reviewer=row.reviewer,
                       created_at=row.created_at, evaluator_reason=row.evaluator_reason)


def attribution_values(attribution: NewAttribution, run_pk: int, now: float) -> dict[str, Any]:
    """An attribution record's column values by column name, its JSON fields encoded."""
    a = attribution
    return {"run_pk": run_pk, "outcome_id": a.outcome_id, "method": a.method, "params": jsonio.dumps(a.params),
            "step_credits": jsonio.dumps(a.step_credits), "agent_credits": jsonio.dumps(a.agent_credits),
            "blamed_step": a.blamed_step, "confidence": a.confidence, "evidence": jsonio.dumps(a.evidence),
            "cost": a.cost, "created_at": now}


def attribution_view(row: Any) -> AttributionView:
    """A row of ``attributions`` joined with its run's ``run_id``."""
    return AttributionView(id=row.id, run_id=row.run_id, outcome_id=row.outcome_id, method=row.method,
                           params=jsonio.loads(row.params), step_credits=jsonio.loads(row.step_credits),
                           agent_credits=jsonio.loads(row.agent_credits), blamed_step=row.blamed_step,
                           confidence=row.confidence, evidence=jsonio.loads(row.evidence), cost=row.cost,
                           created_at=row.created_at)


NOTIFICATION_COLUMNS = ("idempotency_key", "run_id", "workflow", "event", "target", "body", "status", "tries",
                        "created_at", "next_try_at")


def notification_values(note: NewNotification, now: float) -> tuple[Any, ...]:
    """A new outbox row, due at once (values in :data:`NOTIFICATION_COLUMNS` order)."""
    return (note.key, note.run_id, note.workflow, note.event, jsonio.dumps(note.target), jsonio.dumps(note.body),
            "pending", 0, now, now)


def notification_view(row: Any) -> NotificationView:
    return NotificationView(row.id, row.idempotency_key, row.run_id, row.workflow, row.event, jsonio.loads(row.target),
                            jsonio.loads(row.body), row.status, row.tries, row.last_error, row.created_at,
                            row.next_try_at, row.delivered_at, row.claimed_by, row.claimed_until)


def notification_outcome_values(*, delivered: bool, tries: int, error: str | None, retry_at: float | None,
                                now: float) -> dict[str, Any]:
    """How a delivery went, written by the sender that claimed the row: delivered; pending again from
    ``retry_at``; or failed (``retry_at`` None: given up). The claim ends either way."""
    status = "delivered" if delivered else "pending" if retry_at is not None else "failed"
    return {"status": status, "tries": tries, "last_error": error, "delivered_at": now if delivered else None,
            "next_try_at": retry_at if retry_at is not None else now, "claimed_by": None, "claimed_until": None}


# -- the notification outbox's statements -----------------------------------------------------------------
#
# Plain SQL with named parameters: the same text on SQLite's own connection (``sqlite3`` binds ``:name``) and
# on SQLAlchemy's (``text()``), so the two stores cannot disagree. A sender claims a due row with a conditional
# UPDATE (still pending, still unclaimed or its claim lapsed): of any number of senders racing for one row
# exactly one changes it. Times are the sender's clock, passed in (``:now``): a sender whose clock is off only
# delivers a little early or late, never at the same time as another, because the claim itself is the UPDATE.

OUTBOX_INSERT = (f"INSERT INTO notifications ({', '.join(NOTIFICATION_COLUMNS)}) "
                 f"VALUES ({', '.join(':' + c for c in NOTIFICATION_COLUMNS)})")

_UNCLAIMED = "(claimed_until IS NULL OR claimed_until < :now)"

OUTBOX_DUE = (f"SELECT id FROM notifications WHERE status = 'pending' AND next_try_at <= :now AND {_UNCLAIMED} "
              "ORDER BY id LIMIT :limit")
OUTBOX_DUE_OF_RUN = (f"SELECT id FROM notifications WHERE run_id = :run_id AND status = 'pending' "
                     f"AND next_try_at <= :now AND {_UNCLAIMED} ORDER BY id LIMIT :limit")

OUTBOX_CLAIM = (f"UPDATE notifications SET claimed_by = :holder, claimed_until = :until "
                f"WHERE id = :id AND status = 'pending' AND {_UNCLAIMED}")

OUTBOX_BY_ID = "SELECT * FROM notifications WHERE id = :id"

OUTBOX_FINISH = ("UPDATE notifications SET status = :status, tries = :tries, last_error = :last_error, "
                 "delivered_at = :delivered_at, next_try_at = :next_try_at, claimed_by = :claimed_by, "
                 "claimed_until = :claimed_until WHERE id = :id AND claimed_by = :holder AND status = 'pending'")

OUTBOX_RELEASE = ("UPDATE notifications SET claimed_by = NULL, claimed_until = NULL "
                  "WHERE claimed_by = :holder AND status = 'pending'")

OUTBOX_CLAIM_HOLDERS = ("SELECT DISTINCT claimed_by FROM notifications "
                        "WHERE status = 'pending' AND claimed_by IS NOT NULL AND claimed_until >= :now")

OUTBOX_LIST = "SELECT * FROM notifications ORDER BY id DESC LIMIT :limit"
OUTBOX_LIST_FAILED = ("SELECT * FROM notifications "
                      "WHERE status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL) "
                      "ORDER BY id DESC LIMIT :limit")
OUTBOX_LIST_OF_RUN = "SELECT * FROM notifications WHERE run_id = :run_id ORDER BY id DESC LIMIT :limit"


# -- datasets and experiments (orchestrator.store.sql_datasets) -------------------------------------------
# The values of an INSERT or UPDATE as keyword arguments: the columns are named here and in ``tables.py``.


def _json_or_none(value: Any) -> str | None:
    return None if value is None else jsonio.dumps(value)


def example_values(dataset_id: int, version: int, position: int, example: NewExample, now: float) -> dict[str, Any]:
    return dict(dataset_id=dataset_id, version=version, position=position, inputs=jsonio.dumps(example.inputs),
            reference=_json_or_none(example.reference), label=_json_or_none(example.label),
            source_run_id=example.source_run_id, created_at=now)


def example_view(row: Any, dataset: str) -> ExampleView:
    return ExampleView(id=row.id, dataset=dataset, version=row.version, position=row.position,
                       inputs=jsonio.loads(row.inputs), reference=jsonio.loads(row.reference),
                       label=jsonio.loads(row.label), source_run_id=row.source_run_id, created_at=row.created_at)


def dataset_values(name: str, description: str | None, now: float) -> dict[str, Any]:
    return dict(name=name, version=1, description=description, created_at=now, updated_at=now)


def dataset_view(row: Any, size: int) -> DatasetView:
    return DatasetView(id=row.id, name=row.name, version=row.version, examples=size, created_at=row.created_at,
                       updated_at=row.updated_at, description=row.description)


def experiment_values(new: NewExperiment, dataset_id: int, now: float) -> dict[str, Any]:
    return dict(name=new.name, dataset_id=dataset_id, dataset_version=new.dataset_version,
            workflow_id=new.workflow_id, workflow=new.workflow, status="running",
            params=jsonio.dumps(new.params), summary=None, created_at=now, updated_at=now)


def experiment_view(row: Any, dataset: str) -> ExperimentView:
    return ExperimentView(id=row.id, name=row.name, dataset=dataset, dataset_version=row.dataset_version,
                          workflow_id=row.workflow_id, workflow=row.workflow, status=row.status,
                          params=jsonio.loads(row.params), summary=jsonio.loads(row.summary) or {},
                          created_at=row.created_at, updated_at=row.updated_at)


def experiment_end_values(status: str, summary: dict[str, Any], now: float) -> dict[str, Any]:
    return dict(status=status, summary=jsonio.dumps(summary), updated_at=now)


def link_values(experiment_id: int, link: ExperimentRunLink) -> dict[str, Any]:
    return dict(experiment_id=experiment_id, example_id=link.example_id, run_id=link.run_id,
            reused_steps=jsonio.dumps(list(link.reused_steps)), saved_model_calls=link.saved_model_calls,
            saved_tokens=link.saved_tokens, saved_cost=link.saved_cost, saved_seconds=link.saved_seconds)


def link_view(row: Any) -> ExperimentRunLink:
    return ExperimentRunLink(example_id=row.example_id, run_id=row.run_id,
                             reused_steps=tuple(jsonio.loads(row.reused_steps)),
                             saved_model_calls=row.saved_model_calls, saved_tokens=int(row.saved_tokens),
                             saved_cost=float(row.saved_cost), saved_seconds=float(row.saved_seconds))
