"""The only code that touches the database.

SQLite (WAL, ``synchronous=NORMAL``) is the embedded default; any SQLAlchemy URL works, and
PostgreSQL needs no code change. The write path uses SQLAlchemy Core on one held connection
and one transaction per step record, because a persisted step should cost little more than
the raw INSERT + COMMIT underneath it (see benchmarks/). All methods are synchronous and
guarded by a lock, so threads (the TUI's workers) may share one Store.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Table, and_, bindparam, create_engine, event, func, insert, select, update
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlmodel import SQLModel

from orchestrator import jsonio
from orchestrator.errors import NotFoundError, ReviewError
from orchestrator.records import (
    AttributionView,
    GateView,
    OutcomeView,
    ReviewView,
    RunView,
    StepRecordView,
)
from orchestrator.tables import (
    AttributionRow,
    GateResultRow,
    OutcomeRow,
    ReviewRow,
    RunRow,
    StepRecordRow,
    WorkflowRow,
)

DEFAULT_DB_DIR = ".orchestrator"

_workflows = WorkflowRow.__table__
_runs = RunRow.__table__
_steps = StepRecordRow.__table__
_gates = GateResultRow.__table__
_reviews = ReviewRow.__table__
_outcomes = OutcomeRow.__table__
_attributions = AttributionRow.__table__

_STEP_COLUMNS = ("run_pk", "workflow_id", "step_id", "step_type", "agent", "attempt", "status", "origin",
                 "started_at", "ended_at", "inputs", "output", "error_type", "error_message", "consumed",
                 "injected")
_GATE_KEYS = ("gate", "passed", "score", "reason", "details", "severity", "duration")
_GATE_COLUMNS = ("record_id", "run_pk", "step_id", *_GATE_KEYS)
_insert_steps = insert(_steps)
_insert_gates = insert(_gates)
# Hot statements are built once and executed with parameters: building ``insert().values(...)``
# per call costs SQLAlchemy several times more than the INSERT itself.
_insert_runs = insert(_runs)
_update_run_by_pk = update(_runs).where(_runs.c.id == bindparam("pk_"))
_find_workflow = select(_workflows.c.id, _workflows.c.source).where(
    and_(_workflows.c.name == bindparam("name_"), _workflows.c.content_hash == bindparam("hash_")))


_RUN_KEYS = tuple(c.key for c in _runs.columns)
_RUN_COLUMNS = ("run_id", "workflow_id", "workflow", "status", "kind", "inputs", "parent_run_id", "parent_step",
                "owner", "heartbeat_at", "created_at", "updated_at")


class _RawStatement:
    """A statement compiled once for a dialect, run on the DBAPI cursor with positional values.

    The SQLite write path: SQLAlchemy's per-execute work (cache key, execution context, result
    object) costs more than SQLite's own INSERT + COMMIT of a small row. The SQL text and the
    columns' bind processors (float and boolean coercion) are SQLAlchemy's, so the stored values
    are the same as through ``Connection.execute``. ``binds`` names the parameters in order:
    the table's columns, plus any ``bindparam`` of the statement (``pk_``).
    """

    def __init__(self, table: Table, binds: Sequence[str], dialect: Dialect, statement: Any = None,
                 columns: Sequence[str] | None = None) -> None:
        statement = insert(table) if statement is None else statement
        compiled = statement.compile(dialect=dialect, column_keys=list(columns if columns is not None else binds))
        if not compiled.positional or list(compiled.positiontup or ()) != list(binds):
            raise ValueError("the dialect does not bind these parameters positionally in order")
        self.sql = str(compiled)
        self.processors = [(i, proc) for i, name in enumerate(binds) if name in table.c
                           and (proc := table.c[name].type.dialect_impl(dialect).bind_processor(dialect))]

    def row(self, values: Sequence[Any]) -> Sequence[Any]:
        if not self.processors:
            return values
        out = list(values)
        for i, proc in self.processors:
            out[i] = proc(out[i])
        return out


_RAW_STATEMENTS: dict[tuple[Any, ...], _RawStatement | None] = {}


def _raw_statement(name: str, table: Table, binds: Sequence[str], dialect: Dialect, *, statement: Any = None,
                   columns: Sequence[str] | None = None) -> _RawStatement | None:
    """A _RawStatement compiled once per process and dialect flavour (a compile costs about a
    millisecond: more than a whole small run); None when the dialect binds otherwise."""
    key = (name, table.name, tuple(binds), type(dialect), dialect.paramstyle, dialect.positional)
    try:
        return _RAW_STATEMENTS[key]
    except KeyError:
        try:
            compiled: _RawStatement | None = _RawStatement(table, binds, dialect, statement, columns)
        except ValueError:
            compiled = None  # SQLAlchemy's path
        _RAW_STATEMENTS[key] = compiled
        return compiled


class _RawTransaction:
    """``with _RawTransaction(store) as tx:`` statements on the DBAPI cursor, then COMMIT.

    The caller holds the store's lock and has checked that no SQLAlchemy transaction is open, so
    the DBAPI connection is idle. On any error the transaction is rolled back, and DBAPI errors
    come out as SQLAlchemy's exception types (IntegrityError, OperationalError), as through
    ``Connection.execute``.
    """

    __slots__ = ("store", "dbapi", "cursor", "sql", "params")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sql = ""
        self.params: Any = None

    def __enter__(self) -> _RawTransaction:
        self.dbapi = self.store._conn.connection.dbapi_connection
        self.cursor = self.dbapi.cursor()  # type: ignore[union-attr]
        return self

    def execute(self, sql: str, params: Sequence[Any]) -> Any:
        self.sql, self.params = sql, params
        self.cursor.execute(sql, params)
        return self.cursor

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any:
        self.sql, self.params = sql, params
        self.cursor.executemany(sql, params)
        return self.cursor

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if exc is None:
                try:
                    self.dbapi.commit()
                    return False
                except BaseException as commit_error:
                    exc, self.sql, self.params = commit_error, "COMMIT", None
            self.dbapi.rollback()
            dialect = self.store.engine.dialect
            dbapi_error = dialect.loaded_dbapi.Error
            if isinstance(exc, dbapi_error):
                raise DBAPIError.instance(self.sql, self.params, exc, dbapi_error, dialect=dialect) from exc
            if exc_type is None:
                raise exc
            return False
        finally:
            self.cursor.close()


def default_url() -> str:
    """``ORCHESTRATOR_DB`` if set, else a SQLite file under ``./.orchestrator/``."""
    env = os.environ.get("ORCHESTRATOR_DB")
    if env:
        return env
    return f"sqlite:///{DEFAULT_DB_DIR}/orchestrator.db"


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and select the psycopg 3 driver for them."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def new_run_id() -> str:
    return "r" + secrets.token_hex(5)


SYNCHRONOUS_LEVELS = ("normal", "full")


def _split_synchronous(url: str) -> tuple[str, str]:
    """Take ``?synchronous=normal|full`` off a SQLite URL (sqlite3.connect would reject it).

    Without it, ``ORCHESTRATOR_SQLITE_SYNCHRONOUS`` decides, else ``normal``.
    """
    level = os.environ.get("ORCHESTRATOR_SQLITE_SYNCHRONOUS", "normal").lower()
    base, _, query = url.partition("?")
    kept = []
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        if key == "synchronous":
            level = value.lower()
        else:
            kept.append(pair)
    if level not in SYNCHRONOUS_LEVELS:
        from orchestrator.errors import InputError

        raise InputError(f"synchronous={level!r} is not supported; choose one of {list(SYNCHRONOUS_LEVELS)}")
    return (base + ("?" + "&".join(kept) if kept else "")), level


def _sqlite_pragmas(level: str) -> Any:
    def apply(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against process crashes in WAL mode (a killed process loses
        # nothing committed); FULL adds power-loss safety at the price of an fsync per commit,
        # here ~290 µs against ~17 µs.
        cursor.execute(f"PRAGMA synchronous={level.upper()}")
        # the sqlite3 default is 5 seconds; reviewers and workers can hold a write for a moment.
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return apply


class Store:
    """Runs, step records, gate results, reviews, outcomes and attribution records."""

    def __init__(self, url: str | None = None) -> None:
        self.url = normalize_url(url or default_url())
        self.is_sqlite = self.url.startswith("sqlite")
        self.synchronous: str | None = None
        try:
            self._open()
        except (SQLAlchemyError, ImportError, OSError) as exc:
            from orchestrator.errors import InputError

            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"cannot open the database {self.display_url}: {detail}; "
                             "check --db or ORCHESTRATOR_DB") from None

    def _open(self) -> None:
        """Create the engine and the schema, and hold the connection the write path uses."""
        if self.is_sqlite:
            self.url, self.synchronous = _split_synchronous(self.url)
            path = self.url.split("///", 1)[-1] if "///" in self.url else ""
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(self.url, connect_args={"check_same_thread": False})
            event.listen(self.engine, "connect", _sqlite_pragmas(self.synchronous))
        else:
            self.engine = create_engine(self.url, pool_pre_ping=True)
        SQLModel.metadata.create_all(self.engine)
        self._conn = self.engine.connect()
        self._lock = threading.RLock()
        self._run_pk_cache: dict[str, int] = {}
        self._raw_steps: _RawStatement | None = None
        self._raw_gates: _RawStatement | None = None
        self._raw_runs: _RawStatement | None = None
        if self.is_sqlite:
            dialect = self.engine.dialect
            self._raw_steps = _raw_statement("insert", _steps, _STEP_COLUMNS, dialect)
            self._raw_gates = _raw_statement("insert", _gates, _GATE_COLUMNS, dialect)
            self._raw_runs = _raw_statement("insert", _runs, _RUN_COLUMNS, dialect)
            if self._raw_gates is None or self._raw_runs is None:
                self._raw_steps = None

    def _raw_ready(self) -> bool:
        """May a write take the DBAPI fast path now? (SQLite, and no SQLAlchemy transaction open.)"""
        return self._raw_steps is not None and not self._conn.in_transaction()

    def _raw_run_update(self, keys: tuple[str, ...]) -> _RawStatement | None:
        """``UPDATE runs SET <keys> WHERE id = ?`` for one set of keys (in table order)."""
        return _raw_statement("update-run", _runs, (*keys, "pk_"), self.engine.dialect,
                              statement=_update_run_by_pk, columns=keys)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- workflows and runs -------------------------------------------------------------

    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None) -> int:
        """Store a workflow version once per content hash and return its id."""
        text = jsonio.dumps(definition)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        with self._lock, self._conn.begin():
            row = self._conn.execute(_find_workflow, {"name_": name, "hash_": digest}).first()
            if row is not None:
                found, stored_source = row
                if source and source != stored_source:  # writing the same value again would change nothing
                    self._conn.execute(update(_workflows).where(_workflows.c.id == found).values(source=source))
                return int(found)
            return int(self._conn.execute(insert(_workflows).values(
                name=name, version=str(version), content_hash=digest, definition=text, source=source,
                created_at=time.time())).inserted_primary_key[0])

    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        with self._lock:
            row = self._conn.execute(select(_workflows.c.definition, _workflows.c.source).where(
                _workflows.c.id == workflow_id)).first()
            self._conn.rollback()
        if row is None:
            raise NotFoundError(f"workflow definition {workflow_id} is not stored")
        return jsonio.loads(row.definition), row.source

    def create_run(self, workflow_id: int, workflow: str, inputs: dict[str, Any], *, status: str = "running",
                   kind: str = "run", parent_run_id: str | None = None, parent_step: str | None = None,
                   owner: str | None = None) -> str:
        run_id = new_run_id()
        now = time.time()
        values = (run_id, workflow_id, workflow, status, kind, jsonio.dumps(inputs), parent_run_id, parent_step,
                  owner, now, now, now)
        with self._lock:
            if self._raw_ready() and self._raw_runs is not None:
                with _RawTransaction(self) as tx:
                    pk = tx.execute(self._raw_runs.sql, self._raw_runs.row(values)).lastrowid
            else:
                with self._conn.begin():
                    pk = self._conn.execute(_insert_runs, dict(zip(_RUN_COLUMNS, values, strict=True))) \
                        .inserted_primary_key[0]
        self._run_pk_cache[run_id] = int(pk)
        return run_id

    def run_pk(self, run_id: str) -> int:
        pk = self._run_pk_cache.get(run_id)
        if pk is None:
            with self._lock:
                inside = self._conn.in_transaction()  # called from within a write: leave its transaction be
                pk = self._conn.execute(select(_runs.c.id).where(_runs.c.run_id == run_id)).scalar()
                if not inside:
                    self._conn.rollback()
            if pk is None:
                raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
            self._run_pk_cache[run_id] = int(pk)
        return pk

    @property
    def display_url(self) -> str:
        return self.url.split("@")[-1] if "@" in self.url else self.url

    def set_run_status(self, run_id: str, status: str, *, output: Any = None, error: str | None = None,
                       expect: Iterable[str] | None = None, owner: str | None = ...) -> bool:  # type: ignore[assignment]
        """Move a run to ``status``; with ``expect``, only from one of those states (returns False if not)."""
        values: dict[str, Any] = {"status": status, "updated_at": time.time()}
        if output is not None:
            values["output"] = jsonio.dumps(output)
        if error is not None:
            values["error"] = error
        if owner is not ...:
            values["owner"] = owner
        pk = self.run_pk(run_id)
        if expect is None:
            with self._lock:
                keys = tuple(k for k in _RUN_KEYS if k in values)  # SET clauses come in table order
                stmt = self._raw_run_update(keys) if self._raw_ready() else None
                if stmt is not None:
                    with _RawTransaction(self) as tx:
                        return tx.execute(stmt.sql, stmt.row((*(values[k] for k in keys), pk))).rowcount == 1
                with self._conn.begin():
                    return self._conn.execute(_update_run_by_pk, {"pk_": pk, **values}).rowcount == 1
        cond = and_(_runs.c.id == pk, _runs.c.status.in_(list(expect)))
        with self._lock, self._conn.begin():
            return self._conn.execute(update(_runs).where(cond).values(**values)).rowcount == 1

    def get_run(self, run_id: str) -> RunView:
        with self._lock:
            row = self._conn.execute(select(_runs).where(_runs.c.run_id == run_id)).first()
            self._conn.rollback()
        if row is None:
            raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
        return _run_view(row)

    def claim_queued_run(self, owner: str) -> str | None:
        """Atomically take the oldest queued run for ``owner``; None when the queue is empty.

        Optimistic claiming (a conditional UPDATE per candidate) works the same on SQLite and
        PostgreSQL: when workers race for one run, exactly one UPDATE matches ``status='queued'``.
        """
        while True:
            with self._lock:
                candidates = self._conn.execute(select(_runs.c.id, _runs.c.run_id).where(
                    _runs.c.status == "queued").order_by(_runs.c.id).limit(8)).all()
                self._conn.rollback()
            if not candidates:
                return None
            for pk, run_id in candidates:
                with self._lock, self._conn.begin():
                    claimed = self._conn.execute(update(_runs).where(
                        and_(_runs.c.id == pk, _runs.c.status == "queued")).values(
                        status="running", owner=owner, heartbeat_at=time.time(), updated_at=time.time())).rowcount
                if claimed == 1:
                    return run_id

    def run_owner(self, run_id: str) -> str | None:
        """The ``host:pid`` token of the process executing the run, if any."""
        with self._lock:
            owner = self._conn.execute(select(_runs.c.owner).where(_runs.c.run_id == run_id)).scalar()
            self._conn.rollback()
        return owner

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        query = select(_runs).order_by(_runs.c.id.desc()).limit(limit)
        if status:
            query = query.where(_runs.c.status == status)
        if workflow:
            query = query.where(_runs.c.workflow == workflow)
        if kind:
            query = query.where(_runs.c.kind == kind)
        with self._lock:
            rows = self._conn.execute(query).all()
            self._conn.rollback()
        return [_run_view(r) for r in rows]

    def child_runs(self, run_id: str) -> list[RunView]:
        with self._lock:
            rows = self._conn.execute(select(_runs).where(_runs.c.parent_run_id == run_id)
                                      .order_by(_runs.c.id)).all()
            self._conn.rollback()
        return [_run_view(r) for r in rows]

    # -- step records --------------------------------------------------------------------

    def insert_step_record(self, run_id: str, workflow_id: int, *, step_id: str, step_type: str, agent: str,
                           attempt: int, status: str, started_at: float, ended_at: float,
                           inputs: str | None, output: str | None, error_type: str | None = None,
                           error_message: str | None = None, consumed: str | None = None,
                           injected: str | None = None, origin: str = "executed",
                           gates: Sequence[dict[str, Any]] = ()) -> int:
        """Commit one attempt (and its gate verdicts) in one transaction; JSON arrives pre-encoded."""
        run_pk = self.run_pk(run_id)
        values = (run_pk, workflow_id, step_id, step_type, agent, attempt, status, origin, started_at, ended_at,
                  inputs, output, error_type, error_message, consumed, injected)
        with self._lock:
            if self._raw_ready() \
                    and all(len(g) == len(_GATE_KEYS) and all(k in g for k in _GATE_KEYS) for g in gates):
                return self._insert_step_raw(values, gates)
            with self._conn.begin():
                record_id = self._conn.execute(_insert_steps, dict(zip(_STEP_COLUMNS, values, strict=True))) \
                    .inserted_primary_key[0]
                if gates:
                    self._conn.execute(_insert_gates, [
                        {"record_id": record_id, "run_pk": run_pk, "step_id": step_id, **g} for g in gates])
        return int(record_id)

    def _insert_step_raw(self, values: Sequence[Any], gates: Sequence[dict[str, Any]]) -> int:
        """The SQLite fast path of insert_step_record: one INSERT (+ gate rows) and COMMIT on the DBAPI
        connection, outside any SQLAlchemy transaction (the caller holds the lock and checked)."""
        steps, gate_stmt = self._raw_steps, self._raw_gates
        assert steps is not None and gate_stmt is not None
        with _RawTransaction(self) as tx:
            record_id = int(tx.execute(steps.sql, steps.row(values)).lastrowid)
            if gates:
                tx.executemany(gate_stmt.sql, [
                    gate_stmt.row((record_id, values[0], values[2], *(g[k] for k in _GATE_KEYS))) for g in gates])
        return record_id

    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        """Records of a run in insertion order, with their gate results; optionally the latest per step."""
        run_pk = self.run_pk(run_id)
        with self._lock:
            rows = self._conn.execute(select(_steps).where(_steps.c.run_pk == run_pk).order_by(_steps.c.id)).all()
            gate_rows = self._conn.execute(select(_gates).where(_gates.c.run_pk == run_pk)
                                           .order_by(_gates.c.id)).all()
            self._conn.rollback()
        gates: dict[int, list[GateView]] = {}
        for g in gate_rows:
            gates.setdefault(g.record_id, []).append(_gate_view(g))
        views = [_record_view(r, run_id, gates.get(r.id, [])) for r in rows]
        if latest_only:
            latest: dict[str, StepRecordView] = {}
            for v in views:
                latest[v.step_id] = v
            return list(latest.values())
        return views

    def latest_records(self, run_id: str) -> dict[str, StepRecordView]:
        return {v.step_id: v for v in self.step_records(run_id, latest_only=True)}

    def step_history(self, workflow: str, *, since: float | None = None) -> list[dict[str, Any]]:
        """Latest record per (run, step) for a workflow, with gate pass flags: the raw data of ``stats``."""
        query = (select(_steps.c.id, _steps.c.step_id, _steps.c.agent, _steps.c.status, _steps.c.started_at,
                        _steps.c.attempt, _runs.c.run_id, _steps.c.inputs, _steps.c.output)
                 .join(_runs, _runs.c.id == _steps.c.run_pk)
                 .where(and_(_runs.c.workflow == workflow, _runs.c.kind == "run"))
                 .order_by(_steps.c.id))
        if since is not None:
            query = query.where(_steps.c.started_at >= since)
        with self._lock:
            rows = self._conn.execute(query).all()
            gate_rows = self._conn.execute(
                select(_gates.c.record_id, _gates.c.passed).join(_runs, _runs.c.id == _gates.c.run_pk)
                .where(_runs.c.workflow == workflow)).all()
            self._conn.rollback()
        gate_pass: dict[int, bool] = {}
        for g in gate_rows:
            gate_pass[g.record_id] = gate_pass.get(g.record_id, True) and bool(g.passed)
        return [{"record_id": r.id, "run_id": r.run_id, "step_id": r.step_id, "agent": r.agent,
                 "status": r.status, "started_at": r.started_at, "attempt": r.attempt,
                 "gates_passed": gate_pass.get(r.id), "inputs": r.inputs, "output": r.output} for r in rows]

    # -- reviews ---------------------------------------------------------------------------

    def decide(self, run_id: str, record_id: int, step_id: str, *, decision: str, reviewer: str,
               comment: str | None, output_before: Any, output_after: Any = None, forced: bool = False,
               new_record: dict[str, Any] | None = None, run_status: str = "running") -> int:
        """Store a review and move the run out of ``paused`` atomically.

        The unique constraint on ``reviews.record_id`` makes the database the referee: when two
        reviewers race on one pause, exactly one insert commits and the other gets ReviewError.
        """
        run_pk = self.run_pk(run_id)
        now = time.time()
        try:
            with self._lock, self._conn.begin():
                review_id = self._conn.execute(insert(_reviews).values(
                    run_pk=run_pk, record_id=record_id, step_id=step_id, decision=decision, reviewer=reviewer,
                    comment=comment, output_before=jsonio.dumps(output_before),
                    output_after=None if output_after is None else jsonio.dumps(output_after),
                    forced=forced, created_at=now)).inserted_primary_key[0]
                if new_record is not None:
                    gates = new_record.pop("gates", ())
                    new_id = self._conn.execute(insert(_steps).values(run_pk=run_pk, **new_record)) \
                        .inserted_primary_key[0]
                    if gates:
                        self._conn.execute(insert(_gates), [
                            {"record_id": new_id, "run_pk": run_pk, "step_id": step_id, **g} for g in gates])
                moved = self._conn.execute(update(_runs).where(
                    and_(_runs.c.id == run_pk, _runs.c.status == "paused")).values(
                    status=run_status, updated_at=now)).rowcount
                if moved != 1:
                    raise _NotPaused()
        except _NotPaused:
            raise ReviewError(f"run {run_id} is no longer paused (another decision is being applied); "
                              f"see `orchestrator show {run_id}`") from None
        except IntegrityError:
            raise ReviewError(f"step {step_id!r} of run {run_id} was already decided by another reviewer; "
                              f"see `orchestrator show {run_id}`") from None
        return int(review_id)

    def reviews(self, run_id: str) -> list[ReviewView]:
        run_pk = self.run_pk(run_id)
        with self._lock:
            rows = self._conn.execute(select(_reviews).where(_reviews.c.run_pk == run_pk)
                                      .order_by(_reviews.c.id)).all()
            self._conn.rollback()
        return [ReviewView(id=r.id, run_id=run_id, record_id=r.record_id, step_id=r.step_id,
                           decision=r.decision, reviewer=r.reviewer, comment=r.comment,
                           output_before=jsonio.loads(r.output_before), output_after=jsonio.loads(r.output_after),
                           forced=bool(r.forced), created_at=r.created_at) for r in rows]

    # -- outcomes and attribution --------------------------------------------------------------

    def add_outcome(self, run_id: str, *, value: float, correct: bool | None, source: str, termination: str,
                    reason: str | None = None, reviewer: str | None = None) -> int:
        run_pk = self.run_pk(run_id)  # looked up first: the lookup must not run inside the write transaction
        with self._lock, self._conn.begin():
            return int(self._conn.execute(insert(_outcomes).values(
                run_pk=run_pk, value=value, correct=correct, source=source, termination=termination,
                reason=reason, reviewer=reviewer, created_at=time.time())).inserted_primary_key[0])

    def outcomes(self, run_id: str) -> list[OutcomeView]:
        run_pk = self.run_pk(run_id)
        with self._lock:
            rows = self._conn.execute(select(_outcomes).where(_outcomes.c.run_pk == run_pk)
                                      .order_by(_outcomes.c.id)).all()
            self._conn.rollback()
        return [OutcomeView(id=r.id, run_id=run_id, value=r.value, correct=r.correct, source=r.source,
                            termination=r.termination, reason=r.reason, reviewer=r.reviewer,
                            created_at=r.created_at) for r in rows]

    def add_attribution(self, run_id: str, *, method: str, params: dict[str, Any],
                        step_credits: list[dict[str, Any]], agent_credits: dict[str, float],
                        blamed_step: str | None, confidence: float | None, evidence: dict[str, Any],
                        cost: int = 0, outcome_id: int | None = None) -> int:
        run_pk = self.run_pk(run_id)
        with self._lock, self._conn.begin():
            return int(self._conn.execute(insert(_attributions).values(
                run_pk=run_pk, outcome_id=outcome_id, method=method, params=jsonio.dumps(params),
                step_credits=jsonio.dumps(step_credits), agent_credits=jsonio.dumps(agent_credits),
                blamed_step=blamed_step, confidence=confidence, evidence=jsonio.dumps(evidence), cost=cost,
                created_at=time.time())).inserted_primary_key[0])

    def attributions(self, run_id: str | None = None, *, workflow: str | None = None) -> list[AttributionView]:
        query = select(_attributions, _runs.c.run_id).join(_runs, _runs.c.id == _attributions.c.run_pk) \
            .order_by(_attributions.c.id)
        if run_id is not None:
            query = query.where(_attributions.c.run_pk == self.run_pk(run_id))
        if workflow is not None:
            query = query.where(_runs.c.workflow == workflow)
        with self._lock:
            rows = self._conn.execute(query).all()
            self._conn.rollback()
        return [AttributionView(id=r.id, run_id=r.run_id, outcome_id=r.outcome_id, method=r.method,
                                params=jsonio.loads(r.params), step_credits=jsonio.loads(r.step_credits),
                                agent_credits=jsonio.loads(r.agent_credits), blamed_step=r.blamed_step,
                                confidence=r.confidence, evidence=jsonio.loads(r.evidence), cost=r.cost,
                                created_at=r.created_at) for r in rows]

    def count_rows(self) -> dict[str, int]:
        """Row counts per table: tests use it to prove bad input stored nothing."""
        with self._lock:
            out = {t.name: int(self._conn.execute(select(func.count()).select_from(t)).scalar() or 0)
                   for t in (_workflows, _runs, _steps, _gates, _reviews, _outcomes, _attributions)}
            self._conn.rollback()
        return out


class _NotPaused(Exception):
    """Internal: abort a decision transaction because the run left ``paused``."""


def _run_view(row: Any) -> RunView:
    return RunView(id=row.id, run_id=row.run_id, workflow=row.workflow, workflow_id=row.workflow_id,
                   status=row.status, kind=row.kind, inputs=jsonio.loads(row.inputs) or {},
                   output=jsonio.loads(row.output), error=row.error, parent_run_id=row.parent_run_id,
                   parent_step=row.parent_step, created_at=row.created_at, updated_at=row.updated_at)


def _gate_view(g: Any) -> GateView:
    return GateView(gate=g.gate, passed=bool(g.passed), score=g.score, reason=g.reason,
                    details=jsonio.loads(g.details) or {}, severity=g.severity, duration=g.duration,
                    record_id=g.record_id)


def _record_view(r: Any, run_id: str, gates: list[GateView]) -> StepRecordView:
    consumed = [{"record_id": c[0], "step_id": c[1], "delay": c[2]} for c in (jsonio.loads(r.consumed) or [])]
    return StepRecordView(id=r.id, run_id=run_id, step_id=r.step_id, step_type=r.step_type, agent=r.agent,
                          attempt=r.attempt, status=r.status, origin=r.origin, started_at=r.started_at,
                          ended_at=r.ended_at, inputs=jsonio.loads(r.inputs), output=jsonio.loads(r.output),
                          error_type=r.error_type, error_message=r.error_message, consumed=consumed,
                          injected=jsonio.loads(r.injected) or [], gates=gates)
