"""The embedded SQLite store, on the stdlib ``sqlite3`` module: WAL, a configurable ``synchronous`` level.

A run on SQLite should start quickly and a persisted step should cost little more than the raw
INSERT + COMMIT underneath it (see ``benchmarks/``). SQLAlchemy costs ~120 ms to import and more
per statement than SQLite's own INSERT + COMMIT of a small row, so everything a run, a resume
and ``show`` do is hand-written SQL on one ``sqlite3`` connection here, storing exactly the
values :class:`~orchestrator.store.sql.SqlStore` stores (the contract suite in ``tests/store/``
checks both). Everything else (schema creation and upgrades, analytics, attribution, review
decisions) is handed to a :class:`~orchestrator.store.sqlite_sql.SqliteSqlStore` on this store's
own connection, made the first time it is needed: a Store method this class does not implement is
forwarded to it by :class:`~orchestrator.store.delegating.DelegatingStore`. One process holds one
connection per database, and each statement is written once, on one side or the other.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
import urllib.parse
from collections import namedtuple
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.spec.records import ModelCallView, NotificationView, OutcomeView, ReviewView, RunView, StepRecordView
from orchestrator.store.base import Store, lease_lost
from orchestrator.store.bounded import BoundedCache
from orchestrator.store.delegating import DelegatingStore
from orchestrator.store.digests import RecordDigests
from orchestrator.store.rows import (
    GATE_COLUMNS,
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
    STORED_OUTPUT_DIGESTS,
    UNCHANGED,
    Lease,
    NewNotification,
    NewOutcome,
    NewRun,
    NewStepRecord,
    RunEnd,
    gate_values,
    gate_view,
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
    review_view,
    run_update_values,
    run_values,
    run_view,
    step_values,
    trace_values,
)
from orchestrator.store.sqlite_ddl import create_if_empty
from orchestrator.store.sqlite_pragmas import apply_pragmas, busy_timeout_pragma
from orchestrator.store.sqlite_waiting import WaitingLock, WithoutWaiting
from orchestrator.store.transient import RetriedStore, insert_once, is_missing_reference, retry_seconds

if TYPE_CHECKING:
    from orchestrator.store.sqlite_sql import SqliteSqlStore

SYNCHRONOUS_LEVELS = ("normal", "full")


def split_synchronous(url: str) -> tuple[str, str]:
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
        raise InputError(f"synchronous={level!r} is not supported; choose one of {list(SYNCHRONOUS_LEVELS)}")
    return (base + ("?" + "&".join(kept) if kept else "")), level


SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_file_problem(path: Path) -> str | None:
    """Why an existing file cannot be a healthy SQLite database, judged from its header alone (no write,
    no lock); None when it may be one. An empty file is an empty database."""
    size = path.stat().st_size
    if size == 0:
        return None
    with path.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        return "it does not start with the SQLite header"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"its header gives an impossible page size ({page_size})"
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]  # the page count is valid only then
    # a checkpoint in progress (a non-empty -wal) or a hot journal may leave the file short for a moment
    busy = any(Path(f"{path}{suffix}").exists() and Path(f"{path}{suffix}").stat().st_size > 0
               for suffix in ("-wal", "-journal"))
    if pages and header_valid and not busy and size < pages * page_size:
        return f"it is truncated ({size} bytes; its header says {pages * page_size})"
    return None


def read_only_uri(path: Path) -> str | None:
    """The ``file:`` URI that opens a database read-only where this process cannot write; None where it can.

    Opening normally switches the file to WAL and creates ``-wal`` and ``-shm`` files beside it, which a
    read-only directory (a mounted backup) refuses. ``mode=ro`` reads it without writing; when the directory
    cannot even hold the shared-memory file SQLite needs, and none is there, ``immutable=1`` reads the file
    alone, which is all of the data only while no write-ahead log holds pages of its own.
    """
    directory = path.parent
    if os.access(directory, os.W_OK) and os.access(path, os.W_OK):
        return None
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    if os.access(directory, os.W_OK) or Path(f"{path}-shm").exists():
        return uri
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise InputError(f"the database {path} is in a directory that cannot be written and its write-ahead log "
                         f"({wal.name}) cannot be read without a {path.name}-shm file there; copy the three files "
                         "somewhere writable")
    return uri + "&immutable=1"


def corrupt(path: str, why: str) -> InputError:
    return InputError(f"the database {path} is corrupt (or not a SQLite database): {why}; "
                      "restore it from a backup or point --db elsewhere")


def marks(values: Sized) -> str:
    return ", ".join("?" * len(values))


def insert_sql(table: str, columns: Collection[str]) -> str:
    """``INSERT INTO table (<columns>) VALUES (?, ...)``: bound to values in the columns' order (a dict of
    values by column gives its keys, bound to ``tuple(values.values())``)."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks(columns)})"


