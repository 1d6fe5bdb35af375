"""Database errors at the store's edge: transient ones retried with back-off, none shown with its SQL.

A worker lives for weeks; the database under it restarts, fails over, drops idle connections
(``pg_terminate_backend``), or is briefly locked by another SQLite writer. Such an error says
nothing about the run, so the store retries the call, as DBOS's ``db_retry`` does: an
exponential back-off with jitter (from 50 ms, doubling to 2 s), a fresh connection from the
pool before each new try, for up to ``ORCHESTRATOR_DB_RETRY_SECONDS`` (default 30 s, read once as the
store opens) from the first failure, each try logged. Past that, or for an error that a retry cannot
cure, the call raises a :class:`~orchestrator.core.errors.StoreError` whose message is the driver's one-line
reason: SQLAlchemy's text would add the statement and its bound parameters (a run's inputs
and outputs) to every log and terminal it reaches.

:class:`RetriedStore` applies this to every method of the Store interface a backend defines.
A store method calling another one is retried once, as a whole, by the outermost call: an
inner retry would repeat a statement of a transaction that the lost connection already rolled
back. Each retried call is one transaction (or a read), so repeating it repeats nothing that
committed, with one window no client can close: a commit whose acknowledgement was lost. A
run is created under an id chosen before the first try, so a repeated creation finds its row.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from orchestrator.core.errors import (
    DatabaseUnreachableError,
    InputError,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
)

log = logging.getLogger("orchestrator.store")

RETRY_SECONDS_ENV = "ORCHESTRATOR_DB_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 30.0
FIRST_PAUSE = 0.05
MAX_PAUSE = 2.0

_DRIVER_MODULES = ("sqlite3", "sqlalchemy", "psycopg")
_TRANSIENT_SQLSTATE_CLASSES = ("08", "57")
"""Connection exceptions, operator intervention (admin shutdown, crash shutdown, cannot connect now)."""
_TRANSIENT_SQLSTATES = frozenset({"53000", "53200", "53300", "40001", "40P01"})
"""Insufficient resources (but a full disk), too many connections, serialization failure, deadlock:
each aborts only the transaction, which a retry repeats whole."""
_DISK_FULL_SQLSTATE = "53100"

Kind = Literal["transient", "full", "other"]
T = TypeVar("T")

_calls = threading.local()


class RetryTally:
    """How often this process's store calls met a transient database error, and how often a call was tried
    again: what a worker's metrics report (plain counters; a lost update under a race costs one count, never a
    call). Errors outnumber retries by the errors nobody tried again: retrying off, or its time up, or a
    reconnection that failed too."""

    def __init__(self) -> None:
        self.transient_errors = 0
        self.retries = 0


TALLY = RetryTally()
"""Per thread: ``depth``, whether a store call is in progress (an inner one then runs as part of it);
``budget``, the seconds of retrying allowed inside :func:`retry_within`."""


def retry_seconds() -> float:
    """``ORCHESTRATOR_DB_RETRY_SECONDS`` (0 disables retrying), else the default."""
    text = os.environ.get(RETRY_SECONDS_ENV)
    try:
        value = float(text) if text else DEFAULT_RETRY_SECONDS
    except ValueError:
        raise InputError(f"{RETRY_SECONDS_ENV}={text!r} is not a number of seconds") from None
    if value < 0:
        raise InputError(f"{RETRY_SECONDS_ENV}={text!r} must not be negative")
    return value


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from the database driver or SQLAlchemy (not one of ours)."""
    return type(exc).__module__.split(".", 1)[0] in _DRIVER_MODULES


def driver_error(exc: BaseException) -> BaseException:
    """The DBAPI driver's exception under a SQLAlchemy wrapper (``exc.orig``), else ``exc`` itself."""
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


def classify(exc: BaseException) -> Kind:
    """transient: a retry may succeed (the connection, the server's state, a lock); full: the disk is
    full; other: the statement itself failed (a constraint, a missing table, a corrupt file)."""
    if getattr(exc, "connection_invalidated", False):
        return "transient"
    if type(exc).__name__ in ("DisconnectionError", "TimeoutError") and is_database_error(exc):
        return "transient"  # SQLAlchemy's pool: a dead connection at checkout, no connection free in time
    error = driver_error(exc)
    if isinstance(error, sqlite3.Error):
        code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF  # the primary result code
        if code == sqlite3.SQLITE_FULL:
            return "full"
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in str(error):
            return "transient"
        return "other"
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate:
        if sqlstate == _DISK_FULL_SQLSTATE:
            return "full"
        transient = sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES or sqlstate in _TRANSIENT_SQLSTATES
        return "transient" if transient else "other"
    # psycopg raises OperationalError without a SQLSTATE when it cannot connect or the socket dies
    if type(error).__name__ in ("OperationalError", "InterfaceError") and is_database_error(error):
        return "transient"
    return "other"


