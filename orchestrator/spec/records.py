"""Read-side views of stored rows: plain dataclasses with parsed JSON, handed to the CLI, TUI
and attribution so none of them touch SQL. ``to_json`` methods produce the documented
``--json`` contract keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from orchestrator.spec.model import GATE_ERROR, RunStatus


def iso(ts: float | None) -> str | None:
    """Epoch seconds -> ISO 8601 with time zone, as the JSON contract requires."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


AWAITING_APPROVAL = "AwaitingApproval"
"""``error_type`` of a record that waits for a person's approval (an approval step, a tool call)."""

PauseKind = Literal["gate", "approval", "tool_call"]
"""What a waiting (``gate_failed``) record waits for: a review of failed gates (``gate``), the approval of an
approval step's proposal (``approval``) or of an LLM step's tool call (``tool_call``). ``show --json`` says it
in ``pause``; faces show the two approvals as ``waiting``, since nothing failed."""

DECIDED_WORDS = {"approve": "approved", "edit": "edited", "reject": "rejected", "retry": "retried"}


def pause_kind(error_type: str | None, step_type: str) -> PauseKind:
    """The kind of pause a ``gate_failed`` record is (or was, once decided)."""
    if error_type != AWAITING_APPROVAL:
        return "gate"
    return "approval" if step_type == "approval" else "tool_call"


def shown_status(status: str, pause: str | None, *, waiting: bool, decision: str | None = None) -> str:
    """A record's status as faces print it: a pause for an approval is ``waiting`` while open and then what
    was decided (``approved``, ``rejected``, ...), never ``gate_failed``, since no check failed; any other
    record (a pause at failed gates included) shows its stored status."""
    if status != "gate_failed" or pause in (None, "gate"):
        return status
    if waiting or decision is None:
        return "waiting"
    return DECIDED_WORDS.get(decision, decision)


@dataclass
class GateView:
    gate: str
    passed: bool
    score: float | None
    reason: str
    details: dict[str, Any]
    severity: str = "block"
    duration: float = 0.0
    record_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"gate": self.gate, "passed": self.passed, "score": self.score, "reason": self.reason,
                "severity": self.severity, "details": self.details, **({"error": True} if self.error else {})}

    @property
    def error(self) -> bool:
        """The gate itself broke (it raised): no verdict on the output, which is not fed back to a model."""
        return bool(self.details.get(GATE_ERROR))


