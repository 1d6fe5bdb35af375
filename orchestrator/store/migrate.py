"""Schema versions: create a new database at the head revision, upgrade an older one, refuse a newer one.

The schema's history is a chain of Alembic revisions in ``orchestrator/store/migrations/versions``.
Opening a store calls :func:`ensure_schema`, so upgrades apply on open; ``orchestrator db upgrade``
applies them explicitly. Opening a database that is already at :data:`HEAD_REVISION` costs one
``SELECT version_num FROM alembic_version`` and imports neither Alembic nor (given a stdlib
``sqlite3`` connection) SQLAlchemy: this module imports both only when a database must be created,
stamped or upgraded.

Concurrent first use is safe: every change happens inside one transaction that holds a schema
lock (``pg_advisory_xact_lock`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), and whoever gets
the lock second re-reads the revision and finds nothing left to do. PostgreSQL and SQLite both
have transactional DDL, so a failed upgrade leaves the database as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.core.errors import InputError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection, Engine

HEAD_REVISION: str = "0014"
"""The revision this code reads and writes; a test keeps it equal to the migration scripts' head."""

RELEASE_REVISION = "0001"
"""The schema of the release before migrations existed: its databases have no ``alembic_version``."""

SCHEMA_LOCK_KEY = 0x6F72636865737472
"""The PostgreSQL advisory lock key (any fixed 64-bit number) that serialises schema changes."""

MIGRATIONS = Path(__file__).with_name("migrations")



RELEASE_TABLES = frozenset({"workflows", "runs", "step_records"})
"""Tables every orchestrator database has held since the first release: a database with them is ours."""

TABLES_NAMED = 5
"""At most this many of a foreign database's tables are named when it is refused."""


def schema_state(tables: Iterable[str]) -> Literal["empty", "ours", "foreign"]:
    """What a database's tables make it: empty (only an empty database gets our schema), ours (at any
    revision, or from the release before revisions), or another application's."""
    names = {name for name in tables if not name.startswith("sqlite_")}
    if not names:
        return "empty"
    return "ours" if RELEASE_TABLES <= names else "foreign"


def refuse_unless_ours(display: str, tables: Iterable[str], *, create: bool) -> None:
    """InputError (exit 2; the caller has written nothing) for another application's database, and for an
    empty one unless ``create`` (only ``run``, a worker and ``db upgrade`` create our schema)."""
    names = sorted(name for name in tables if not name.startswith("sqlite_"))
    state = schema_state(names)
    if state == "foreign":
        shown = ", ".join(names[:TABLES_NAMED]) + (", ..." if len(names) > TABLES_NAMED else "")
        raise InputError(f"the database {display} is not an orchestrator database (it holds other tables: {shown}); "
                         "nothing was written to it; check --db or ORCHESTRATOR_DB")
    if state == "empty" and not create:
        raise InputError(f"the database {display} is empty: nothing has run with this --db yet "
                         "(check --db or ORCHESTRATOR_DB)")


@dataclass(frozen=True)
class SchemaChange:
    """What :func:`ensure_schema` found and did."""

    before: str | None
    """The stored revision it found (None: an empty database, or one from before migrations)."""
    action: Literal["current", "created", "adopted", "upgraded"]
    """current: nothing to do; created: new tables at head; adopted: an unversioned database
    stamped as the release schema and upgraded; upgraded: migrated from ``before`` to head."""
    after: str = HEAD_REVISION


def stored_revision(target: str | Engine | Connection | sqlite3.Connection) -> str | None:
    """The revision recorded in the database's ``alembic_version`` table, or None when there is none.

    ``target`` is a SQLAlchemy URL (already normalised: ``postgresql+psycopg://``, ``sqlite:///``),
    a SQLAlchemy ``Engine`` or ``Connection``, or a stdlib ``sqlite3.Connection`` (then SQLAlchemy is
    not imported). One plain ``SELECT``; nothing is written. On PostgreSQL, pass a ``Connection``
    only outside a transaction you care about: a missing table aborts the transaction it ran in.
    A URL is opened and closed here; a connection or engine is left open.
    """
    if isinstance(target, sqlite3.Connection):
        try:
            return _single(target.execute("SELECT version_num FROM alembic_version").fetchall())
        except sqlite3.OperationalError as exc:
            if is_missing_table(exc):
                return None
            raise
    if isinstance(target, str):
        engine = _engine_for(target)
        try:
            return stored_revision(engine)
        finally:
            engine.dispose()
    from sqlalchemy.engine import Engine

    if isinstance(target, Engine):
        with target.connect() as conn:
            return stored_revision(conn)
    from sqlalchemy.exc import DBAPIError

    try:
        return _single(target.exec_driver_sql("SELECT version_num FROM alembic_version").all())
    except DBAPIError as exc:
        if is_missing_table(exc.orig):
            target.rollback()
            return None
        raise


