"""The pragmas of every connection to an embedded SQLite database, whichever library opened it.

Its own module so that the stdlib store and the SQLAlchemy store on the same file share it
without importing each other.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from typing import Any

from orchestrator.core.errors import InputError

BUSY_ENV = "ORCHESTRATOR_SQLITE_BUSY"
BUSY_TIMEOUT_SECONDS = 30.0
"""How long a connection waits for another one's lock unless ``ORCHESTRATOR_SQLITE_BUSY`` says
otherwise (the sqlite3 default is 5 seconds; reviewers and workers can hold a write for a moment,
and creators of one new file queue)."""
MAX_BUSY_SECONDS = 86400.0


def busy_timeout_seconds() -> float:
    """``ORCHESTRATOR_SQLITE_BUSY`` (seconds a statement waits for another connection's lock before
    failing as busy; 0: fail at once), else :data:`BUSY_TIMEOUT_SECONDS`. InputError for anything
    but a number of seconds from 0 to a day."""
    text = os.environ.get(BUSY_ENV)
    if not text:
        return BUSY_TIMEOUT_SECONDS
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{BUSY_ENV}={text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_BUSY_SECONDS):
        raise InputError(f"{BUSY_ENV}={text!r} must be a number of seconds from 0 to {MAX_BUSY_SECONDS:g} (a day)")
    return value


def busy_timeout_pragma() -> str:
    """The ``PRAGMA busy_timeout`` statement for :func:`busy_timeout_seconds`."""
    return f"PRAGMA busy_timeout={int(busy_timeout_seconds() * 1000)}"


def apply_pragmas(connection: Any, level: str, *, read_only: bool = False) -> None:
    """The store's pragmas, on a DBAPI connection (this store's, or one SQLAlchemy opens on the file).
    ``read_only`` (a database opened ``mode=ro``): nothing that writes, so the journal mode is left as is."""
    cursor = connection.cursor()
    try:
        cursor.execute(busy_timeout_pragma())
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
    deadline = time.monotonic() + busy_timeout_seconds()
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