@dataclass
class ModelCallView:
    """One stored model call (see :class:`orchestrator.store.base.ModelCallRow`)."""

    id: int
    run_id: str
    record_id: int | None
    step_id: str
    attempt: int
    purpose: str
    gate: str | None
    provider: str
    model: str
    started_at: float
    ended_at: float
    input_tokens: int
    output_tokens: int
    cost: float | None
    finish_reason: str | None = None
    error: str | None = None
    messages: list[dict[str, Any]] | None = None
    response: str | None = None

    @property
    def latency(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    def to_json(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "step_id": self.step_id, "attempt": self.attempt, "gate": self.gate,
                "provider": self.provider, "model": self.model, "started_at": iso(self.started_at),
                "ended_at": iso(self.ended_at), "latency": round(self.latency, 6),
                "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
                "cost": self.cost, "finish_reason": self.finish_reason, "error": self.error}


@dataclass
class StepRecordView:
    id: int
    run_id: str
    step_id: str
    step_type: str
    agent: str
    attempt: int
    status: str
    origin: str
    started_at: float
    ended_at: float
    inputs: dict[str, Any] | None
    output: Any
    error_type: str | None
    error_message: str | None
    consumed: list[dict[str, Any]]
    injected: list[dict[str, Any]]
    gates: list[GateView] = field(default_factory=list)
    llm: dict[str, Any] | None = None
    """What the attempt's model call sent and got back (LLM steps only)."""
    superseded_by: int | None = None
    """The review that superseded this record: a reviewer fixed an upstream step, so the step runs again."""
    traceback: str | None = None
    """The full traceback of a failed attempt (``error`` is its one-line summary)."""
    index: int | None = None
    """The item of a ``for_each`` instance (0-based); None for a plain step or a mapped step's collected list."""
    skip_reason: str | None = None
    """Why a ``skipped`` record did not run (its ``when`` condition and the values read, or a skipped upstream)."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a step without ``repeat:`` and for a loop's result."""

    @property
    def unit(self) -> str:
        """What this record is a result of: the step id, ``STEP[i]`` for an instance of a mapped step,
        ``STEP#n`` for iteration n of a ``repeat:`` step (``STEP[i]#n`` for both)."""
        return unit_name(self.step_id, self.index, self.iteration)

    @property
    def superseded(self) -> bool:
        return self.superseded_by is not None

    @property
    def duration(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def error(self) -> str | None:
        if self.error_type is None:
            return None
        return f"{self.error_type}: {self.error_message}" if self.error_message else self.error_type

    @property
    def failed_gates(self) -> list[GateView]:
        return [g for g in self.gates if not g.passed]

    @property
    def pause(self) -> PauseKind | None:
        """The kind of pause a ``gate_failed`` record is (:data:`PauseKind`); None for any other record."""
        return pause_kind(self.error_type, self.step_type) if self.status == "gate_failed" else None

    def to_json(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "type": self.step_type, "agent": self.agent, "status": self.status,
                "attempt": self.attempt, "origin": self.origin, "record_id": self.id,
                "started_at": iso(self.started_at), "ended_at": iso(self.ended_at),
                "duration": round(self.duration, 6), "inputs": self.inputs, "output": self.output,
                "error": self.error, "gates": [g.to_json() for g in self.gates],
                "consumed": self.consumed, "injected": self.injected, **({"llm": self.llm} if self.llm else {}),
                "superseded": self.superseded, "superseded_by": self.superseded_by, "traceback": self.traceback,
                "index": self.index, "iteration": self.iteration, "unit": self.unit, "skip_reason": self.skip_reason,
                "pause": self.pause}


def unit_name(step_id: str, index: int | None, iteration: int | None = None) -> str:
    """``summarize[7]`` for instance 7 of mapped step ``summarize``, ``improve#2`` for iteration 2 of a
    ``repeat:`` step, ``summarize[7]#2`` for both; the step id itself without either."""
    unit = step_id if index is None else f"{step_id}[{index}]"
    return unit if iteration is None else f"{unit}#{iteration}"


def parse_unit(unit: str) -> tuple[str, int | None, int | None]:
    """``summarize[7]`` -> ``("summarize", 7, None)``, ``improve#2`` -> ``("improve", None, 2)``,
    ``summarize[7]#2`` -> ``("summarize", 7, 2)``: step, item index, iteration; a plain step id ->
    ``(id, None, None)``. Raises
    ValueError for a malformed index or iteration (``summarize[x]``, ``improve#0``)."""
    iteration: int | None = None
    if "#" in unit:
        unit, _, count = unit.partition("#")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"{unit + '#' + count!r} is not STEP#ITERATION with a whole ITERATION of 1 or more")
        iteration = int(count)
    if not unit.endswith("]") or "[" not in unit:
        return unit, None, iteration
    step_id, _, rest = unit[:-1].partition("[")
    if not rest.isdigit():
        raise ValueError(f"{unit!r} is not a step id or STEP[INDEX] with a non-negative whole INDEX")
    return step_id, int(rest), iteration


PATH_SEPARATOR = " > "
"""Between the units of a path into child runs: ``research > retrieve`` is unit ``retrieve`` of the child run
that unit ``research`` of the parent started (``per_ticket[3] > classify`` for an instance's child)."""


def join_path(*units: str) -> str:
    """``research``, ``retrieve`` -> ``research > retrieve``."""
    return PATH_SEPARATOR.join(units)


def split_path(path: str) -> list[str]:
    """``research > retrieve`` -> ``["research", "retrieve"]`` (spaces around ``>`` optional); a unit alone
    gives a list of one."""
    return [part.strip() for part in path.split(">")]


def path_head(path: str) -> str:
    """The unit of the run itself a path starts with: ``research`` of ``research > retrieve``."""
    return path.split(">", 1)[0].strip()


def live_records(records: Iterable[StepRecordView]) -> dict[str, StepRecordView]:
    """The latest record of each unit (a step, or ``STEP[i]`` for an instance of a mapped step), left
    out when a fix of an upstream step superseded it.

    Records come in insertion order; a superseded latest record means the unit has no live result
    (its earlier records were replaced before), so it counts as not run yet.
    """
    latest: dict[str, StepRecordView] = {}
    for rec in records:
        latest[rec.unit] = rec
    return {sid: rec for sid, rec in latest.items() if not rec.superseded}


@dataclass
class ReviewView:
    id: int
    run_id: str
    record_id: int
    step_id: str
    decision: str
    reviewer: str
    comment: str | None
    output_before: Any
    output_after: Any
    forced: bool
    created_at: float
    rerun_side_effects: bool | None = None
    """Set on a fix of an upstream step: whether re-running steps with side effects was accepted."""

    def to_json(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "decision": self.decision, "reviewer": self.reviewer,
                "comment": self.comment, "forced": self.forced, "created_at": iso(self.created_at),
                "record_id": self.record_id, "output_before": self.output_before,
                "output_after": self.output_after, "rerun_side_effects": self.rerun_side_effects}


@dataclass
class OutcomeView:
    id: int
    run_id: str
    value: float
    correct: bool | None
    source: str
    termination: str
    reason: str | None
    reviewer: str | None
    created_at: float
    evaluator_reason: str | None = None
    """Why the evaluator gave this score, when it returned a reason with it."""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "correct": self.correct, "source": self.source,
                "termination": self.termination, "reason": self.reason, "reviewer": self.reviewer,
                "created_at": iso(self.created_at), "evaluator_reason": self.evaluator_reason}


