"""One event loop per thread for the blocking entry points (``start_run``, ``continue_run``, replays).

``anyio.run`` makes a new event loop for every call and closes it after: a selector, signal
handling, shutting down async generators and the default executor, and, for a sync step, a new
worker thread, since anyio keeps its worker threads per loop. For a script that starts thousands
of small runs one after another that is most of the cost of a run (a 5-step run spent ~0.4 ms of
~0.9 ms on it). Here each thread keeps one loop and reuses it for every blocking call it makes;
the loop's worker threads, and async clients bound to the loop (an LLM provider's HTTP client),
live as long as the thread. Calls never nest: a blocking entry point refuses to run inside a
running loop (:func:`orchestrator.service.runner.refuse_inside_event_loop`).

The loop of the main thread is closed at interpreter exit; that of any other thread when the
thread ends and its state is dropped.

Ctrl-C behaves as under ``asyncio.run``: in the main thread, the first one cancels the call (so
an execution hands its lease back and stops), and the call then raises KeyboardInterrupt; a
second one raises KeyboardInterrupt at once. ``asyncio.Runner.run`` does the same, but its handler
is a ``functools.partial`` holding the task, and putting the default handler back makes ``signal``
format that partial's repr, the task's included: ~50 µs a call, a tenth of a short run. The
handler here is a plain function.
"""

from __future__ import annotations

import asyncio
import atexit
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
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

    loop = _thread_loop().runner.get_loop()
    task = loop.create_task(call())
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return loop.run_until_complete(task)  # someone else handles Ctrl-C here (or it cannot reach us)
    interrupts = 0

    def cancel_on_first_interrupt(_signum: int, _frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1 or task.done():
            raise KeyboardInterrupt()
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake a loop waiting in select() with a long timeout

    signal.signal(signal.SIGINT, cancel_on_first_interrupt)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if interrupts:
            raise KeyboardInterrupt() from None
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
