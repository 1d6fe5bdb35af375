"""Whether the SQLite store's connection waits for another connection's lock, switched only when it changes.

The async API tries the embedded store's calls on its event loop without waiting
(:mod:`orchestrator.store.off_loop`): its connection's busy timeout must be 0 meanwhile, and the
configured one (``ORCHESTRATOR_SQLITE_BUSY``) for every other call. ``PRAGMA busy_timeout`` costs
more than a small INSERT, so it is not set around each call: the lock that every use of the
connection takes records which timeout is in force, a call tried without waiting sets 0 if it is not
already, and any other call taking the lock sets the configured one back first. A run whose calls
all stay on the loop sets it once.
"""

from __future__ import annotations

import sqlite3
import threading

from orchestrator.core.errors import StoreUnavailableError
from orchestrator.store.off_loop import WouldWait
from orchestrator.store.transient import unretried


class WaitingLock:
    """The lock around the store's connection (re-entrant, as ``threading.RLock``); taken with ``with``, it
    leaves the connection waiting for other connections' locks."""

    def __init__(self, busy_pragma: str) -> None:
        self.rlock = threading.RLock()
        self.busy_pragma = busy_pragma
        """``PRAGMA busy_timeout=<configured ms>``."""
        self.connection: sqlite3.Connection | None = None
        """Set once the store has opened it; until then its timeout is the configured one."""
        self.waits = True
        """Whether the connection's busy timeout is the configured one (False: 0)."""
        self.refusing = 0
        """How deep the holder is inside :class:`WithoutWaiting` (only a holder changes it)."""

    def __enter__(self) -> WaitingLock:
        self.rlock.acquire()
        if not self.waits and not self.refusing and self.connection is not None:
            try:
                self.connection.execute(self.busy_pragma)
            except BaseException:
                self.rlock.release()
                raise
            self.waits = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.rlock.release()


class WithoutWaiting:
    """Calls of the store made inside raise WouldWait, having changed nothing, where they would wait: for
    another thread holding the store's lock (at once, on entering), or for another connection's lock (the
    busy timeout is 0 and a busy database is not retried; the store's ``reconnect`` rolls back what the
    call began)."""

    __slots__ = ("lock", "retry")

    def __init__(self, lock: WaitingLock) -> None:
        self.lock = lock
        self.retry = unretried()

    def __enter__(self) -> None:
        lock = self.lock
        if not lock.rlock.acquire(blocking=False):
            raise WouldWait
        lock.refusing += 1
        try:
            if lock.waits and lock.connection is not None:
                lock.connection.execute("PRAGMA busy_timeout=0")
                lock.waits = False
        except BaseException:
            lock.refusing -= 1
            lock.rlock.release()
            raise
        self.retry.__enter__()

    def __exit__(self, exc_type: object, exc: BaseException | None, exc_tb: object) -> None:
        self.retry.__exit__()
        self.lock.refusing -= 1
        self.lock.rlock.release()
        if isinstance(exc, StoreUnavailableError):  # the database was busy
            raise WouldWait from exc
