"""One event loop per thread for the blocking entry points (``start_run``, ``continue_run``, replays).

``anyio.run`` makes a new event loop for every call and closes it after: a selector, signal
handling, shutting down async generators and the default executor, and, for a sync step, a new
worker thread, since anyio keeps its worker threads per loop. For a script that starts thousands
of small runs one after another that is most of the cost of a run (a 5-step run spent ~0.4 ms of
~0.9 ms on it). Here each thread keeps one loop and reuses it for every blocking call it makes;
the loop's worker threads, and async clients bound to the loop (an LLM provider's HTTP client),
live as long as the thread. Calls never nest: a blocking entry point refuses to run inside a
running loop (:func:`orchestrator.runner.refuse_inside_event_loop`).

The loop of the main thread is closed at interpreter exit; that of any other thread when the
thread ends and its state is dropped.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _ThreadLoop:
    """The loop a thread reuses; closing it when the thread's state is dropped frees its selector."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()

    def close(self) -> None:
        self.runner.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # a thread's state dropped during interpreter shutdown: nothing left to free
            pass


class _PerThread(threading.local):
    loop: _ThreadLoop | None = None


_per_thread = _PerThread()


def _thread_loop() -> _ThreadLoop:
    loop = _per_thread.loop
    if loop is None:
        loop = _per_thread.loop = _ThreadLoop()
        if threading.current_thread() is threading.main_thread():
            atexit.register(loop.close)
    return loop


def run_blocking(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await fn(*args)`` on this thread's event loop, blocking until it returns."""
    async def call() -> T:
        return await fn(*args)

    return _thread_loop().runner.run(call())
