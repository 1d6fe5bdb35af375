"""The SQLAlchemy side of a SQLite database: its schema, and the store methods the embedded store hands over.

:class:`~orchestrator.store.sqlite.SqliteStore` runs workflows on the stdlib ``sqlite3`` module, so
``orchestrator run`` never pays SQLAlchemy's import (about a third of its start-up). What it does
not do itself (creating or upgrading the schema, analytics, attribution queries, review decisions)
goes to a :class:`SqliteSqlStore` on the same file, opened on first use; this module is imported
only then.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from orchestrator.store.sql import SqlStore
from orchestrator.store.sqlite_pragmas import apply_pragmas


def pragma_listener(level: str, *, read_only: bool = False) -> Any:
    """A connect listener giving every SQLAlchemy connection the embedded store's pragmas."""
    def apply(dbapi_conn: Any, _record: Any) -> None:
        apply_pragmas(dbapi_conn, level, read_only=read_only)

    return apply


class SqliteSqlStore(SqlStore):
    """:class:`SqlStore` on a SQLite file, with the same pragmas as the embedded store's connection."""

    def __init__(self, url: str, synchronous: str) -> None:
        self.synchronous = synchronous
        super().__init__(url)

    def create_engine(self) -> Engine:
        options: dict[str, Any] = {}
        if "mode=memory" in self.url:  # one connection keeps a shared-cache memory database's data
            options["poolclass"] = StaticPool
        engine = create_engine(self.url, connect_args={"check_same_thread": False}, **options)
        event.listen(engine, "connect", pragma_listener(self.synchronous, read_only="mode=ro" in self.url))
        return engine

    def reconnect(self) -> None:
        """A busy or locked file leaves the connection usable (and a shared memory database lives only as
        long as it does): end the transaction the error left, keep the connection."""
        with self.lock:
            self.conn.rollback()


def ensure_schema(url: str, synchronous: str) -> None:
    """Create the schema of a new SQLite database, or bring an older one up to date.

    The embedded store calls this, and only this, when its database lacks a table or a column it
    uses: the one place that decides how a SQLite schema is created or upgraded. Opening a
    :class:`SqliteSqlStore` creates the tables and adds missing columns, as the SQL store does.
    """
    SqliteSqlStore(url, synchronous).close()