def table_names(url: str) -> list[str]:
    """The tables of the database at ``url`` (a normalised SQLAlchemy URL); nothing is written."""
    from sqlalchemy import inspect

    engine = _engine_for(url)
    try:
        return list(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def ensure_schema(target: str | Engine, *, create: bool = True) -> SchemaChange:
    """Bring the database to :data:`HEAD_REVISION`; safe to call from many processes at once.

    ``target`` is a SQLAlchemy URL (normalised, as for :func:`stored_revision`) or an ``Engine``
    (left open; a SQLite engine should set a busy timeout so waiting creators queue). Cases:

    - at head: one SELECT, nothing else (Alembic is not imported);
    - empty: every table of ``tables.py`` is created and the database stamped at head;
    - tables but no ``alembic_version`` (written by the release before migrations): stamped
      :data:`RELEASE_REVISION`, then upgraded to head;
    - an older revision: upgraded to head;
    - a revision this code does not know (a newer orchestrator wrote it): InputError, nothing changed;
    - another application's tables (:func:`schema_state`), or an empty database without ``create``:
      InputError, nothing changed.
    """
    if isinstance(target, str):
        engine = _engine_for(target)
        try:
            return ensure_schema(engine, create=create)
        finally:
            engine.dispose()
    found = stored_revision(target)
    if found == HEAD_REVISION:
        return SchemaChange(found, "current")
    with schema_lock(target) as conn:
        return _migrate(conn, create)


def _migrate(conn: Connection, create: bool) -> SchemaChange:
    """Inside the schema lock: re-read the revision (another process may have just migrated) and act."""
    from alembic import command
    from sqlalchemy import inspect

    from orchestrator.store.tables import metadata

    inspector = inspect(conn)
    refuse_unless_ours(display_url(conn), inspector.get_table_names(), create=create)
    found = _single(conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()) \
        if inspector.has_table("alembic_version") else None
    config = alembic_config(conn)
    if found == HEAD_REVISION:
        return SchemaChange(found, "current")
    if found is not None:
        if found not in known_revisions(config):
            raise InputError(f"database schema {found} is newer than this orchestrator; upgrade the package "
                             f"(this one knows revisions up to {HEAD_REVISION})")
        command.upgrade(config, "head")
        return SchemaChange(found, "upgraded")
    if not inspector.has_table("workflows"):
        metadata.create_all(conn)
        command.stamp(config, "head")
        return SchemaChange(None, "created")
    for table in metadata.sorted_tables:  # the columns the release added by hand (tables.ADDED_BY_RELEASE)
        for column in (c for c in table.columns if c.info.get("added_by_release")):
            if column.name not in {c["name"] for c in inspector.get_columns(table.name)}:
                kind = column.type.compile(dialect=conn.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}")
    command.stamp(config, RELEASE_REVISION)
    command.upgrade(config, "head")
    return SchemaChange(None, "adopted")


@contextmanager
def schema_lock(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds the database's schema lock; committed on success.

    PostgreSQL: a transaction-scoped advisory lock (released by the commit or rollback). SQLite:
    ``BEGIN IMMEDIATE``, the database's write lock, waited for on the busy timeout. Other
    databases get a plain transaction (the advisory lock is not portable).
    """
    with engine.connect() as conn:
        dialect = conn.dialect.name
        if dialect == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})")
        elif dialect == "sqlite":
            # the stdlib driver would begin only before the first INSERT, leaving DDL unlocked
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        yield conn
        conn.commit()


def alembic_config(conn: Connection | None = None) -> Config:
    """The Alembic configuration, built in code (no ``alembic.ini``): the packaged scripts, and the
    connection the environment migrates (None for reading the scripts only)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def script_head() -> str:
    """The head revision of the packaged migration scripts (what :data:`HEAD_REVISION` must equal)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migration scripts have a head"
    return head


def known_revisions(config: Config) -> set[str]:
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}


def is_missing_table(error: BaseException | None) -> bool:
    """Whether a DBAPI error says the queried table does not exist (SQLite's message, SQLSTATE 42P01)."""
    if isinstance(error, sqlite3.OperationalError):
        return str(error).startswith("no such table")
    return getattr(error, "sqlstate", None) == "42P01"


def display_url(conn: Connection) -> str:
    """The database a connection is on, for messages: a SQLite file's path, else the URL without credentials."""
    url = conn.engine.url
    if url.get_backend_name() == "sqlite":
        return url.database or "(memory)"
    return url.render_as_string(hide_password=True).split("@")[-1]


def _single(rows: Any) -> str | None:
    """The one stored revision (the history is linear), or None for an empty table."""
    return str(rows[0][0]) if rows else None


def _engine_for(url: str) -> Engine:
    from sqlalchemy import create_engine

    options: dict[str, Any] = {}
    if url.startswith("sqlite"):
        options["connect_args"] = {"timeout": 30}  # concurrent creators wait for the write lock
    return create_engine(url, **options)
