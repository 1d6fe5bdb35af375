"""The pragmas of every connection to an embedded SQLite database, whichever library opened it.

Its own module so that the stdlib store and the SQLAlchemy store on the same file share it
without importing each other.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a connection waits for another one's lock (the sqlite3 default is 5 seconds;
reviewers and workers can hold a write for a moment, and creators of one new file queue)."""


def apply_pragmas(connection: Any, level: str, *, read_only: bool = False) -> None:
    """The store's pragmas, on a DBAPI connection (this store's, or one SQLAlchemy opens on the file).
    ``read_only`` (a database opened ``mode=ro``): nothing that writes, so the journal mode is left as is."""
    cursor = connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
        if read_only:
            return
        enter_wal_mode(cursor)
        # NORMAL is durable against process crashes in WAL mode (a killed process loses
        # nothing committed); FULL adds power-loss safety at the price of an fsync per commit,
        # here ~290 µs against ~17 µs.
        cursor.execute(f"PRAGMA synchronous={level.upper()}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def enter_wal_mode(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another connection holds the lock it needs.

    Switching a new file to WAL takes its exclusive lock. When several processes open one new
    file at once, SQLite may answer SQLITE_BUSY at once instead of calling the busy handler (it
    does so wherever waiting could deadlock), so the busy timeout alone does not make them queue.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # the primary code, any extended one
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
