"""The database schema, declared with SQLModel on private MetaData. Only the SQL stores use these tables.

Timestamps are epoch seconds (REAL), JSON is TEXT: both work unchanged on SQLite and
PostgreSQL, and a small step costs well under 300 bytes. Records are append-only: a review
adds a record or a row, it never rewrites what a step produced.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    or_,
)
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

metadata = MetaData()
"""The schema every SQL store creates: private to the store, never SQLModel's process-wide
``SQLModel.metadata``, so an application with its own SQLModel ``runs`` table can import the store,
and its ``create_all`` never creates our tables in its database."""


ADDED_BY_RELEASE = {"added_by_release": True}
"""The ``info`` of the columns the first release itself added with ``ALTER TABLE`` to databases of
earlier builds: an unversioned database lacking them gets them before it is stamped as the release
schema (:mod:`orchestrator.store.migrate`)."""


class StoreModel(SQLModel, registry=registry(metadata=metadata)):
    """The base of the store's table classes: they register on :data:`metadata` alone."""


class WorkflowRow(StoreModel, table=True):
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


class RunRow(StoreModel, table=True):
    """One execution of a workflow; replays and forks point at their parent."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_status_review_deadline", "status", "review_deadline"),  # a worker's due reviews
    )
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
    trace_id: str | None = Field(default=None, sa_column_kwargs={"info": ADDED_BY_RELEASE})
    lease_token: str | None = Field(default=None, sa_column_kwargs={"info": ADDED_BY_RELEASE})
    """The executor's secret: step records and the run's end are written only while it matches."""
    lease_expires_at: float | None = Field(default=None, sa_column_kwargs={"info": ADDED_BY_RELEASE})
    """When the lease lapses unless renewed by the executor's heartbeat."""
    """The OpenTelemetry trace of the run, so a resumed run and later decisions continue it."""
    created_at: float
    updated_at: float
    reference: str | None = Field(default=None, sa_column=Column(Text))
    """JSON text of the run's reference answer (``run --reference``, ``label --reference``) for its evaluator."""
    review_deadline: float | None = Field(default=None, index=True)
    """A paused run's earliest ``review_timeout``: when a worker must decide a pause (NULL: none will time
    out). Workers query the due ones instead of reading every paused run."""


