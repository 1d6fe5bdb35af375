"""Where an execution's store calls run: on its event loop's thread, or on a worker thread.

A store call blocks the thread that makes it: a commit on SQLite, a round trip to PostgreSQL
and, while another connection holds SQLite's write lock, up to the busy timeout
(``ORCHESTRATOR_SQLITE_BUSY``). Made on an event loop's thread, it stops everything else on that
loop meanwhile.

The blocking entry points (``start_run``, ``continue_run``, ``orchestrator run``) own their loop:
nothing but the execution runs on it, so their store calls stay on it (a hand-over to a thread
and back costs ~45 µs, more than a SQLite commit at ``synchronous=normal``). The async ones
(``start_run_async``, ``continue_run_async`` and the ``a``-prefixed methods of
:class:`~orchestrator.api.Orchestrator`) run on a loop the caller shares with other work (a web
server, a notebook), so they hand each store call to a worker thread, and the caller's other
tasks go on while the database makes it wait.

A store that can try a call without waiting (:class:`TriesWithoutWaiting`: the embedded SQLite store)
keeps most of the async entry points' calls on the loop too: each of its own calls is first made
there, with waiting for a lock refused, and handed to a worker thread only when it met one (another
connection's write lock, or another thread's call on the store). A free database then costs no
hand-over, and a locked one still never holds the caller's loop.

Which one applies is a context variable, set around an execution by its entry point and
inherited by the tasks it starts (its steps, its child runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import ParamSpec, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

P = ParamSpec("P")
T = TypeVar("T")

class WouldWait(Exception):  # noqa: N818 (not an error: the call is made again off the loop)
    """A call tried without waiting met a lock: it left nothing behind, and is made again where it may wait."""


@runtime_checkable
class TriesWithoutWaiting(Protocol):
    """A store whose own calls can be tried on the event loop: inside :meth:`without_waiting`, a call that
    would wait for a lock (another connection's, another thread's) raises :class:`WouldWait` at once,
    having changed nothing."""

    def without_waiting(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class OffLoop:
    """Store calls leave the event loop; those of ``quick``'s own methods only when they would wait."""

    quick: TriesWithoutWaiting | None = None


_placement: ContextVar[OffLoop | None] = ContextVar("orchestrator_store_calls_off_loop", default=None)


async def store_call(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, a blocking call on the store, made where the current execution makes
    them (see the module docstring). Off the loop it runs to its end even when the caller is cancelled
    meanwhile: a write, once handed over, is never left half-known."""
    placement = _placement.get()
    if placement is None:
        return fn(*args, **kwargs)
    quick = placement.quick
    if quick is not None and bound_to(fn, quick):
        try:
            with quick.without_waiting():
                return fn(*args, **kwargs)
        except WouldWait:
            pass
    with anyio.CancelScope(shield=True):
        result = await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    return result


def bound_to(fn: Callable[..., object], store: object) -> bool:
    """Whether ``fn`` is a method of ``store`` itself (not of a store it delegates to, nor a function given it)."""
    return getattr(fn, "__self__", None) is store


def store_calls_off_loop() -> bool:
    """Whether store calls of the current execution leave the event loop."""
    return _placement.get() is not None


@contextmanager
def store_calls(*, off_loop: bool, store: object = None) -> Iterator[None]:
    """Make the store calls of what runs inside (in this task and the tasks it starts) leave the event
    loop, or stay on it. ``store``: the execution's store; off the loop, one that can try a call without
    waiting has its own calls tried on the loop first."""
    placement = None
    if off_loop:
        placement = OffLoop(store if isinstance(store, TriesWithoutWaiting) else None)
    token = _placement.set(placement)
    try:
        yield
    finally:
        _placement.reset(token)
