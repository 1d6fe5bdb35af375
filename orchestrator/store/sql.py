"""The SQLAlchemy store: any SQLAlchemy URL, PostgreSQL (psycopg 3) the multi-worker backend.

SQLAlchemy Core on one held connection, guarded by a lock so threads (the TUI's workers) may
share one store; one transaction per written record. Hot statements are built once and run
with parameters: building ``insert().values(...)`` per call costs more than the INSERT itself.
:class:`~orchestrator.store.sqlite.SqliteStore` keeps this reading code and replaces the
hottest writes with a DBAPI fast path.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import (
    Float,
    and_,
    bindparam,
    cast,
    create_engine,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

import orchestrator.store.sql_analytics as sql_analytics
import orchestrator.store.sql_datasets as sql_datasets
import orchestrator.store.sql_live_analytics as sql_live_analytics
from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, NotFoundError, RunBusyError
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
from orchestrator.store.analytics import (
    PRODUCTION_KINDS,
    PRODUCTION_SQL,
    AttributionCounts,
    ModelCallGroup,
    NondeterminismCounts,
    OutcomeCounts,
    OutcomeSummary,
    RunCounts,
    StepPeriodCounts,
    TrajectoryCounts,
)
from orchestrator.store.base import Store, already_decided, lease_lost
from orchestrator.store.bounded import BoundedCache
from orchestrator.store.digests import RecordDigests
from orchestrator.store.rows import (
    GATE_COLUMNS,
    GATE_VERDICT_COLUMNS,
    MODEL_CALL_COLUMNS,
    NOTIFICATION_COLUMNS,
    OUTBOX_BY_ID,
    OUTBOX_CLAIM,
    OUTBOX_CLAIM_HOLDERS,
    OUTBOX_DUE,
    OUTBOX_DUE_OF_RUN,
    OUTBOX_FINISH,
    OUTBOX_INSERT,
    OUTBOX_LIST,
    OUTBOX_LIST_FAILED,
    OUTBOX_LIST_OF_RUN,
    OUTBOX_RELEASE,
    RUN_COLUMNS,
    STEP_COLUMNS,
    STEP_HISTORY_COLUMNS,
    STORED_OUTPUT_DIGESTS,
    UNCHANGED,
    Lease,
    ModelCall,
    NewAttribution,
    NewDecision,
    NewNotification,
    NewOutcome,
    NewReview,
    NewRun,
    NewStepRecord,
    RunEnd,
    StepHistoryRow,
    attribution_values,
    attribution_view,
    gate_values,
    gate_view,
    gates_passed,
    hand_back_values,
    lease_values,
    model_call_values,
    model_call_view,
    new_run_id,
    notification_outcome_values,
    notification_values,
    notification_view,
    outcome_values,
    outcome_view,
    output_digests,
    record_view,
    reference_values,
    release_values,
    renewal_values,
    review_values,
    review_view,
    run_update_values,
    run_values,
    run_view,
    step_history_row,
    step_values,
    trace_values,
)
from orchestrator.store.tables import TABLES, interrupted, lease_free, running
from orchestrator.store.transient import (
    RetriedStore,
    insert_once,
    is_missing_reference,
    retry_opening,
    retry_seconds,
)
from orchestrator.store.triage import RunPage, RunQuery

workflows_t = TABLES["workflows"]
runs_t = TABLES["runs"]
steps_t = TABLES["step_records"]
gates_t = TABLES["gate_results"]
reviews_t = TABLES["reviews"]
outcomes_t = TABLES["outcomes"]
attributions_t = TABLES["attributions"]
calls_t = TABLES["model_calls"]

_insert_steps = insert(steps_t)
_insert_gates = insert(gates_t)
_insert_calls = insert(calls_t)
_insert_runs = insert(runs_t)
update_run_by_pk = update(runs_t).where(runs_t.c.id == bindparam("pk_"))
_stored_output_digests = text(STORED_OUTPUT_DIGESTS.format(ids=":ids_")).bindparams(
    bindparam("ids_", expanding=True))
_find_workflow = select(workflows_t.c.id, workflows_t.c.source).where(
    and_(workflows_t.c.name == bindparam("name_"), workflows_t.c.content_hash == bindparam("hash_")))


def new_key(result: CursorResult[Any]) -> int:
    """The primary key an INSERT created."""
    key = result.inserted_primary_key
    assert key is not None, "an INSERT always has a primary key"
    return int(key[0])


_insert_leased_step = insert(steps_t).from_select(
    list(STEP_COLUMNS),
    select(*(bindparam(c, type_=steps_t.c[c].type) for c in STEP_COLUMNS)).where(exists().where(
        and_(runs_t.c.id == bindparam("pk_"), runs_t.c.lease_token == bindparam("token_"))))).returning(steps_t.c.id)
"""INSERT ... SELECT ... WHERE the run's lease still has the writer's token: a stalled executor that
lost its lease writes nothing, and the check costs one primary-key lookup in the same statement."""


class NotPausedError(Exception):
    """Aborts a decision transaction because the run left ``paused``."""


class SqlStore(RetriedStore, Store):
    """A store on any SQLAlchemy URL; the schema is created on first use, in an empty database only (and
    with ``create=False``, for commands that only read, not even there)."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self.create = create
        self.retry_budget = retry_seconds()
        try:
            self.engine: Engine = self.create_engine()
            self.conn: Connection = retry_opening(self.display_url, self.open_connection)
        except (SQLAlchemyError, ImportError, OSError) as exc:  # not transient: the URL, the credentials, ...
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"cannot open the database {self.display_url}: {detail}; "
                             "check --db or ORCHESTRATOR_DB") from None
        self.lock: AbstractContextManager[Any] = threading.RLock()
        """Serialises the use of the one held connection (a SQLite store's side shares its owner's)."""
        self.run_pks: BoundedCache[str, int] = BoundedCache()
        self.digests = RecordDigests(self.stored_output_digests)

    def open_connection(self) -> Connection:
        """One try at opening: the schema created or upgraded if needed, then the connection this store holds."""
        self.create_schema()
        return self.engine.connect()

    def reconnect(self) -> None:
        """Replace the held connection with a fresh one from the pool (pre-pinged); the old one may be
        dead after a transient error. Raises while the server is still unreachable."""
        with self.lock:
            fresh = self.engine.connect()  # first: while the server is away, the old one stays (invalidated,
            old, self.conn = self.conn, fresh  # it reconnects on its next use)
            with contextlib.suppress(Exception):
                old.invalidate()
            with contextlib.suppress(Exception):
                old.close()

    def create_engine(self) -> Engine:
        """The engine for this URL; dialect stores override it to add their settings."""
        return create_engine(self.url, pool_pre_ping=True)

    def create_schema(self) -> None:
        """Create the tables of a new database, or upgrade an older one (one SELECT when current)."""
        from orchestrator.store.migrate import ensure_schema

        ensure_schema(self.engine, create=self.create)

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            self.engine.dispose()

    def read(self, *statements: Any) -> Any:
        """Run read statements in one short transaction, ended even when a statement fails.

        Ending it in ``finally`` matters on PostgreSQL: a failed statement leaves the held
        connection's transaction aborted, and every later statement would fail with it.
        Returns the rows of one statement, or a tuple of row lists for several.
        """
        with self.lock:
            try:
                results = tuple(list(self.conn.execute(s).all()) for s in statements)
            finally:
                self.conn.rollback()
        return results[0] if len(statements) == 1 else results

    # -- workflows and runs -----------------------------------------------------------------

    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                          content_hash: str) -> int:
        """Insert-or-get on (name, content_hash): when another process inserts the same version between
        this SELECT and INSERT, the unique constraint refuses the second row and the winner's is read."""
        for attempt in (1, 2):
            try:
                with self.lock, self.conn.begin():
                    row = self.conn.execute(_find_workflow, {"name_": name, "hash_": content_hash}).first()
                    if row is not None:
                        found, stored_source = row
                        if source and source != stored_source:  # writing the same value again changes nothing
                            self.conn.execute(update(workflows_t).where(workflows_t.c.id == found)
                                              .values(source=source))
                        return int(found)
                    return int(new_key(self.conn.execute(insert(workflows_t).values(
                        name=name, version=str(version), content_hash=content_hash,
                        definition=jsonio.dumps(definition), source=source, created_at=time.time()))))
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        rows = self.read(select(workflows_t.c.definition, workflows_t.c.source)
                         .where(workflows_t.c.id == workflow_id))
        if not rows:
            raise NotFoundError(f"workflow definition {workflow_id} is not stored")
        return jsonio.loads(rows[0].definition), rows[0].source

    def create_run(self, run: NewRun, *, lease: Lease | None = None) -> str:
        run_id = new_run_id()
        values = run_values(run_id, run, lease)
        self.run_pks[run_id] = insert_once(self, lambda: self.insert_run(values, lease),
                                           lambda: self.find_run_pk(run_id))
        return run_id

    def find_run_pk(self, run_id: str) -> int | None:
        rows = self.read(select(runs_t.c.id).where(runs_t.c.run_id == run_id))
        return int(rows[0].id) if rows else None

    def insert_run(self, values: tuple[Any, ...], lease: Lease | None = None) -> int:
        """Insert a run row (values in ``RUN_COLUMNS`` order); returns its primary key. A run created
        under ``lease`` has its expiry and heartbeat set by :meth:`clock`."""
        row = dict(zip(RUN_COLUMNS, values, strict=True))
        try:
            with self.lock, self.conn.begin():
                if lease is None:
                    return new_key(self.conn.execute(_insert_runs, row))
                clock = self.clock()
                row.update(renewal_values(lease, clock))
                return new_key(self.conn.execute(insert(runs_t).values(**row)))
        except IntegrityError as exc:
            if is_missing_reference(exc):
                raise NotFoundError(f"workflow definition {values[1]} is not stored") from None
            raise

    def run_pk(self, run_id: str) -> int:
        """The integer key of a run (cached: run ids never change)."""
        pk = self.run_pks.get(run_id)
        if pk is None:
            pk = self.find_run_pk(run_id)
            if pk is None:
                raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
            self.run_pks[run_id] = pk
        return pk

    def set_run_status(self, run_id: str, status: str, *, output: Any = None, error: str | None = None,
                       expect: Iterable[str] | None = None, holder: str | None = UNCHANGED) -> bool:
        values = run_update_values(status, output, error, holder)
        pk = self.run_pk(run_id)
        if expect is None:
            return self.update_run(pk, values)
        cond = and_(runs_t.c.id == pk, runs_t.c.status.in_(list(expect)))
        with self.lock, self.conn.begin():
            return self.conn.execute(update(runs_t).where(cond).values(**values)).rowcount == 1

    def update_run(self, pk: int, values: dict[str, Any]) -> bool:
        """Unconditional update of one run's columns."""
        with self.lock, self.conn.begin():
            return self.conn.execute(update_run_by_pk, {"pk_": pk, **values}).rowcount == 1

    def set_trace_id(self, run_id: str, trace: str) -> None:
        self.update_run(self.run_pk(run_id), trace_values(trace))

    def set_reference(self, run_id: str, answer: Any) -> None:
        self.update_run(self.run_pk(run_id), reference_values(answer))

    def clock(self) -> ColumnElement[float]:
        """Now, in epoch seconds, by the clock that judges leases: the server's on PostgreSQL, so that a
        host whose clock runs fast cannot see a live lease as expired (nor a slow one extend its own);
        elsewhere (SQLite: one host) this host's."""
        if self.engine.dialect.name == "postgresql":
            return cast(func.extract("epoch", func.clock_timestamp()), Float)
        return literal(time.time(), Float)

    def acquire_lease(self, lease: Lease, *, statuses: Iterable[str]) -> bool:
        now = self.clock()
        free = lease_free(lease.token, now)
        with self.lock, self.conn.begin():
            return bool(self.conn.execute(update(runs_t).where(
                and_(runs_t.c.run_id == lease.run_id, runs_t.c.status.in_(list(statuses)), free))
                .values(lease_values(lease, now))).rowcount == 1)

    def renew_lease(self, lease: Lease) -> bool:
        now = self.clock()
        with self.lock, self.conn.begin():
            return bool(self.conn.execute(update(runs_t).where(
                and_(runs_t.c.run_id == lease.run_id, runs_t.c.lease_token == lease.token))
                .values(renewal_values(lease, now))).rowcount == 1)

    def hand_back_lease(self, lease: Lease) -> bool:
        with self.lock, self.conn.begin():
            return bool(self.conn.execute(update(runs_t).where(
                and_(runs_t.c.run_id == lease.run_id, runs_t.c.lease_token == lease.token))
                .values(hand_back_values(self.clock()))).rowcount == 1)

    def due_reviews(self, now: float, *, limit: int = 100) -> list[tuple[str, float]]:
        rows = self.read(select(runs_t.c.run_id, runs_t.c.review_deadline).where(
            and_(runs_t.c.review_deadline <= now, runs_t.c.status == "paused"))
            .order_by(runs_t.c.review_deadline).limit(limit))
        return [(row.run_id, row.review_deadline) for row in rows]

    def set_review_deadline(self, run_id: str, deadline: float | None, *, was: float) -> bool:
        with self.lock, self.conn.begin():
            return bool(self.conn.execute(update(runs_t).where(
                and_(runs_t.c.run_id == run_id, runs_t.c.status == "paused", runs_t.c.review_deadline == was))
                .values(review_deadline=deadline)).rowcount == 1)

    def expire_lease(self, run_id: str, holder: str) -> bool:
        now = self.clock()
        with self.lock, self.conn.begin():
            return bool(self.conn.execute(update(runs_t).where(
                and_(runs_t.c.run_id == run_id, runs_t.c.owner == holder, runs_t.c.lease_token.is_not(None),
                     runs_t.c.lease_expires_at >= now)).values(lease_expires_at=now)).rowcount == 1)

    def end_lease(self, lease: Lease, status: str, *, output: Any = None, error: str | None = None,
                  outcome: NewOutcome | None = None, review_due: float | None = None,
                  notifications: Sequence[NewNotification] = ()) -> bool:
        run_pk = self.run_pk(lease.run_id) if outcome is not None else 0
        with self.lock, self.conn.begin():
            if not self.write_end(lease, status, output, error, review_due):
                return False
            if outcome is not None:
                self.insert_outcome(outcome, run_pk)
            self.write_notifications(notifications)
            return True

    def write_end(self, lease: Lease, status: str, output: Any, error: str | None,
                  review_due: float | None = None) -> bool:
        """The run's end and a released lease, inside the caller's transaction, only while the lease is held."""
        return bool(self.conn.execute(update(runs_t).where(
            and_(runs_t.c.run_id == lease.run_id, runs_t.c.lease_token == lease.token))
            .values(release_values(status, output, error, review_due))).rowcount == 1)

    def get_run(self, run_id: str) -> RunView:
        rows = self.read(select(runs_t).where(runs_t.c.run_id == run_id))
        if not rows:
            raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
        return run_view(rows[0])

    def claim_queued_run(self, lease: Lease) -> str | None:
        """Optimistic claiming: a conditional UPDATE per candidate, so exactly one racing worker wins.

        No lock is held between statements, so a worker stopped mid-claim cannot stall the others.
        """
        while True:
            candidates = self.read(select(runs_t.c.id, runs_t.c.run_id).where(runs_t.c.status == "queued")
                                   .order_by(runs_t.c.id).limit(8))
            if not candidates:
                return None
            for pk, run_id in candidates:
                now = self.clock()
                with self.lock, self.conn.begin():
                    claimed = self.conn.execute(update(runs_t).where(
                        and_(runs_t.c.id == pk, runs_t.c.status == "queued")).values(lease_values(lease, now))).rowcount
                if claimed == 1:
                    return str(run_id)

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        query = select(runs_t).order_by(runs_t.c.id.desc()).limit(limit)
        now = self.clock()
        if status == "interrupted":
            query = query.where(interrupted(now))
        elif status == "running":
            query = query.where(running(now))
        elif status:
            query = query.where(runs_t.c.status == status)
        if workflow:
            query = query.where(runs_t.c.workflow == workflow)
        if kind:
            query = query.where(runs_t.c.kind == kind)
        return [run_view(r) for r in self.read(query)]

    def triage_runs(self, query: RunQuery) -> RunPage:
        from orchestrator.store.sql_triage import triage_page

        return triage_page(self.read, query)

    def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        query = (select(runs_t.c.run_id).where(runs_t.c.run_id.startswith(prefix, autoescape=True))
                 .order_by(runs_t.c.run_id).limit(limit))
        return [str(row.run_id) for row in self.read(query)]

    def run_ids_starting_any(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        found: set[str] = set()
        for chunk in _chunks(sorted(set(prefixes))):
            query = (select(runs_t.c.run_id)
                     .where(or_(*(runs_t.c.run_id.startswith(prefix, autoescape=True) for prefix in chunk)))
                     .order_by(runs_t.c.run_id).limit(limit))
            found.update(str(row.run_id) for row in self.read(query))
        return sorted(found)[:limit]

    def child_runs(self, run_id: str) -> list[RunView]:
        return [run_view(r) for r in self.read(select(runs_t).where(runs_t.c.parent_run_id == run_id)
                                               .order_by(runs_t.c.id))]

    def child_runs_of(self, run_ids: Sequence[str]) -> dict[str, list[RunView]]:
        found: dict[str, list[RunView]] = {}
        for chunk in _chunks(run_ids):
            for row in self.read(select(runs_t).where(runs_t.c.parent_run_id.in_(chunk)).order_by(runs_t.c.id)):
                found.setdefault(row.parent_run_id, []).append(run_view(row))
        return found

    def run_ids_by_pk(self, run_ids: Sequence[str]) -> dict[int, str]:
        """The integer keys of these runs (those that exist), to the run ids."""
        return {pk: run_id for chunk in _chunks(run_ids)
                for pk, run_id in self.read(select(runs_t.c.id, runs_t.c.run_id).where(runs_t.c.run_id.in_(chunk)))}

    # -- step records ------------------------------------------------------------------------

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        run_pks = [self.run_pk(record.run_id) for record in records]
        with self.lock:
            with self.conn.begin():
                ids = [self.write_record(record, run_pk) for record, run_pk in zip(records, run_pks, strict=True)]
                if end is not None:
                    if not self.write_end(end.lease, end.status, end.output, None):
                        raise lease_lost(end.lease.run_id)
                    self.write_notifications(end.notifications)
            for record_id, record in zip(ids, records, strict=True):  # committed: consumers may look them up
                self.digests.remember(record_id, record)
        return ids

    def write_record(self, record: NewStepRecord, run_pk: int) -> int:
        """Insert a record and its gates inside the caller's transaction (under its lease, when it names one).

        Its output digest is remembered by the caller once the transaction commits: a rolled-back
        record's id may be given to another record."""
        self.digests.fill(record)
        params = dict(zip(STEP_COLUMNS, step_values(record, run_pk), strict=True))
        if record.lease_token is None:
            record_id = new_key(self.conn.execute(_insert_steps, params))
        else:
            found = self.conn.execute(_insert_leased_step, {**params, "pk_": run_pk, "token_": record.lease_token})
            key = found.scalar()
            if key is None:
                raise lease_lost(record.run_id)
            record_id = int(key)
        if record.gates:
            self.conn.execute(_insert_gates, [dict(zip(GATE_COLUMNS, gate_values(g, record_id, run_pk,
                                                                                  record.step_id), strict=True))
                                              for g in record.gates])
        if record.model_calls:
            self.write_calls(run_pk, record_id, record, record.model_calls)
        return record_id

    def write_calls(self, run_pk: int, record_id: int | None, owner: Any, calls: Sequence[ModelCall]) -> None:
        """Insert model calls made for ``owner`` (:func:`~orchestrator.store.rows.model_call_values`)."""
        self.conn.execute(_insert_calls, [dict(zip(MODEL_CALL_COLUMNS, model_call_values(c, run_pk, record_id, owner),
                                                   strict=True)) for c in calls])

    def add_model_calls(self, run_id: str, record_id: int, calls: Sequence[ModelCall]) -> None:
        if not calls:
            return
        run_pk = self.run_pk(run_id)
        owner = self.read(select(steps_t.c.step_id, steps_t.c.attempt).where(steps_t.c.id == record_id))[0]
        with self.lock, self.conn.begin():
            self.write_calls(run_pk, record_id, owner, calls)

    def model_calls(self, run_ids: Sequence[str]) -> list[ModelCallView]:
        out: list[ModelCallView] = []
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # bounded IN lists
            chunk = ids[start:start + 500]
            rows = self.read(select(calls_t, runs_t.c.run_id.label("run_id_"))
                             .join(runs_t, runs_t.c.id == calls_t.c.run_pk).where(runs_t.c.run_id.in_(chunk))
                             .order_by(calls_t.c.id))
            out.extend(model_call_view(r, r.run_id_) for r in rows)
        return out

    def workflow_model_calls(self, workflow: str, *, since: float | None = None) -> list[ModelCallView]:
        query = (select(calls_t, runs_t.c.run_id.label("run_id_")).join(runs_t, runs_t.c.id == calls_t.c.run_pk)
                 .where(and_(runs_t.c.workflow == workflow, runs_t.c.kind.in_(PRODUCTION_KINDS)))
                 .order_by(calls_t.c.id))
        if since is not None:
            query = query.where(calls_t.c.started_at >= since)
        return [model_call_view(r, r.run_id_) for r in self.read(query)]

    def workflow_model_usage(self, workflow: str, *, since: float | None = None) -> list[ModelCallGroup]:
        from orchestrator.store.sql_counting import DAY, day_expr

        dialect = self.engine.dialect.name
        answered = "mc.error IS NULL"
        rows = self.read(text(f"""
            SELECT mc.step_id, mc.purpose, mc.gate, {day_expr('mc.started_at', dialect)} AS day, COUNT(*) AS calls,
                   SUM(mc.input_tokens) AS input_tokens, SUM(mc.output_tokens) AS output_tokens,
                   SUM(CASE WHEN {answered} THEN mc.cost ELSE 0 END) AS cost,
                   SUM(CASE WHEN {answered} AND mc.cost IS NULL THEN 1 ELSE 0 END) AS unpriced
            FROM model_calls mc JOIN runs r ON r.id = mc.run_pk
            WHERE r.workflow = :workflow AND r.kind IN {PRODUCTION_SQL} AND mc.started_at >= :since
            GROUP BY mc.step_id, mc.purpose, mc.gate, {day_expr('mc.started_at', dialect)}""").bindparams(
            workflow=workflow, since=-1.0 if since is None else since))
        return [ModelCallGroup(r.step_id, r.purpose, r.gate, float(r.day) * DAY, int(r.calls),
                               int(r.input_tokens or 0), int(r.output_tokens or 0), float(r.cost or 0.0),
                               int(r.unpriced or 0)) for r in rows]

    def stored_output_digests(self, ids: Iterable[int]) -> dict[int, str | None]:
        """Output digests of stored records (for inputs digests); runs inside a caller's transaction if one is open."""
        query = _stored_output_digests.bindparams(ids_=list(ids))
        with self.lock:
            rows = self.conn.execute(query).all() if self.conn.in_transaction() else self.read(query)
        return output_digests(rows)

    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        run_pk = self.run_pk(run_id)
        rows, gate_rows = self.read(select(steps_t).where(steps_t.c.run_pk == run_pk).order_by(steps_t.c.id),
                                    select(gates_t).where(gates_t.c.run_pk == run_pk).order_by(gates_t.c.id))
        gates: dict[int, list[GateView]] = {}
        for g in gate_rows:
            gates.setdefault(g.record_id, []).append(gate_view(g))
        views = [record_view(r, run_id, gates.get(r.id, [])) for r in rows]
        if latest_only:
            return list({v.unit: v for v in views}.values())
        return views

    def step_records_of(self, run_ids: Sequence[str]) -> dict[str, list[StepRecordView]]:
        found: dict[str, list[StepRecordView]] = {}
        by_pk = self.run_ids_by_pk(run_ids)
        for chunk in _chunks(list(by_pk)):
            rows, gate_rows = self.read(
                select(steps_t).where(steps_t.c.run_pk.in_(chunk)).order_by(steps_t.c.id),
                select(gates_t).where(gates_t.c.run_pk.in_(chunk)).order_by(gates_t.c.id))
            gates: dict[int, list[GateView]] = {}
            for g in gate_rows:
                gates.setdefault(g.record_id, []).append(gate_view(g))
            for r in rows:
                run_id = by_pk[r.run_pk]
                found.setdefault(run_id, []).append(record_view(r, run_id, gates.get(r.id, [])))
        return found

    def llm_records(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # bounded IN lists
            rows = self.read(select(runs_t.c.run_id, steps_t.c.llm).join(runs_t, runs_t.c.id == steps_t.c.run_pk)
                             .where(and_(runs_t.c.run_id.in_(ids[start:start + 500]), steps_t.c.llm.is_not(None),
                                         steps_t.c.origin == "executed")).order_by(steps_t.c.id))
            for row in rows:
                out.setdefault(row.run_id, []).append(jsonio.loads(row.llm))
        return out

    def step_history(self, workflow: str, *, since: float | None = None) -> list[StepHistoryRow]:
        query = (select(*(steps_t.c[name] for name in STEP_HISTORY_COLUMNS), runs_t.c.run_id)
                 .join(runs_t, runs_t.c.id == steps_t.c.run_pk)
                 .where(and_(runs_t.c.workflow == workflow, runs_t.c.kind.in_(PRODUCTION_KINDS)))
                 .order_by(steps_t.c.id))
        if since is not None:
            query = query.where(steps_t.c.started_at >= since)
        rows, gate_rows = self.read(
            query, select(*(gates_t.c[name] for name in GATE_VERDICT_COLUMNS))
            .join(runs_t, runs_t.c.id == gates_t.c.run_pk).where(runs_t.c.workflow == workflow))
        gate_pass = gates_passed(gate_rows)
        return [step_history_row(r, gate_pass.get(r.id)) for r in rows]

    # -- reviews ------------------------------------------------------------------------------

    def decide(self, review: NewReview, *, new_records: Sequence[NewStepRecord] = (),
               run_status: str = "running", lease: Lease | None = None, supersede: Sequence[int] = (),
               from_statuses: Sequence[str] = ("paused",)) -> int:
        return self.decide_all([NewDecision(review, new_records, run_status, lease, supersede, from_statuses)])[0]

    def decide_all(self, decisions: Sequence[NewDecision]) -> list[int]:
        """The unique constraint on ``reviews.record_id`` makes the database the referee; each run's
        conditional update (its state, and a free lease when the decision claims one) is the last
        statement of its decision, so a refused decision rolls every one of them back."""
        run_pks = [self.run_pk(d.target_run_id) for d in decisions]
        now = time.time()
        review_ids: list[int] = []
        try:
            with self.lock, self.conn.begin():
                for decision, run_pk in zip(decisions, run_pks, strict=True):
                    review_ids.append(self.apply_decision(decision, run_pk, now))
        except (NotPausedError, IntegrityError) as exc:
            # the decision being applied (those before it returned their ids), or the last one if the commit failed
            refused = decisions[min(len(review_ids), len(decisions) - 1)]
            if isinstance(exc, IntegrityError) and refused.review is not None:
                review = refused.review
                winner = next((r for r in self.reviews(review.run_id) if r.record_id == review.record_id), None)
                raise already_decided(review, winner) from None
            state = " or ".join(refused.from_statuses)
            run_id = refused.target_run_id
            raise RunBusyError(f"run {run_id} is no longer {state} (another decision is being applied); "
                              f"see `orchestrator show {run_id}`") from None
        return review_ids

    def apply_decision(self, decision: NewDecision, run_pk: int, now: float) -> int:
        """One decision's statements, inside the caller's transaction; NotPausedError when its run (or a
        record it supersedes) is no longer as the decision found it."""
        review_id = 0
        if decision.review is not None:
            review_id = new_key(self.conn.execute(insert(reviews_t).values(review_values(decision.review, run_pk,
                                                                                        now))))
        for record in decision.new_records:
            self.write_record(record, run_pk)
        written = [self.write_record(record, run_pk) for record in decision.superseded_records]
        supersede = [*decision.supersede, *written]
        if supersede:
            if decision.review is None:
                raise ValueError("a decision supersedes records only under its review")
            marked = self.conn.execute(update(steps_t).where(and_(
                steps_t.c.id.in_(supersede), steps_t.c.run_pk == run_pk,
                steps_t.c.superseded_by.is_(None))).values(superseded_by=review_id)).rowcount
            if marked != len(set(supersede)):
                raise NotPausedError()
        cond = and_(runs_t.c.id == run_pk, runs_t.c.status.in_(list(decision.from_statuses)))
        # a fixed failed run continues: its error is history (the failed record keeps it)
        values: dict[str, Any] = {"status": decision.run_status, "updated_at": now, "error": decision.error}
        lease = decision.lease
        if lease is not None:
            clock = self.clock()
            cond = and_(cond, lease_free(lease.token, clock))
            values = {**lease_values(lease, clock), **values}  # the decision's status and time
        if self.conn.execute(update(runs_t).where(cond).values(**values)).rowcount != 1:
            raise NotPausedError()
        return int(review_id)

    def reviews(self, run_id: str) -> list[ReviewView]:
        run_pk = self.run_pk(run_id)
        rows = self.read(select(reviews_t).where(reviews_t.c.run_pk == run_pk).order_by(reviews_t.c.id))
        return [review_view(r, run_id) for r in rows]

    def reviews_of(self, run_ids: Sequence[str]) -> dict[str, list[ReviewView]]:
        found: dict[str, list[ReviewView]] = {}
        by_pk = self.run_ids_by_pk(run_ids)
        for chunk in _chunks(list(by_pk)):
            for row in self.read(select(reviews_t).where(reviews_t.c.run_pk.in_(chunk)).order_by(reviews_t.c.id)):
                run_id = by_pk[row.run_pk]
                found.setdefault(run_id, []).append(review_view(row, run_id))
        return found

    # -- outcomes and attribution -------------------------------------------------------------

    def add_outcome(self, outcome: NewOutcome) -> int:
        run_pk = self.run_pk(outcome.run_id)
        with self.lock, self.conn.begin():
            return self.insert_outcome(outcome, run_pk)

    def insert_outcome(self, outcome: NewOutcome, run_pk: int) -> int:
        """Insert an outcome inside the caller's transaction."""
        return new_key(self.conn.execute(insert(outcomes_t).values(outcome_values(outcome, run_pk, time.time()))))

    def outcomes(self, run_id: str) -> list[OutcomeView]:
        run_pk = self.run_pk(run_id)
        rows = self.read(select(outcomes_t).where(outcomes_t.c.run_pk == run_pk).order_by(outcomes_t.c.id))
        return [outcome_view(r, run_id) for r in rows]

    def add_attribution(self, attribution: NewAttribution) -> int:
        a = attribution
        run_pk = self.run_pk(a.run_id)
        try:
            with self.lock, self.conn.begin():
                return self.insert_attribution(a, run_pk)
        except IntegrityError as exc:
            if is_missing_reference(exc):
                raise NotFoundError(f"outcome {a.outcome_id} is not stored") from None
            raise

    def insert_attribution(self, a: NewAttribution, run_pk: int) -> int:
        return new_key(self.conn.execute(insert(attributions_t).values(attribution_values(a, run_pk, time.time()))))

    def attributions(self, run_id: str | None = None, *, workflow: str | None = None) -> list[AttributionView]:
        query = select(attributions_t, runs_t.c.run_id).join(runs_t, runs_t.c.id == attributions_t.c.run_pk) \
            .order_by(attributions_t.c.id)
        if run_id is not None:
            query = query.where(attributions_t.c.run_pk == self.run_pk(run_id))
        if workflow is not None:
            query = query.where(runs_t.c.workflow == workflow)
        return [attribution_view(r) for r in self.read(query)]

    # -- the notification outbox (statements shared with the SQLite store, in rows.py) --

    def write_notifications(self, notifications: Sequence[NewNotification]) -> None:
        """Insert outbox rows inside the caller's transaction."""
        if notifications:
            now = time.time()
            self.conn.execute(text(OUTBOX_INSERT), [dict(zip(NOTIFICATION_COLUMNS, notification_values(n, now),
                                                             strict=True)) for n in notifications])

    def add_notifications(self, notifications: Sequence[NewNotification]) -> None:
        with self.lock, self.conn.begin():
            self.write_notifications(notifications)

    def claim_notifications(self, holder: str, *, now: float, claim_seconds: float, limit: int = 20,
                            run_id: str | None = None) -> list[NotificationView]:
        due = self.read(text(OUTBOX_DUE_OF_RUN if run_id is not None else OUTBOX_DUE)
                        .bindparams(now=now, limit=limit, **({"run_id": run_id} if run_id is not None else {})))
        claimed = []
        for (notification_id,) in due:
            with self.lock, self.conn.begin():
                if self.conn.execute(text(OUTBOX_CLAIM), {"holder": holder, "until": now + claim_seconds,
                                                          "id": notification_id, "now": now}).rowcount == 1:
                    claimed.append(notification_id)
        return [notification_view(self.read(text(OUTBOX_BY_ID).bindparams(id=i))[0]) for i in claimed]

    def finish_notification(self, notification_id: int, holder: str, *, delivered: bool, tries: int,
                            error: str | None, retry_at: float | None, now: float) -> bool:
        values = notification_outcome_values(delivered=delivered, tries=tries, error=error, retry_at=retry_at, now=now)
        with self.lock, self.conn.begin():
            return self.conn.execute(text(OUTBOX_FINISH), {**values, "id": notification_id,
                                                           "holder": holder}).rowcount == 1

    def notification_claim_holders(self, now: float) -> list[str]:
        return [str(row[0]) for row in self.read(text(OUTBOX_CLAIM_HOLDERS).bindparams(now=now))]

    def release_notification_claims(self, holder: str) -> int:
        with self.lock, self.conn.begin():
            return int(self.conn.execute(text(OUTBOX_RELEASE), {"holder": holder}).rowcount)

    def notifications(self, *, failed: bool = False, run_id: str | None = None,
                      limit: int = 100) -> list[NotificationView]:
        if run_id is not None:
            query = text(OUTBOX_LIST_OF_RUN).bindparams(run_id=run_id, limit=limit)
        else:
            query = text(OUTBOX_LIST_FAILED if failed else OUTBOX_LIST).bindparams(limit=limit)
        return [notification_view(row) for row in self.read(query)]

    # -- analytics (GROUP BY in the database; see orchestrator.store.sql_analytics) ----------------

    def step_period_counts(self, workflow: str, *, period: str = "week",
                           since: float | None = None) -> list[StepPeriodCounts]:
        return sql_analytics.step_period_counts(self, workflow, period, since)

    def child_step_period_counts(self, workflow: str, step_id: str, *, period: str = "week",
                                 since: float | None = None) -> list[StepPeriodCounts]:
        return sql_live_analytics.child_step_period_counts(self.read, self.engine.dialect.name, workflow, step_id,
                                                           period, since)

    def outcome_counts(self, workflow: str, *, period: str = "week", since: float | None = None) -> list[OutcomeCounts]:
        return sql_analytics.outcome_counts(self, workflow, period, since)

    def trajectory_counts(self, workflow: str | None) -> list[TrajectoryCounts]:
        return sql_analytics.trajectory_counts(self, workflow)

    def outcome_summary(self, workflow: str | None, *, window: int = 1) -> OutcomeSummary:
        return sql_analytics.outcome_summary(self.read, workflow, window)

    def run_counts(self, workflow: str | None = None) -> list[RunCounts]:
        return sql_analytics.run_counts(self.read, workflow)

    def attribution_counts(self, workflow: str) -> list[AttributionCounts]:
        return sql_analytics.attribution_counts(self.read, workflow)

    def nondeterminism_counts(self, workflow: str) -> list[NondeterminismCounts]:
        return sql_analytics.nondeterminism_counts(self, workflow)

    # -- datasets and experiments (orchestrator.store.sql_datasets) -----------------------------------

    def add_examples(self, dataset: str, examples: Sequence[NewExample], *, create: bool = True,
                     description: str | None = None) -> DatasetView:
        return sql_datasets.add_examples(self, dataset, examples, create=create, description=description)

    def datasets(self) -> list[DatasetView]:
        return sql_datasets.datasets(self)

    def dataset(self, name: str) -> DatasetView:
        return sql_datasets.dataset(self, name)

    def examples(self, dataset: str, *, version: int | None = None) -> list[ExampleView]:
        return sql_datasets.examples(self, dataset, version)

    def create_experiment(self, experiment: NewExperiment) -> ExperimentView:
        return sql_datasets.create_experiment(self, experiment)

    def link_experiment_runs(self, experiment: str, links: Sequence[ExperimentRunLink]) -> None:
        sql_datasets.link_experiment_runs(self, experiment, links)

    def finish_experiment(self, experiment: str, status: str, summary: dict[str, Any]) -> None:
        sql_datasets.finish_experiment(self, experiment, status, summary)

    def experiments(self, *, dataset: str | None = None) -> list[ExperimentView]:
        return sql_datasets.experiments(self, dataset)

    def experiment(self, name: str) -> ExperimentView:
        return sql_datasets.experiment(self, name)

    def experiment_runs(self, experiment: str) -> list[ExperimentRunLink]:
        return sql_datasets.experiment_runs(self, experiment)

    def count_rows(self) -> dict[str, int]:
        counts = self.read(*(select(func.count()).select_from(t) for t in TABLES.values()))
        return {name: int(rows[0][0] or 0) for name, rows in zip(TABLES, counts, strict=True)}


IN_LIST = 500
"""Values in one ``IN (...)`` list: well under SQLite's and PostgreSQL's limits on bound parameters."""


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), IN_LIST):
        yield values[start:start + IN_LIST]