class StepRecordRow(StoreModel, table=True):
    """One attempt of one step in one run."""

    __tablename__ = "step_records"
    __table_args__ = (
        Index("ix_step_records_run_step_started", "run_pk", "step_id", "started_at"),
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
    llm: str | None = Field(default=None, sa_column=Column(Text, info=ADDED_BY_RELEASE))
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
    item_index: int | None = None
    """The item a ``for_each`` instance ran for (0-based); NULL for a plain step and for the record that
    collects a mapped step's instance outputs into its list."""
    skip_reason: str | None = Field(default=None, sa_column=Column(Text))
    """Why a ``skipped`` record did not run: the ``when`` condition and the values it read, or the
    upstream step that was skipped."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step this record belongs to (1-based); NULL for a step without
    ``repeat:`` and for the record holding a loop's result."""


class GateResultRow(StoreModel, table=True):
    """One gate (or critic) verdict on one step record."""

    __tablename__ = "gate_results"
    __table_args__ = (
        Index("ix_gate_results_run_record", "run_pk", "record_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    record_id: int = Field(foreign_key="step_records.id")
    run_pk: int
    step_id: str
    gate: str
    passed: bool
    score: float | None = None
    reason: str = Field(sa_column=Column(Text, nullable=False))
    details: str | None = Field(default=None, sa_column=Column(Text))
    severity: str = "block"
    duration: float = 0.0


class ModelCallTableRow(StoreModel, table=True):
    """One call to a model: by a step, a judge gate, a critic, an edit's validation or ``ctx.llm``."""

    __tablename__ = "model_calls"
    __table_args__ = (
        Index("ix_model_calls_run", "run_pk"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id")
    record_id: int | None = None
    """The step record the call was made for (its attempt, or the paused record an edit replaces)."""
    step_id: str
    attempt: int
    purpose: str
    """step | critic | judge | validation: what the call was for, so totals can be split by it."""
    gate: str | None = None
    provider: str
    model: str
    started_at: float
    ended_at: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    finish_reason: str | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))
    messages: str | None = Field(default=None, sa_column=Column(Text))
    response: str | None = Field(default=None, sa_column=Column(Text))


class ReviewRow(StoreModel, table=True):
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


class OutcomeRow(StoreModel, table=True):
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


class AttributionRow(StoreModel, table=True):
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


class NotificationRow(StoreModel, table=True):
    """The outbox: a notification written with the pause or end that causes it, delivered later by a sender
    that claims it (``claimed_by`` until ``claimed_until``), so that two senders never both try it at once."""

    __tablename__ = "notifications"
    __table_args__ = (
        Index("ix_notifications_due", "status", "next_try_at"),  # a sender's claim: pending rows that are due
        Index("ix_notifications_run", "run_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    idempotency_key: str = Field(unique=True)
    """The idempotency key receivers see on every try."""
    run_id: str
    workflow: str
    event: str
    target: str = Field(sa_column=Column(Text, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    status: str
    """pending | delivered | failed (given up)."""
    tries: int = 0
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    created_at: float
    next_try_at: float
    delivered_at: float | None = None
    claimed_by: str | None = None
    claimed_until: float | None = None


# -- datasets and experiments (orchestrator.store.sql_datasets) -------------------------------------------


class DatasetRow(StoreModel, table=True):
    """A named dataset and its latest version (each addition of examples makes the next one)."""

    __tablename__ = "datasets"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    version: int
    description: str | None = Field(default=None, sa_column=Column(Text))
    created_at: float
    updated_at: float


class DatasetExampleRow(StoreModel, table=True):
    """One example, append-only: version N of a dataset is every example whose ``version`` is at most N. JSON as
    text (``reference`` and ``label`` NULL when absent); ``source_run_id`` names the run it was taken from."""

    __tablename__ = "dataset_examples"
    __table_args__ = (Index("ix_dataset_examples_dataset_version", "dataset_id", "version"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    version: int
    position: int
    inputs: str = Field(sa_column=Column(Text, nullable=False))
    reference: str | None = Field(default=None, sa_column=Column(Text))
    label: str | None = Field(default=None, sa_column=Column(Text))
    source_run_id: str | None = None
    created_at: float


class ExperimentRow(StoreModel, table=True):
    """One workflow version run on one dataset version."""

    __tablename__ = "experiments"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    dataset_version: int
    workflow_id: int = Field(foreign_key="workflows.id")
    workflow: str
    status: str
    params: str = Field(sa_column=Column(Text, nullable=False))
    summary: str | None = Field(default=None, sa_column=Column(Text))
    created_at: float
    updated_at: float


class ExperimentRunRow(StoreModel, table=True):
    """The run (kind ``experiment``) of one example of an experiment, and what reusing the example's source run
    saved it (``reused_steps``: a JSON list of step ids)."""

    __tablename__ = "experiment_runs"
    __table_args__ = (UniqueConstraint("experiment_id", "example_id", name="uq_experiment_runs_example"),)
    id: int | None = Field(default=None, primary_key=True)
    experiment_id: int = Field(foreign_key="experiments.id")
    example_id: int = Field(foreign_key="dataset_examples.id")
    run_id: str = Field(foreign_key="runs.run_id")
    reused_steps: str = Field(sa_column=Column(Text, nullable=False))
    saved_model_calls: int
    saved_tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
    saved_cost: float
    saved_seconds: float


TABLES: dict[str, Table] = {
    name: metadata.tables[name]
    for name in ("workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions",
                 "model_calls", "notifications", "datasets", "dataset_examples", "experiments", "experiment_runs")
}
"""The tables by name, in dependency order (what ``count_rows`` reports)."""


# -- what some columns' values mean, for the queries that read them ------------------------------------


Clock = float | ColumnElement[float]
"""Now, in epoch seconds: this host's, or an expression for the database server's (the SQL store judges
leases by the server's clock on PostgreSQL)."""


def interrupted(now: Clock) -> ColumnElement[bool]:
    """A run shown as ``interrupted``: stored ``running``, its lease lapsed (its executor died)."""
    runs = TABLES["runs"].c
    return and_(runs.status == "running", runs.lease_expires_at < now)


def running(now: Clock) -> ColumnElement[bool]:
    """A run shown as ``running``: stored so, under a live lease or none (NULL < now is NULL in SQL)."""
    runs = TABLES["runs"].c
    return and_(runs.status == "running", or_(runs.lease_expires_at.is_(None), runs.lease_expires_at >= now))


def lease_free(token: str, now: Clock) -> ColumnElement[bool]:
    """A run whose lease the holder of ``token`` may take: nobody holds it, it lapsed, or it is this very token."""
    runs = TABLES["runs"].c
    return or_(runs.lease_token.is_(None), runs.lease_expires_at < now, runs.lease_token == token)


def child_runs_of_unit_sql(parents: str) -> str:
    """SQL condition on ``runs r``: a child run that a run selected by ``parents`` (a condition on ``runs p``)
    started at the unit ``:step``, one of its instances (``:step_item``, ``STEP[``) or one of its iterations
    (``:step_iteration``, ``STEP#``); ``:step_len`` is the length of those prefixes."""
    return f"""r.kind = 'child' AND r.parent_run_id IN (SELECT p.run_id FROM runs p WHERE {parents})
        AND (r.parent_step = :step OR SUBSTR(r.parent_step, 1, :step_len) IN (:step_item, :step_iteration))"""


def named(table: Table, name: str) -> ColumnElement[bool]:
    """The row of a dataset or an experiment with this name (each name is unique in its table)."""
    return table.c.name == name


def key(table: Table) -> Column[int]:
    """A table's integer primary key column (``id``)."""
    return table.c.id


def live_record() -> ColumnElement[bool]:
    """A step record no review's fix has superseded: still its step's result."""
    return TABLES["step_records"].c.superseded_by.is_(None)


# -- the analytics summary (orchestrator.store.sql_summary) ---------------------------------------------
#
# Derived data only: every row can be recomputed from the tables above, and the summary is brought up
# to date by the reads that use it (never by the write path: a step record's INSERT does no extra work).
# Plain ``Table`` objects rather than SQLModel classes: nothing maps rows to objects here, and building
# a SQLModel class costs start-up time every command that imports this module pays.

analytics_state = Table(
    "analytics_state", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("runs", BigInteger, nullable=False),
    Column("records", BigInteger, nullable=False),
    Column("outcomes", BigInteger, nullable=False),
    Column("attributions", BigInteger, nullable=False),
)
"""One row (id 1): the highest id of each source table the summary has read. Everything up to these
ids is summarised; the next read summarises only what lies above them."""

analytics_runs = Table(
    "analytics_runs", metadata,
    Column("run_pk", Integer, primary_key=True, autoincrement=False),
    Column("workflow", String, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("steps", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("incorrect", Boolean, nullable=False),
    Column("blamed_step", String, nullable=True),
    Column("method", String, nullable=True),
    Index("ix_analytics_runs_workflow_start", "workflow", "started_at"),
)
"""Per production run, what it last contributed to the counts below: its start (whose day is its
period), its trajectory, its outcome state. Kept so that a run changing (a new record, outcome or
attribution record) can be taken out of its old counts and put into its new ones."""

analytics_series = Table(
    "analytics_series", metadata,
    Column("id", Integer, primary_key=True),
    Column("workflow", String, nullable=False),
    Column("step_id", String, nullable=False),
    Column("repeated", Integer, nullable=False),
    Column("varied", Integer, nullable=False),
    Column("not_covered", Integer, nullable=False),
    Column("first_output", BigInteger, nullable=True),
    UniqueConstraint("workflow", "step_id", name="uq_analytics_series_step"),
)
"""One step of one workflow (the key of the per-day rows), with its non-determinism counts
(:class:`~orchestrator.store.analytics.NondeterminismCounts`; ``first_output`` is its first record)."""

analytics_days = Table(
    "analytics_days", metadata,
    Column("series", Integer, primary_key=True, autoincrement=False),
    Column("day", Integer, primary_key=True, autoincrement=False),
    Column("agent", String, nullable=False),
    Column("first_record", BigInteger, nullable=False),
    *(Column(name, BigInteger, nullable=False) for name in (
        "runs", "gated_runs", "gate_passes", "attempts", "failures", "gate_failures", "retries", "model_records",
        "model_calls", "input_tokens", "output_tokens", "priced_records")),
    Column("cost", Float, nullable=False),
    Column("skipped_runs", BigInteger, nullable=False, server_default="0"),
    sqlite_with_rowid=False,
)
""":class:`~orchestrator.store.analytics.StepPeriodCounts` of one step over the runs starting on one
UTC day (``day``: days since the epoch). A week is the sum of its seven days."""

analytics_inputs = Table(
    "analytics_inputs", metadata,
    Column("series", Integer, primary_key=True, autoincrement=False),
    Column("inputs", String, primary_key=True),
    Column("runs", Integer, nullable=False),
    Column("output", String, nullable=True),
    Column("varied", Boolean, nullable=False),
    sqlite_with_rowid=False,
)
"""Per step and inputs digest: how many runs' first output came from these inputs, one of their
output digests, and whether two differed. Needed to tell, when a run arrives, whether its inputs
were seen before; one row per distinct inputs of a step (few when steps repeat their inputs)."""

analytics_outcomes = Table(
    "analytics_outcomes", metadata,
    Column("id", Integer, primary_key=True),
    Column("workflow", String, nullable=False),
    Column("day", Integer, nullable=False),
    Column("incorrect", Boolean, nullable=False),
    Column("blamed_step", String, nullable=True),
    Column("method", String, nullable=True),
    Column("runs", BigInteger, nullable=False),
    Index("ix_analytics_outcomes_workflow_day", "workflow", "day"),
)
""":class:`~orchestrator.store.analytics.OutcomeCounts` of the runs starting on one UTC day."""

analytics_trajectories = Table(
    "analytics_trajectories", metadata,
    Column("workflow", String, primary_key=True),
    Column("steps", Integer, primary_key=True, autoincrement=False),
    Column("attempts", Integer, primary_key=True, autoincrement=False),
    Column("runs", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)
""":class:`~orchestrator.store.analytics.TrajectoryCounts` per workflow."""

ANALYTICS_TABLES: dict[str, Table] = {t.name: t for t in (
    analytics_state, analytics_runs, analytics_series, analytics_days, analytics_inputs, analytics_outcomes,
    analytics_trajectories)}
"""The summary's tables (not in :data:`TABLES`: they hold no data of their own)."""