@dataclass
class AttributionView:
    id: int
    run_id: str
    outcome_id: int | None
    method: str
    params: dict[str, Any]
    step_credits: list[dict[str, Any]]
    """Ranked most to least blamed: ``{"step_id", "agent", "credit", "evidence"}``."""
    agent_credits: dict[str, float]
    blamed_step: str | None
    confidence: float | None
    evidence: dict[str, Any]
    cost: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "method": self.method, "blamed_step": self.blamed_step,
                "confidence": self.confidence, "candidates": self.step_credits,
                "agents": self.agent_credits, "params": self.params, "evidence": self.evidence,
                "cost": self.cost, "outcome_id": self.outcome_id, "created_at": iso(self.created_at)}


CHILD_KIND = "child"
"""``runs.kind`` of a run a ``workflow:`` step started."""


@dataclass
class RunView:
    id: int
    run_id: str
    workflow: str
    workflow_id: int
    status: RunStatus
    kind: str
    inputs: dict[str, Any]
    output: Any
    error: str | None
    parent_run_id: str | None
    parent_step: str | None
    created_at: float
    updated_at: float
    trace_id: str | None = None
    owner: str | None = None
    """``host:pid`` of the process executing (or last executing) the run."""
    lease_expires_at: float | None = None
    reference: Any = None
    """The run's reference answer for its evaluator (``run --reference``, ``label --reference``); None if none."""

    def summary_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "workflow": self.workflow, "status": self.status,
                "created_at": iso(self.created_at), "updated_at": iso(self.updated_at), "kind": self.kind,
                "parent_run_id": self.parent_run_id}


def unit_ran(record: StepRecordView | None) -> bool:
    """Whether a unit's record says it ran (it succeeded, failed or waited at its gates): a skipped unit, or one
    the run never reached, produced nothing a later step could have consumed, so attribution never blames it."""
    return record is not None and record.status not in ("skipped", "pending")


@dataclass
class NotificationView:
    """One notification of the outbox: what is told to whom, and how its delivery went."""

    id: int
    key: str
    """The idempotency key a receiver sees (``Idempotency-Key``) on every try of this notification."""
    run_id: str
    workflow: str
    event: str
    target: dict[str, Any]
    """The target as the workflow (or ``ORCHESTRATOR_NOTIFY_URL``) named it: ``url``, ``slack`` or ``command``."""
    body: dict[str, Any]
    status: str
    """pending (not delivered yet; retried), delivered, or failed (given up after its last try)."""
    tries: int
    last_error: str | None
    created_at: float
    next_try_at: float
    delivered_at: float | None
    claimed_by: str | None = None
    claimed_until: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "event": self.event, "run_id": self.run_id, "workflow": self.workflow,
                "target": self.target, "status": self.status, "tries": self.tries, "last_error": self.last_error,
                "created_at": iso(self.created_at), "next_try_at": iso(self.next_try_at),
                "delivered_at": iso(self.delivered_at), "unit": self.body.get("unit"),
                "reason": self.body.get("reason")}
