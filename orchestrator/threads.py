"""Where sync step functions run: a small pool of daemon threads, handing results to the event loop.

Why not ``anyio.to_thread``: its worker threads are not daemons, so a sync step that outlives its
timeout keeps the process alive until it returns (a ``time.sleep(30)`` with ``timeout: 1`` held
the CLI for 30 s), and each hand-over costs a round trip through anyio's machinery. Here a step
runs on a daemon thread that posts its result with one ``call_soon_threadsafe``; an abandoned
step (timed out, or its run stopped) keeps its thread busy until it returns, but never the
process, and its late result is discarded. Threads are created on demand up to ``MAX_THREADS``
(sync steps beyond that wait their turn: a fan-out of 100 sync steps does not open 100 threads).
Only ``isolation: process`` stops the code itself.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

MAX_THREADS = 32
"""Sync steps running at once in one process (async steps are not limited by this)."""

DEFAULT_CONCURRENCY = 128
"""Steps of one run in flight at once unless ``--max-concurrency`` says otherwise: enough for a
100-way fan-out of async calls to wait together (8 made it ten times slower), while sync steps
stay bounded by ``MAX_THREADS``."""

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class DaemonPool:
    """Daemon worker threads fed from one queue; see the module docstring for why."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        self.max_threads = max_threads
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0

    async def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on a pool thread and return (or raise) its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self.lock:
            if self.idle == 0 and self.threads < self.max_threads:
                self.threads += 1
                threading.Thread(target=self.work, name="orchestrator step", daemon=True).start()
            else:
                self.idle -= 1 if self.idle else 0
        self.jobs.put((fn, loop, future))
        return await future

    def work(self) -> None:
        while True:
            fn, loop, future = self.jobs.get()
            try:
                value: Any = fn()
                deliver: Callable[[], None] = _setter(future, value, None)
            except BaseException as exc:  # handed to the awaiting task, which records it
                deliver = _setter(future, None, exc)
            try:
                loop.call_soon_threadsafe(deliver)
            except RuntimeError:
                pass  # the loop has closed: the step was abandoned and its late result is discarded
            with self.lock:
                self.idle += 1


def _setter(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> Callable[[], None]:
    def deliver() -> None:
        if future.done():  # cancelled meanwhile (timeout): discard the late result
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    return deliver


POOL = DaemonPool()
"""The process's pool for sync steps."""
