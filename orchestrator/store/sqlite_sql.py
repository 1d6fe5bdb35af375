"""The SQLAlchemy side of a SQLite database, on the embedded store's own ``sqlite3`` connection.

:class:`~orchestrator.store.sqlite.SqliteStore` runs workflows on the stdlib ``sqlite3`` module, so
``orchestrator run`` never pays SQLAlchemy's import (about a third of its start-up). What it does
not do itself (upgrading an older schema, analytics, attribution queries, review decisions) goes to a
:class:`SqliteSqlStore`, made on first use; this module is imported only then.

That store is not a second store on the file: its engine's one pooled connection *is* the embedded
store's connection (a ``creator`` and a static pool), and both sides take the embedded store's lock,
so one process holds one connection per database and one writer at a time on it. Two things differ
from a connection SQLAlchemy opens itself, and are set here once:

- the embedded connection is in autocommit mode (``isolation_level=None``: its writes say ``BEGIN
  IMMEDIATE`` themselves), so the SQLAlchemy side begins a transaction before its first INSERT,
  UPDATE, DELETE or REPLACE, exactly where the ``sqlite3`` module's default mode would, and a
  transaction of several statements stays one transaction;
- the pragmas are the embedded connection's, already applied; the engine adds none.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from orchestrator.store.sql import SqlStore
from orchestrator.store.sqlite_pragmas import apply_pragmas

_BEGINS_A_WRITE = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def begin_before_writes(_conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
    """``before_cursor_execute``: open a (deferred) transaction before a write when none is open, as the
    ``sqlite3`` module's default mode does, on a connection that is in autocommit mode for its other user."""
    if not cursor.connection.in_transaction and statement.lstrip()[:7].upper().startswith(_BEGINS_A_WRITE):
        cursor.connection.execute("BEGIN")


class SqliteSqlStore(SqlStore):
    """:class:`SqlStore` on a given ``sqlite3`` connection, serialised by the given lock (its owner's)."""

    def __init__(self, url: str, connection: sqlite3.Connection, lock: AbstractContextManager[Any]) -> None:
        self.connection = connection
        super().__init__(url)
        self.lock = lock  # the owner's: its raw statements and these never interleave on the one connection

    def create_engine(self) -> Engine:
        engine = create_engine(self.url, creator=lambda: self.connection, poolclass=StaticPool)
        event.listen(engine, "before_cursor_execute", begin_before_writes)
        return engine

    def reconnect(self) -> None:
        """A busy or locked file leaves the connection usable (and a memory database lives only as long as
        it does): end the transaction the error left, keep the connection."""
        with self.lock:
            self.conn.rollback()

    def close(self) -> None:
        """Let go of the SQLAlchemy side; the connection is its owner's to close."""
        with self.lock:
            self.conn.close()


def ensure_schema(url: str, synchronous: str) -> None:
    """Create the schema of a new SQLite database, or bring an older one up to date, on a connection of
    its own (for tools that have no embedded store open: ``sqlite_ddl``'s schema dump)."""
    path = url.split("///", 1)[1]
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        apply_pragmas(connection, synchronous)
        SqliteSqlStore(url, connection, threading.RLock()).close()
    finally:
        connection.close()