def is_missing_reference(exc: BaseException) -> bool:
    """Whether ``exc`` is a foreign key refusing a row that names another row not stored (SQLite's message,
    PostgreSQL's SQLSTATE 23503): a caller's mistake, said as such rather than as a database error."""
    error = driver_error(exc)
    if isinstance(error, sqlite3.IntegrityError):
        return "FOREIGN KEY constraint failed" in str(error)
    return getattr(error, "sqlstate", None) == "23503"


def detail(exc: BaseException) -> str:
    """The driver's message, first line only: never the SQL statement or its parameters, which
    SQLAlchemy appends to its own text on later lines."""
    lines = str(driver_error(exc)).strip().splitlines()
    return lines[0] if lines else ""


def reason(exc: BaseException) -> str:
    """The driver's error in one line: ``OperationalError: connection failed: ...``."""
    text = detail(exc)
    name = type(driver_error(exc)).__name__
    return f"{name}: {text}" if text else name


def store_error(exc: BaseException, display_url: str, *, waited: float = 0.0, tries: int = 1) -> StoreError:
    """The StoreError to raise for a database error that will not be retried (any more)."""
    kind = classify(exc)
    why = reason(exc)
    facts = {"driver_error": type(driver_error(exc)).__name__, "detail": detail(exc)}
    if kind == "full":
        return StoreFullError(f"the database {display_url} is full: {why}", **facts)
    if kind == "transient":
        return StoreUnavailableError(f"the database {display_url} did not answer ({tries} tries over {waited:.1f} s): "
                                     f"{why}", **facts)
    return StoreError(f"database error in {display_url}: {why}", **facts)


def _budget(configured: float | None = None) -> float:
    """How long a store call made now may retry: ``configured`` (a store's budget, read as it opened), else
    ``ORCHESTRATOR_DB_RETRY_SECONDS``; less inside :func:`retry_within`, nothing inside :class:`unretried`."""
    budget = retry_seconds() if configured is None else configured
    within = getattr(_calls, "budget", None)
    return budget if within is None else min(budget, within)


@contextlib.contextmanager
def retry_within(seconds: float) -> Iterator[None]:
    """Store calls made inside (on this thread) retry a transient error for at most ``seconds`` (never
    longer than ``ORCHESTRATOR_DB_RETRY_SECONDS``), then raise a StoreUnavailableError; 0 fails at once.
    For a caller that tries again on its own schedule: a lease renewal that kept retrying past its
    interval would only hold its thread while the next renewal is due."""
    before = getattr(_calls, "budget", None)
    _calls.budget = seconds
    try:
        yield
    finally:
        _calls.budget = before


