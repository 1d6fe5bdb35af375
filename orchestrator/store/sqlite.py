"""The embedded SQLite store: WAL, a configurable ``synchronous`` level, and a raw write path.

A persisted step should cost little more than the raw INSERT + COMMIT underneath it (see
``benchmarks/``), and SQLAlchemy's per-execute work (cache key, execution context, result
object) costs more than SQLite's own INSERT + COMMIT of a small row. So the three hottest
writes (a run row, a step record with its gates, a run's status) are compiled once by
SQLAlchemy for this dialect and then executed on the DBAPI cursor with positional values,
whenever no SQLAlchemy transaction is open on the held connection. The SQL text and the
columns' bind processors are SQLAlchemy's, so the stored values are the same either way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Table, create_engine, event, insert
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DBAPIError

from orchestrator.errors import InputError
from orchestrator.store.base import NewStepRecord, lease_lost
from orchestrator.store.sql import (
    GATE_COLUMNS,
    RUN_COLUMNS,
    RUN_KEYS,
    STEP_COLUMNS,
    SqlStore,
    gate_values,
    runs_t,
    step_values,
    steps_t,
    update_run_by_pk,
)
from orchestrator.store.tables import TABLES

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


def sqlite_pragmas(level: str) -> Any:
    """A connect listener applying the store's pragmas to every new DBAPI connection."""
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


