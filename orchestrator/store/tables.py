"""The database schema, declared with SQLModel. Only the SQL stores read or write these tables.

Timestamps are epoch seconds (REAL), JSON is TEXT: both work unchanged on SQLite and
PostgreSQL, and a small step costs well under 300 bytes. Records are append-only: a review
adds a record or a row, it never rewrites what a step produced.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Table, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


class WorkflowRow(SQLModel, table=True):
    """One version of a workflow definition, identified by the hash of its spec."""

    __tablename__ = "workflows"
    __table_args__ = (UniqueConstraint("name", "content_hash"),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    version: str
    content_hash: str
    definition: str = Field(sa_column=Column(Text, nullable=False))
    source: str | None = None
    created_at: float


class RunRow(SQLModel, table=True):
    """One execution of a workflow; replays and forks point at their parent."""

    __tablename__ = "runs"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(unique=True)
    workflow_id: int = Field(foreign_key="workflows.id", index=True)
    workflow: str = Field(index=True)
    status: str = Field(index=True)
    kind: str = "run"
    """run | replay | counterfactual: attribution replays are runs too, never the original."""
    inputs: str = Field(sa_column=Column(Text, nullable=False))
    output: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    parent_run_id: str | None = Field(default=None, index=True)
    parent_step: str | None = None
    owner: str | None = None
    """Which process is executing the run; lets ``resume`` and workers avoid double execution."""
    heartbeat_at: float | None = None
    trace_id: str | None = None
    lease_token: str | None = None
    """The executor's secret: step records and the run's end are written only while it matches."""
    lease_expires_at: float | None = None
    """When the lease lapses unless renewed by the executor's heartbeat."""
    """The OpenTelemetry trace of the run, so a resumed run and later decisions continue it."""
    created_at: float
    updated_at: float
    reference: str | None = Field(default=None, sa_column=Column(Text))
    """JSON text of the run's reference answer (``run --reference``, ``label --reference``) for its evaluator."""


class StepRecordRow(SQLModel, table=True):
    """One attempt of one step in one run."""

    __tablename__ = "step_records"
    __table_args__ = (
        Index("ix_step_records_run_step", "run_pk", "step_id"),
        Index("ix_step_records_workflow_step_time", "workflow_id", "step_id", "started_at"),
        Index("ix_step_records_run_started", "run_pk", "started_at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id")
    workflow_id: int
    step_id: str
    step_type: str
    agent: str
    attempt: int
    status: str
    origin: str = "executed"
    """executed | approved | edited | reused: how this record's output came to be."""
    started_at: float
    ended_at: float
    inputs: str | None = Field(default=None, sa_column=Column(Text))
    """Resolved inputs; values taken from another step are stored as ``{"$record": id}`` links."""
    output: str | None = Field(default=None, sa_column=Column(Text))
    error_type: str | None = None
    error_message: str | None = Field(default=None, sa_column=Column(Text))
    consumed: str | None = Field(default=None, sa_column=Column(Text))
    """Causal links: ``[[record_id, step_id, delay_seconds], ...]``."""
    injected: str | None = Field(default=None, sa_column=Column(Text))
    llm: str | None = Field(default=None, sa_column=Column(Text))
    """What an LLM attempt sent and got back (``LLMRecord`` as JSON): messages, response, usage, cost, turns."""
    """The next-step context this attempt was told (``ctx.next_needs``)."""
    inputs_digest: str | None = None
    """Content hash of the inputs, links resolved to their outputs' digests (``orchestrator.store.digests``);
    NULL for records written before it was stored, or whose upstream has none."""
    output_digest: str | None = None
    """Content hash of the output: the non-determinism check groups these instead of reading outputs."""
    gate_count: int | None = None
    """How many gates checked this attempt (0: none); NULL for records written before it was stored."""
    gates_failed: int | None = None
    """How many of them failed: ``stats`` reads verdicts from here instead of joining ``gate_results``."""
    traceback: str | None = Field(default=None, sa_column=Column(Text))
    """The full traceback of a failed attempt (formatted in the child for ``isolation: process``)."""
    superseded_by: int | None = None
    """The review that superseded this record (a reviewer fixed an upstream step): kept, never deleted,
    but no longer the step's live result; the step runs again when the run continues."""


class GateResultRow(SQLModel, table=True):
    """One gate (or critic) verdict on one step record."""

    __tablename__ = "gate_results"
    id: int | None = Field(default=None, primary_key=True)
    record_id: int = Field(foreign_key="step_records.id", index=True)
    run_pk: int = Field(index=True)
    step_id: str
    gate: str
    passed: bool
    score: float | None = None
    reason: str = Field(sa_column=Column(Text, nullable=False))
    details: str | None = Field(default=None, sa_column=Column(Text))
    severity: str = "block"
    duration: float = 0.0


class ReviewRow(SQLModel, table=True):
    """A human decision on a paused step. One decision per paused record: the database says who won."""

    __tablename__ = "reviews"
    __table_args__ = (UniqueConstraint("record_id", name="uq_reviews_record"),)
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", index=True)
    record_id: int = Field(foreign_key="step_records.id")
    step_id: str
    decision: str
    reviewer: str
    comment: str | None = Field(default=None, sa_column=Column(Text))
    output_before: str | None = Field(default=None, sa_column=Column(Text))
    output_after: str | None = Field(default=None, sa_column=Column(Text))
    forced: bool = False
    rerun_side_effects: bool | None = None
    """For a fix of an upstream step: whether the reviewer accepted re-running steps with side effects."""
    created_at: float


class OutcomeRow(SQLModel, table=True):
    """A final-output signal: reward, source and termination condition."""

    __tablename__ = "outcomes"
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", index=True)
    value: float
    correct: bool | None = None
    source: str
    termination: str
    reason: str | None = Field(default=None, sa_column=Column(Text))
    reviewer: str | None = None
    created_at: float
    evaluator_reason: str | None = Field(default=None, sa_column=Column(Text))
    """Why the evaluator gave this score, when it returned a reason with it."""


class AttributionRow(SQLModel, table=True):
    """How an outcome was distributed over steps and agents (a credit assignment log entry)."""

    __tablename__ = "attributions"
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", index=True)
    outcome_id: int | None = Field(default=None, foreign_key="outcomes.id")
    method: str
    params: str = Field(sa_column=Column(Text, nullable=False))
    step_credits: str = Field(sa_column=Column(Text, nullable=False))
    agent_credits: str = Field(sa_column=Column(Text, nullable=False))
    blamed_step: str | None = None
    confidence: float | None = None
    evidence: str = Field(sa_column=Column(Text, nullable=False))
    cost: int = 0
    """Step executions spent (replays), so accuracy can be weighed against price."""
    created_at: float


metadata = SQLModel.metadata
"""The schema every SQL store creates."""

TABLES: dict[str, Table] = {
    name: metadata.tables[name]
    for name in ("workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions")
}
"""The tables by name, in dependency order (what ``count_rows`` reports)."""
