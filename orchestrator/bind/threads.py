"""Where sync step functions run: a small pool of daemon threads, handing results to the event loop.

Why not ``anyio.to_thread``: its worker threads are not daemons, so a sync step that outlives its
timeout keeps the process alive until it returns (a ``time.sleep(30)`` with ``timeout: 1`` held
the CLI for 30 s), and each hand-over costs a round trip through anyio's machinery. Here a step
runs on a daemon thread that posts its result with one ``call_soon_threadsafe``; an abandoned
step (timed out, or its run stopped) keeps its thread busy until it returns, but never the
process, and its late result is discarded. Threads are created on demand up to ``MAX_THREADS``
(sync steps beyond that wait their turn: a fan-out of 100 sync steps does not open 100 threads).
Only ``isolation: process`` stops the code itself.

A quick step with nothing else in flight is waited for differently. Handing a result back
through the loop costs two thread wake-ups and two hand-overs of the interpreter lock, about
70 µs a step on a 2-core VM against 14 µs for the rest of a step. When the caller says nothing
else of its run is in flight, no other pool job is running, and the function's last call took
under ``QUICK_CALL_SECONDS``, the loop's thread blocks on a lock for at most that long instead of
returning to the loop: the worker hands the result over by releasing it (about 25 µs a step
less). A call that outlasts the wait falls back to the loop as usual; the function is then handed
over without waiting until a call of it is quick again. The loop is never held longer than
``QUICK_CALL_SECONDS`` per step, and the step still runs on a worker thread, so its timeout and
its abandonment behave as for any sync step.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_THREADS = 32
"""Sync steps running at once in one process (async steps are not limited by this)."""

DEFAULT_CONCURRENCY = 128
"""Steps of one run in flight at once unless ``--max-concurrency`` says otherwise: enough for a
100-way fan-out of async calls to wait together (8 made it ten times slower), while sync steps
stay bounded by ``MAX_THREADS``."""

QUICK_CALL_SECONDS = 0.001
"""How long the loop's thread may wait, blocked, for a quick sync step with nothing else in flight."""


class CallHistory:
    """Whether a function's last call on the pool returned within ``QUICK_CALL_SECONDS``: only then
    is its next call waited for on a lock (one per bound step, updated by the worker)."""

    __slots__ = ("quick",)

    def __init__(self) -> None:
        self.quick = True


class _Job:
    """One call handed to the pool, and how its result comes back: through ``handback`` (a held
    lock the worker releases) while the loop's thread waits on it, else through the future."""

    __slots__ = ("fn", "loop", "future", "history", "handback", "finished", "value", "error")

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any],
                 history: CallHistory | None, handback: threading.Lock | None) -> None:
        self.fn = fn
        self.loop = loop
        self.future = future
        self.history = history
        self.handback = handback
        self.finished = False
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class DaemonPool:
    """Daemon worker threads fed from one queue; see the module docstring for why."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        self.max_threads = max_threads
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0
        """Threads not running a job: waiting for one, or about to."""
        self.queued = 0
        """Jobs handed in and not yet taken by a thread. A thread that finishes one job and takes a
        waiting one at once is counted idle and then busy again; counting it idle only (as before) let
        ``idle`` drift up once more calls than threads ran together, and the quick hand-off, which needs
        nothing busy, stayed off for the life of the process."""

    async def run(self, fn: Callable[[], Any], *, history: CallHistory | None = None) -> Any:
        """Run ``fn()`` on a pool thread and return (or raise) its result.

        ``history``: given only when the caller has nothing else in flight; the function's call
        history then decides whether its result is waited for on a lock (see the module docstring)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        handback: threading.Lock | None = None
        with self.lock:
            busy = self.threads - self.idle
            if history is not None and history.quick and busy == 0 and self.queued == 0:
                handback = threading.Lock()
                handback.acquire()
            self.queued += 1
            if self.queued > self.idle and self.threads < self.max_threads:
                self.threads += 1
                self.idle += 1  # until it takes its first job
                threading.Thread(target=self.work, name="orchestrator step", daemon=True).start()
        job = _Job(fn, loop, future, history, handback)
        self.jobs.put(job)
        if handback is not None:
            if handback.acquire(timeout=QUICK_CALL_SECONDS):
                return job.result()
            with self.lock:
                if job.finished:  # finished between the timeout and here: the lock was released for us
                    return job.result()
                job.handback = None  # the worker delivers through the future
        return await future

    def work(self) -> None:
        while True:
            job = self.jobs.get()
            with self.lock:
                self.idle -= 1
                self.queued -= 1
            began = time.perf_counter()
            try:
                job.value = job.fn()
            except BaseException as exc:  # handed to the awaiting task, which records it
                job.error = exc
            if job.history is not None:
                job.history.quick = time.perf_counter() - began < QUICK_CALL_SECONDS
            with self.lock:
                self.idle += 1
                job.finished = True
                handback = job.handback
            if handback is not None:
                handback.release()  # the loop's thread is waiting for it (or has just seen ``finished``)
                continue
            try:
                job.loop.call_soon_threadsafe(_deliver, job)
            except RuntimeError:
                pass  # the loop has closed: the step was abandoned and its late result is discarded


def _deliver(job: _Job) -> None:
    future = job.future
    if future.done():  # cancelled meanwhile (timeout): discard the late result
        return
    if job.error is not None:
        future.set_exception(job.error)
    else:
        future.set_result(job.value)


POOL = DaemonPool()
"""The process's pool for sync steps."""