TABLE_NAMES = ("workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions",
               "model_calls", "notifications", "datasets", "dataset_examples", "experiments", "experiment_runs")
"""The store's tables in dependency order, as ``tables.py`` declares them (a test keeps the two equal)."""

_RUN_SELECT = "SELECT * FROM runs"
"""Every column, as the SQL store's ``select(runs_t)`` reads them: the views of ``rows.py`` read a row by its
columns' names, and the columns are the ones ``tables.py`` declares (the schema is created from it)."""
_STEP_SELECT = "SELECT * FROM step_records WHERE run_pk = ? ORDER BY id"
_GATE_SELECT = "SELECT * FROM gate_results WHERE run_pk = ? ORDER BY id"
_INSERT_RUN = insert_sql("runs", RUN_COLUMNS)
_INSERT_STEP = insert_sql("step_records", STEP_COLUMNS)
_INSERT_LEASED_STEP = (f"INSERT INTO step_records ({', '.join(STEP_COLUMNS)}) SELECT {marks(STEP_COLUMNS)} "
                       "WHERE EXISTS (SELECT 1 FROM runs WHERE runs.id = ? AND runs.lease_token = ?)")
"""Written only while the run's lease still has the writer's token: a stalled executor that lost its
lease writes nothing, and the check costs one primary-key lookup in the same statement."""
_INSERT_GATE = insert_sql("gate_results", GATE_COLUMNS)
_INSERT_CALL = insert_sql("model_calls", MODEL_CALL_COLUMNS)
_LEASE_FREE = "(lease_token IS NULL OR lease_expires_at < ? OR lease_token = ?)"

_ROW_TYPES: dict[tuple[str, ...], Callable[..., Any]] = {}


def named_row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> Any:
    """Row factory: rows with their columns as attributes, as the shared row views read them."""
    names = tuple(d[0] for d in cursor.description)
    kind = _ROW_TYPES.get(names)
    if kind is None:
        kind = _ROW_TYPES[names] = namedtuple("Row", names, rename=True)
    return kind(*values)


def connect_target(url: str) -> tuple[str, str | None, str]:
    """(what ``sqlite3.connect`` opens, the file path or None, the URL a SQLAlchemy store on it uses).

    ``sqlite://`` and ``sqlite:///:memory:`` become a named shared-cache memory database, so the
    delegate sees the same data for as long as this store is open.
    """
    base, _, query = url.partition("?")
    path = base.split("///", 1)[1] if "///" in base else ""
    if path in ("", ":memory:"):
        name = f"file:orchestrator-{secrets.token_hex(6)}?mode=memory&cache=shared"
        return name, None, f"sqlite:///{name}&uri=true"
    if path.startswith("file:"):
        options = [pair for pair in query.split("&") if pair and pair != "uri=true"]
        target = path + ("?" + "&".join(options) if options else "")
        return target, None, f"sqlite:///{target}{'&' if options else '?'}uri=true"
    if query:
        raise InputError(f"unknown option in the SQLite URL {url!r}: {query}; the only one is "
                         "?synchronous=normal|full")
    return path, path, url