class unretried:  # noqa: N801 (used as a function: ``with unretried():``)
    """:func:`retry_within` ``(0)``: store calls made inside fail at once on a transient error, as a
    StoreUnavailableError (a call tried on the event loop is made again on a thread). A class, not a
    generator: it is entered around every store call the async API tries on its loop."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        self.before = getattr(_calls, "budget", None)
        _calls.budget = 0.0

    def __exit__(self, *exc: object) -> None:
        _calls.budget = self.before


def call_retried(store: Any, call: Callable[[], T]) -> T:
    """``call()``, retried while it fails with a transient database error, as the module docstring says.

    ``store`` gives ``display_url`` for messages, ``retry_budget`` (seconds, :func:`retry_seconds` read as it
    opened: never the environment per call) and ``reconnect()``, called before each new try to
    replace a connection the error may have broken (it may raise a transient error itself: the
    server is still away, and the back-off goes on)."""
    depth = getattr(_calls, "depth", 0)
    if depth:  # inside another store call: the outermost one retries the whole of it
        return call()
    _calls.depth = 1
    try:
        budget = _budget(getattr(store, "retry_budget", None))
        if budget > 0:
            return _retry(store, call, budget)
        try:
            return call()
        except Exception as exc:
            if not is_database_error(exc):
                raise
            if classify(exc) == "transient":  # so that the caller's next try has a live connection
                TALLY.transient_errors += 1
                with contextlib.suppress(Exception):
                    store.reconnect()
            raise store_error(exc, store.display_url) from None
    finally:
        _calls.depth = 0


class _Backoff:
    """The waits between tries of one call: from FIRST_PAUSE doubling to MAX_PAUSE, with jitter, while the
    time since the first failure stays within ``budget`` seconds; each wait logged."""

    def __init__(self, display_url: str, budget: float) -> None:
        self.display_url = display_url
        self.budget = budget
        self.began = 0.0
        self.pause = FIRST_PAUSE

    def waited(self) -> float:
        return time.monotonic() - self.began if self.began else 0.0

    def wait(self, error: BaseException, tries: int) -> bool:
        """Sleep before try ``tries + 1``; False, at once, when that would outlast the budget."""
        now = time.monotonic()
        self.began = self.began or now
        if now - self.began + self.pause > self.budget:
            return False
        slept = self.pause * (0.5 + random.random())
        log.warning("the database %s did not answer (%s); try %d in %.2f s", self.display_url, reason(error),
                    tries + 1, slept)
        time.sleep(slept)
        self.pause = min(self.pause * 2, MAX_PAUSE)
        return True


def retry_opening(display_url: str, open_once: Callable[[], T]) -> T:
    """``open_once()`` (connecting, reading or creating the schema), retried as every later store call is
    while it fails with a transient database error: a server restarting or dropping connections while a
    command opens it is waited out, not taken for a wrong ``--db``. Each try opens afresh. Past the retry
    window (shorter inside :func:`retry_within`), a DatabaseUnreachableError naming the database; any other
    error is raised as it is."""
    backoff = _Backoff(display_url, _budget())
    tries = 0
    while True:
        try:
            return open_once()
        except Exception as exc:
            if not (is_database_error(exc) and classify(exc) == "transient"):
                raise
            TALLY.transient_errors += 1
            tries += 1
            if not backoff.wait(exc, tries):
                raise DatabaseUnreachableError(
                    f"cannot open the database {display_url}: it did not answer ({tries} "
                    f"{'try' if tries == 1 else 'tries'} over {backoff.waited():.1f} s): {reason(exc)}; "
                    "check --db or ORCHESTRATOR_DB", driver_error=type(driver_error(exc)).__name__,
                    detail=detail(exc)) from None
            TALLY.retries += 1


def _retry(store: Any, call: Callable[[], T], budget: float) -> T:
    backoff = _Backoff(store.display_url, budget)
    tries = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_database_error(exc):
                raise
            tries += 1
            first = exc
        while True:  # wait, reconnect; until a connection is made or the time is up
            transient = classify(first) == "transient"
            if transient:
                TALLY.transient_errors += 1
            if not transient or not backoff.wait(first, tries):
                raise store_error(first, store.display_url, waited=backoff.waited(), tries=tries) from None
            try:
                store.reconnect()
                break
            except Exception as exc:
                if not is_database_error(exc):
                    raise
                tries += 1
                first = exc
        TALLY.retries += 1


class RetriedStore:
    """A mixin for a database-backed Store: every method of the Store interface its class defines is
    called through :func:`call_retried`. The class provides ``reconnect()`` and sets :attr:`retry_budget`
    as it opens."""

    retry_budget: float
    """Seconds a call failing with a transient error is tried again (:func:`retry_seconds`)."""

    RETRIED: frozenset[str] = frozenset()
    """Filled in below from the Store interface (every public method but ``close``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in RetriedStore.RETRIED & set(vars(cls)):
            method = vars(cls)[name]
            if callable(method) and not getattr(method, "retried", False):
                setattr(cls, name, _retried(method))

    def reconnect(self) -> None:
        """Replace connections a transient error may have broken; nothing to do by default."""


def _retried(method: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> T:
        return call_retried(self, lambda: method(self, *args, **kwargs))

    call.retried = True  # type: ignore[attr-defined]
    return call


def _interface_methods() -> frozenset[str]:
    from orchestrator.store.base import Store

    return frozenset(name for role in Store.__mro__ if role is not object for name, value in vars(role).items()
                     if callable(value) and not name.startswith("_") and name not in ("close", "create_run"))


RetriedStore.RETRIED = _interface_methods()


def insert_once(store: Any, insert: Callable[[], int], find: Callable[[], int | None]) -> int:
    """Retried ``insert()`` of a row whose unique key was chosen before the first try: a try after a
    failed one first looks for the row (``find()``), since the failed try's commit may have landed
    with only its acknowledgement lost."""
    tried = False

    def once() -> int:
        nonlocal tried
        if tried:
            found = find()
            if found is not None:
                return found
        tried = True
        return insert()

    return call_retried(store, once)