class RawStatement:
    """A statement compiled once for a dialect, run on the DBAPI cursor with positional values.

    ``binds`` names the parameters in order: the table's columns, plus any ``bindparam`` of the
    statement (``pk_``). Raises ValueError when the dialect does not bind positionally in order.
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


_COMPILED: dict[tuple[Any, ...], RawStatement] = {}
"""Per process: a compile costs about a millisecond, more than a whole small run."""


def raw_statement(name: str, table: Table, binds: Sequence[str], dialect: Dialect, *, statement: Any = None,
                  columns: Sequence[str] | None = None) -> RawStatement:
    key = (name, table.name, tuple(binds), type(dialect), dialect.paramstyle, dialect.positional)
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = _COMPILED[key] = RawStatement(table, binds, dialect, statement, columns)
    return compiled


class RawTransaction:
    """``with RawTransaction(dbapi_connection, dialect) as tx:`` statements on a cursor, then COMMIT.

    The caller holds the store's lock and has checked that no SQLAlchemy transaction is open, so
    the DBAPI connection is idle. On any error the transaction is rolled back, and DBAPI errors
    come out as SQLAlchemy's exception types (IntegrityError, OperationalError), as through
    ``Connection.execute``.
    """

    __slots__ = ("dbapi", "dialect", "cursor", "sql", "params")

    def __init__(self, dbapi: Any, dialect: Dialect) -> None:
        self.dbapi = dbapi
        self.dialect = dialect
        self.sql = ""
        self.params: Any = None

    def __enter__(self) -> RawTransaction:
        self.cursor = self.dbapi.cursor()
        return self

    def execute(self, sql: str, params: Sequence[Any]) -> Any:
        self.sql, self.params = sql, params
        self.cursor.execute(sql, params)
        return self.cursor

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any:
        self.sql, self.params = sql, params
        self.cursor.executemany(sql, params)
        return self.cursor

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        try:
            if exc is None:
                try:
                    self.dbapi.commit()
                    return False
                except BaseException as commit_error:
                    exc, self.sql, self.params = commit_error, "COMMIT", None
            self.dbapi.rollback()
            dbapi_error = self.dialect.loaded_dbapi.Error
            if isinstance(exc, dbapi_error):
                raise DBAPIError.instance(self.sql, self.params, exc, dbapi_error, dialect=self.dialect) from exc
            if exc_type is None:
                raise exc
            return False
        finally:
            self.cursor.close()


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


def corrupt(path: str, why: str) -> InputError:
    return InputError(f"the database {path} is corrupt (or not a SQLite database): {why}; "
                      "restore it from a backup or point --db elsewhere")


class SqliteStore(SqlStore):
    """SQLite: the embedded default (``sqlite:///path``; ``sqlite://`` alone is in memory).

    ``create=False`` (read-only commands) refuses a path with no database instead of creating
    the file and its directories. A file that is not a SQLite database, or a truncated one, is
    refused before anything is written to it.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url, self.synchronous = split_synchronous(url)
        path = self.url.split("///", 1)[-1] if "///" in self.url else ""
        path = path.split("?", 1)[0]
        if path and path != ":memory:" and not path.startswith("file:"):
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
        try:
            super().__init__(self.url)
        except InputError as exc:
            text = str(exc)
            if path and ("file is not a database" in text or "malformed" in text):
                raise corrupt(path, "SQLite says " + ("'file is not a database'" if "not a database" in text
                                                      else "'database disk image is malformed'")) from None
            raise
        dialect = self.engine.dialect
        self.raw_steps = raw_statement("insert", steps_t, STEP_COLUMNS, dialect)
        self.raw_gates = raw_statement("insert", TABLES["gate_results"], GATE_COLUMNS, dialect)
        self.raw_runs = raw_statement("insert", runs_t, RUN_COLUMNS, dialect)
        # the leased insert: the same columns and values, written only while the run's lease has the token
        columns = self.raw_steps.sql[self.raw_steps.sql.index("(") + 1:self.raw_steps.sql.index(")")]
        self.raw_leased_steps = (f"INSERT INTO step_records ({columns}) SELECT {', '.join('?' * len(STEP_COLUMNS))} "
                                 "WHERE EXISTS (SELECT 1 FROM runs WHERE runs.id = ? AND runs.lease_token = ?)")

    def create_engine(self) -> Engine:
        engine = create_engine(self.url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", sqlite_pragmas(self.synchronous))
        return engine

    def raw(self) -> RawTransaction | None:
        """A raw transaction when no SQLAlchemy one is open on the held connection (caller holds the lock)."""
        if self.conn.in_transaction():
            return None
        return RawTransaction(self.conn.connection.dbapi_connection, self.engine.dialect)

    def insert_run(self, values: tuple[Any, ...]) -> int:
        with self.lock:
            tx = self.raw()
            if tx is None:
                return super().insert_run(values)
            with tx:
                return int(tx.execute(self.raw_runs.sql, self.raw_runs.row(values)).lastrowid)

    def update_run(self, pk: int, values: dict[str, Any]) -> bool:
        keys = tuple(k for k in RUN_KEYS if k in values)  # SET clauses come in table order
        stmt = raw_statement("update-run", runs_t, (*keys, "pk_"), self.engine.dialect,
                             statement=update_run_by_pk, columns=keys)
        with self.lock:
            tx = self.raw()
            if tx is None:
                return super().update_run(pk, values)
            with tx:
                return bool(tx.execute(stmt.sql, stmt.row((*(values[k] for k in keys), pk))).rowcount == 1)

    def insert_step_record(self, record: NewStepRecord) -> int:
        run_pk = self.run_pk(record.run_id)
        with self.lock:
            tx = self.raw()
            if tx is None:
                return super().insert_step_record(record)
            with tx:
                values = self.raw_steps.row(step_values(record, run_pk))
                if record.lease_token is None:
                    record_id = int(tx.execute(self.raw_steps.sql, values).lastrowid)
                else:
                    cursor = tx.execute(self.raw_leased_steps, (*values, run_pk, record.lease_token))
                    if cursor.rowcount != 1:
                        raise lease_lost(record.run_id)
                    record_id = int(cursor.lastrowid)
                if record.gates:
                    tx.executemany(self.raw_gates.sql, [
                        self.raw_gates.row(gate_values(g, record_id, run_pk, record.step_id)) for g in record.gates])
            return record_id