class SqliteStore(RetriedStore, DelegatingStore):
    """SQLite: the embedded default (``sqlite:///path``; ``sqlite://`` alone, and ``memory://``, are a private
    in-memory database that lives as long as the store).

    ``create=False`` (read-only commands) refuses a path with no database instead of creating
    the file and its directories. A file that is not a SQLite database, or a truncated one, is
    refused before anything is written to it.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url, self.synchronous = split_synchronous(url)
        self.busy_pragma = busy_timeout_pragma()  # a bad ORCHESTRATOR_SQLITE_BUSY is refused before opening
        self.retry_budget = retry_seconds()  # read once, not per call
        target, path, self.sql_url = connect_target(self.url)
        self.read_only = False
        """Opened ``mode=ro`` (a reader beside a file it cannot write, or in a directory it cannot write)."""
        if path is not None and not create and Path(path).is_file():
            read_only = read_only_uri(Path(path))
            if read_only is not None:
                target, _, self.sql_url = connect_target(f"sqlite:///{read_only}")
                self.read_only = True
        if path is not None:
            file = Path(path)
            if file.is_dir():
                raise InputError(f"the database {path} is a directory, not a SQLite file; check --db")
            if file.exists():
                try:
                    why = sqlite_file_problem(file)
                except OSError as exc:
                    raise InputError(f"cannot read the database {path}: {exc.strerror}") from None
                if why:
                    raise corrupt(path, why)
            elif not create:
                raise InputError(f"no database at {path}; nothing has run with this --db yet "
                                 "(check --db or ORCHESTRATOR_DB)")
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
        self.lock = WaitingLock(self.busy_pragma)
        self.run_pks: BoundedCache[str, int] = BoundedCache()
        self.workflow_ids: BoundedCache[tuple[str, str, str | None], int] = BoundedCache()
        self.delegate: SqliteSqlStore | None = None
        self.digests = RecordDigests(self.stored_output_digests)
        try:
            self.connection = sqlite3.connect(target, check_same_thread=False, isolation_level=None,
                                              uri=path is None or self.read_only)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the database {self.display_url}: {exc}; "
                             "check --db or ORCHESTRATOR_DB") from None
        self.lock.connection = self.connection
        create = create or (path is None and "mode=memory" in target)  # a private memory database is always new
        try:
            self.refuse_unless_ours(path or self.display_url, create)  # before the pragmas: WAL writes the header
            apply_pragmas(self.connection, self.synchronous, read_only=self.read_only)
            self.connection.row_factory = named_row
            # a new file gets the head schema in plain SQL, without importing SQLAlchemy or Alembic
            current = self.schema_is_current() or (create and create_if_empty(self.connection))
        except InputError:
            self.connection.close()
            raise
        except sqlite3.Error as exc:
            self.connection.close()  # also removes the -wal and -shm files opening it created
            text = str(exc)
            if path and ("file is not a database" in text or "malformed" in text):
                raise corrupt(path, "SQLite says " + ("'file is not a database'" if "not a database" in text
                                                      else "'database disk image is malformed'")) from None
            raise InputError(f"cannot open the database {self.display_url}: {text}; "
                             "check --db or ORCHESTRATOR_DB") from None
        if not current and not self.schema_is_current():  # an older schema (or a newer creator's)
            if self.read_only:
                self.connection.close()
                raise InputError(f"the database {path} cannot be written here and was written by another version "
                                 "of orchestrator; `orchestrator db upgrade` it where it can be written")
            self.sql()  # opening the SQLAlchemy side creates the missing tables and columns, on this connection

    def refuse_unless_ours(self, display: str, create: bool) -> None:
        """InputError, having written nothing, for another application's database, or for an empty one
        unless ``create`` (:func:`orchestrator.store.migrate.refuse_unless_ours`)."""
        from orchestrator.store.migrate import refuse_unless_ours

        self.connection.execute(busy_timeout_pragma())
        tables = [row[0] for row in self.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        refuse_unless_ours(display, tables, create=create)

    def schema_is_current(self) -> bool:
        """Whether the database is at the schema revision this code writes (one SELECT, no SQLAlchemy);
        when not, opening creates or upgrades it (``orchestrator.store.migrate``)."""
        from orchestrator.store.migrate import HEAD_REVISION, stored_revision

        return stored_revision(self.connection) == HEAD_REVISION

    @property
    def embedded(self) -> bool:
        return True

    def target(self) -> Store:
        """What this store does not write itself goes to the SQLAlchemy store on the same file."""
        return self.sql()

    def sql(self) -> SqliteSqlStore:
        """The SQLAlchemy store on the same database, opened on first use."""
        with self.lock:
            if self.delegate is None:
                from orchestrator.store.sqlite_sql import SqliteSqlStore

                self.delegate = SqliteSqlStore(self.sql_url, self.connection, self.lock)
            return self.delegate

    def close(self) -> None:
        with self.lock:
            if self.delegate is not None:
                self.delegate.close()
            self.connection.close()

    def without_waiting(self) -> WithoutWaiting:
        """This store's own calls made inside raise WouldWait, having changed nothing, where they would wait
        (:mod:`orchestrator.store.sqlite_waiting`). For an event loop's thread (:mod:`orchestrator.store.off_loop`)."""
        return WithoutWaiting(self.lock)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken IMMEDIATE so concurrent writers queue on the busy timeout
        instead of failing on a lock upgrade; committed at the end, rolled back on any error."""
        with self.lock:
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                yield self.connection
            except BaseException:
                self.connection.rollback()
                raise
            self.connection.commit()

    def read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self.lock:
            return self.connection.execute(sql, params).fetchall()

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> int:
        """One statement in its own transaction; returns the rows it changed."""
        with self.lock:
            return self.connection.execute(sql, params).rowcount

    # -- workflows and runs -----------------------------------------------------------------

    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                          content_hash: str) -> int:
        """Registered once per process and definition: a workflow row is never deleted or changed but
        for its source, so every later run of it skips the write transaction."""
        known = self.workflow_ids.get((name, content_hash, source))
        if known is not None:
            return known
        workflow_id = self.store_workflow(name, version, definition, source, content_hash)
        self.workflow_ids[(name, content_hash, source)] = workflow_id
        return workflow_id

    def store_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                       content_hash: str) -> int:
        with self.write() as conn:
            row = conn.execute("SELECT id, source FROM workflows WHERE name = ? AND content_hash = ?",
                               (name, content_hash)).fetchone()
            if row is not None:
                if source and source != row.source:  # writing the same value again would change nothing
                    conn.execute("UPDATE workflows SET source = ? WHERE id = ?", (source, row.id))
                return int(row.id)
            cursor = conn.execute(
                "INSERT INTO workflows (name, version, content_hash, definition, source, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (name, str(version), content_hash, jsonio.dumps(definition), source, time.time()))
            return int(cursor.lastrowid or 0)

    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        rows = self.read("SELECT definition, source FROM workflows WHERE id = ?", (workflow_id,))
        if not rows:
            raise NotFoundError(f"workflow definition {workflow_id} is not stored")
        return jsonio.loads(rows[0].definition), rows[0].source

    def create_run(self, run: NewRun, *, lease: Lease | None = None) -> str:
        run_id = new_run_id()
        values = run_values(run_id, run, lease)
        self.run_pks[run_id] = insert_once(self, lambda: self.insert_run(values), lambda: self.find_run_pk(run_id))
        return run_id

    def insert_run(self, values: tuple[Any, ...]) -> int:
        try:
            with self.lock:
                return int(self.connection.execute(_INSERT_RUN, values).lastrowid or 0)
        except sqlite3.IntegrityError as exc:
            if is_missing_reference(exc):
                raise NotFoundError(f"workflow definition {values[1]} is not stored") from None
            raise

    def find_run_pk(self, run_id: str) -> int | None:
        rows = self.read("SELECT id FROM runs WHERE run_id = ?", (run_id,))
        return int(rows[0].id) if rows else None

    def reconnect(self) -> None:
        """The file's connection survives a busy error; only a transaction it left open is ended (and the
        SQLAlchemy store on the same file, if opened, replaces its connection)."""
        with self.lock:
            if self.connection.in_transaction:
                self.connection.rollback()
            if self.delegate is not None:
                self.delegate.reconnect()

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
        where = "id = ?"
        params: list[Any] = [self.run_pk(run_id)]
        if expect is not None:
            states = list(expect)
            where += f" AND status IN ({marks(states)})"
            params += states
        return self.update_runs(values, where, params) == 1

    def update_runs(self, values: dict[str, Any], where: str, params: Sequence[Any]) -> int:
        """``UPDATE runs SET <values> WHERE <where>`` (column names are this module's own keys)."""
        sets = ", ".join(f"{key} = ?" for key in values)
        return self.execute(f"UPDATE runs SET {sets} WHERE {where}", (*values.values(), *params))

    def set_trace_id(self, run_id: str, trace: str) -> None:
        self.update_runs(trace_values(trace), "id = ?", (self.run_pk(run_id),))

    def set_reference(self, run_id: str, answer: Any) -> None:
        self.update_runs(reference_values(answer), "id = ?", (self.run_pk(run_id),))

    def acquire_lease(self, lease: Lease, *, statuses: Iterable[str]) -> bool:
        now = time.time()
        states = list(statuses)
        return self.update_runs(lease_values(lease, now),
                                f"run_id = ? AND status IN ({marks(states)}) AND {_LEASE_FREE}",
                                (lease.run_id, *states, now, lease.token)) == 1

    def renew_lease(self, lease: Lease) -> bool:
        now = time.time()
        return self.update_runs(renewal_values(lease, now), "run_id = ? AND lease_token = ?",
                                (lease.run_id, lease.token)) == 1

    def hand_back_lease(self, lease: Lease) -> bool:
        return self.update_runs(hand_back_values(time.time()), "run_id = ? AND lease_token = ?",
                                (lease.run_id, lease.token)) == 1

    def end_lease(self, lease: Lease, status: str, *, output: Any = None, error: str | None = None,
                  outcome: NewOutcome | None = None, review_due: float | None = None,
                  notifications: Sequence[NewNotification] = ()) -> bool:
        if outcome is None and not notifications:
            return self.execute(*self.end_statement(lease, status, output, error, review_due)) == 1
        run_pk = self.run_pk(lease.run_id) if outcome is not None else 0
        with self.write() as conn:
            if conn.execute(*self.end_statement(lease, status, output, error, review_due)).rowcount != 1:
                return False
            if outcome is not None:
                self.insert_outcome(conn, outcome, run_pk)
            self.write_notifications(conn, notifications)
            return True

    def end_statement(self, lease: Lease, status: str, output: Any, error: str | None,
                      review_due: float | None = None) -> tuple[str, tuple[Any, ...]]:
        """The UPDATE that writes a run's end and releases its lease, only while the lease is held."""
        values = release_values(status, output, error, review_due)
        sets = ", ".join(f"{key} = ?" for key in values)
        return (f"UPDATE runs SET {sets} WHERE run_id = ? AND lease_token = ?",
                (*values.values(), lease.run_id, lease.token))

    def get_run(self, run_id: str) -> RunView:
        rows = self.read(f"{_RUN_SELECT} WHERE run_id = ?", (run_id,))
        if not rows:
            raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
        return run_view(rows[0])

    def claim_queued_run(self, lease: Lease) -> str | None:
        """A conditional UPDATE per candidate, so exactly one racing worker wins (as the SQL store)."""
        while True:
            candidates = self.read("SELECT id, run_id FROM runs WHERE status = 'queued' ORDER BY id LIMIT 8")
            if not candidates:
                return None
            for row in candidates:
                if self.update_runs(lease_values(lease, time.time()), "id = ? AND status = 'queued'", (row.id,)) == 1:
                    return str(row.run_id)

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        where: list[str] = []
        params: list[Any] = []
        if status == "interrupted":
            where.append("status = 'running' AND lease_expires_at < ?")
            params.append(time.time())
        elif status == "running":  # (NULL < now is NULL in SQL: a run without a lease is simply running)
            where.append("status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at >= ?)")
            params.append(time.time())
        elif status:
            where.append("status = ?")
            params.append(status)
        if workflow:
            where.append("workflow = ?")
            params.append(workflow)
        if kind:
            where.append("kind = ?")
            params.append(kind)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return [run_view(r) for r in self.read(f"{_RUN_SELECT}{clause} ORDER BY id DESC LIMIT ?", (*params, limit))]

    def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        """A range on the unique index (``~`` sorts after every letter and digit), the prefix then compared
        exactly (SQLite's LIKE ignores case and would not use the index)."""
        rows = self.read("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? AND substr(run_id, 1, ?) = ? "
                         "ORDER BY run_id LIMIT ?", (prefix, prefix + "~", len(prefix), prefix, limit))
        return [str(row.run_id) for row in rows]

    def run_ids_starting_any(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        """A range on the unique index per prefix: in process, a query costs no round trip."""
        found: set[str] = set()
        for prefix in set(prefixes):
            found.update(self.run_ids_starting(prefix, limit=limit))
        return sorted(found)[:limit]

    def child_runs(self, run_id: str) -> list[RunView]:
        return [run_view(r) for r in self.read(f"{_RUN_SELECT} WHERE parent_run_id = ? ORDER BY id", (run_id,))]

    # -- step records ------------------------------------------------------------------------

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        run_pks = [self.run_pk(record.run_id) for record in records]
        with self.lock:
            if len(records) == 1 and not records[0].gates and not records[0].model_calls and end is None:
                # one statement (the lease check included): its own transaction, without BEGIN and COMMIT
                ids = [self.write_record(self.connection, records[0], run_pks[0])]
            else:
                with self.write() as conn:
                    ids = [self.write_record(conn, record, run_pk)
                           for record, run_pk in zip(records, run_pks, strict=True)]
                    if end is not None:
                        if conn.execute(*self.end_statement(end.lease, end.status, end.output, None)).rowcount != 1:
                            raise lease_lost(end.lease.run_id)
                        self.write_notifications(conn, end.notifications)
        for record_id, record in zip(ids, records, strict=True):  # committed: consumers may look them up
            self.digests.remember(record_id, record)
        return ids

    def write_record(self, conn: sqlite3.Connection, record: NewStepRecord, run_pk: int) -> int:
        """Insert a record and its gates (inside the caller's transaction, if it opened one)."""
        self.digests.fill(record)
        values = step_values(record, run_pk)
        if record.lease_token is None:
            record_id = int(conn.execute(_INSERT_STEP, values).lastrowid or 0)
        else:
            cursor = conn.execute(_INSERT_LEASED_STEP, (*values, run_pk, record.lease_token))
            if cursor.rowcount != 1:
                raise lease_lost(record.run_id)
            record_id = int(cursor.lastrowid or 0)
        if record.gates:
            conn.executemany(_INSERT_GATE, [gate_values(g, record_id, run_pk, record.step_id) for g in record.gates])
        if record.model_calls:
            conn.executemany(_INSERT_CALL, [model_call_values(c, run_pk, record_id, record)
                                            for c in record.model_calls])
        return record_id

    def stored_output_digests(self, ids: Iterable[int]) -> dict[int, str | None]:
        """Output digests of stored records, for the inputs digest of a record consuming them."""
        wanted = list(ids)
        return output_digests(self.read(STORED_OUTPUT_DIGESTS.format(ids=f"({marks(wanted)})"), wanted))

    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        run_pk = self.run_pk(run_id)
        with self.lock:
            self.connection.execute("BEGIN")  # one snapshot for both reads
            try:
                rows = self.connection.execute(_STEP_SELECT, (run_pk,)).fetchall()
                gate_rows = self.connection.execute(_GATE_SELECT, (run_pk,)).fetchall()
            finally:
                self.connection.commit()
        gates: dict[int, list[Any]] = {}
        for g in gate_rows:
            gates.setdefault(g.record_id, []).append(gate_view(g))
        views = [record_view(r, run_id, gates.get(r.id, [])) for r in rows]
        if latest_only:
            return list({v.unit: v for v in views}.values())
        return views

    def model_calls(self, run_ids: Sequence[str]) -> list[ModelCallView]:
        """Read here rather than by the SQLAlchemy store: ``run --json`` and ``show`` print the totals."""
        out: list[ModelCallView] = []
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # bounded IN lists
            chunk = ids[start:start + 500]
            rows = self.read(f"SELECT c.*, r.run_id AS run_id_ FROM model_calls c JOIN runs r ON r.id = c.run_pk "
                             f"WHERE r.run_id IN ({marks(chunk)}) ORDER BY c.id", chunk)
            out.extend(model_call_view(row, row.run_id_) for row in rows)
        return out

    # -- reviews ------------------------------------------------------------------------------

    def reviews(self, run_id: str) -> list[ReviewView]:
        rows = self.read("SELECT * FROM reviews WHERE run_pk = ? ORDER BY id",
                         (self.run_pk(run_id),))
        return [review_view(r, run_id) for r in rows]

    # -- outcomes and attribution -------------------------------------------------------------

    def add_outcome(self, outcome: NewOutcome) -> int:
        run_pk = self.run_pk(outcome.run_id)
        with self.lock:
            return self.insert_outcome(self.connection, outcome, run_pk)

    @staticmethod
    def insert_outcome(conn: sqlite3.Connection, outcome: NewOutcome, run_pk: int) -> int:
        """Insert an outcome (inside the caller's transaction, if it opened one)."""
        values = outcome_values(outcome, run_pk, time.time())
        return int(conn.execute(insert_sql("outcomes", values), tuple(values.values())).lastrowid or 0)

    def outcomes(self, run_id: str) -> list[OutcomeView]:
        rows = self.read("SELECT * FROM outcomes WHERE run_pk = ? ORDER BY id",
                         (self.run_pk(run_id),))
        return [outcome_view(r, run_id) for r in rows]

    # -- the notification outbox (statements shared with the SQL store, in rows.py) --

    @staticmethod
    def write_notifications(conn: sqlite3.Connection, notifications: Sequence[NewNotification]) -> None:
        """Insert outbox rows (inside the caller's transaction, if it opened one)."""
        if notifications:
            now = time.time()
            conn.executemany(OUTBOX_INSERT, [dict(zip(NOTIFICATION_COLUMNS, notification_values(n, now), strict=True))
                                             for n in notifications])

    def add_notifications(self, notifications: Sequence[NewNotification]) -> None:
        with self.write() as conn:
            self.write_notifications(conn, notifications)

    def claim_notifications(self, holder: str, *, now: float, claim_seconds: float, limit: int = 20,
                            run_id: str | None = None) -> list[NotificationView]:
        params: dict[str, Any] = {"now": now, "limit": limit}
        if run_id is not None:
            params["run_id"] = run_id
        due = self.read(OUTBOX_DUE_OF_RUN if run_id is not None else OUTBOX_DUE, params)
        claimed = []
        for row in due:
            if self.execute(OUTBOX_CLAIM, {"holder": holder, "until": now + claim_seconds,
                                           "id": row.id, "now": now}) == 1:
                claimed.append(notification_view(self.read(OUTBOX_BY_ID, {"id": row.id})[0]))
        return claimed

    def finish_notification(self, notification_id: int, holder: str, *, delivered: bool, tries: int,
                            error: str | None, retry_at: float | None, now: float) -> bool:
        values = notification_outcome_values(delivered=delivered, tries=tries, error=error, retry_at=retry_at, now=now)
        return self.execute(OUTBOX_FINISH, {**values, "id": notification_id, "holder": holder}) == 1

    def notification_claim_holders(self, now: float) -> list[str]:
        return [str(row.claimed_by) for row in self.read(OUTBOX_CLAIM_HOLDERS, {"now": now})]

    def release_notification_claims(self, holder: str) -> int:
        return self.execute(OUTBOX_RELEASE, {"holder": holder})

    def notifications(self, *, failed: bool = False, run_id: str | None = None,
                      limit: int = 100) -> list[NotificationView]:
        if run_id is not None:
            rows = self.read(OUTBOX_LIST_OF_RUN, {"run_id": run_id, "limit": limit})
        else:
            rows = self.read(OUTBOX_LIST_FAILED if failed else OUTBOX_LIST, {"limit": limit})
        return [notification_view(row) for row in rows]

    def count_rows(self) -> dict[str, int]:
        with self.lock:
            return {table: int(self.connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                    for table in TABLE_NAMES}
