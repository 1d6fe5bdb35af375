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

Which one applies is a context variable, set around an execution by its entry point and
inherited by the tasks it starts (its steps, its child runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread

P = ParamSpec("P")
T = TypeVar("T")

_off_loop: ContextVar[bool] = ContextVar("orchestrator_store_calls_off_loop", default=False)


async def store_call(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, a blocking call on the store, made where the current execution makes
    them (see the module docstring). Off the loop it runs to its end even when the caller is cancelled
    meanwhile: a write, once handed over, is never left half-known."""
    if not _off_loop.get():
        return fn(*args, **kwargs)
    with anyio.CancelScope(shield=True):
        result = await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    return result


def store_calls_off_loop() -> bool:
    """Whether store calls of the current execution leave the event loop."""
    return _off_loop.get()


@contextmanager
def store_calls(*, off_loop: bool) -> Iterator[None]:
    """Make the store calls of what runs inside (in this task and the tasks it starts) leave the event
    loop, or stay on it."""
    token = _off_loop.set(off_loop)
    try:
        yield
    finally:
        _off_loop.reset(token)
