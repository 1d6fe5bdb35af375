"""Keeping a run's lease alive while it executes, from threads a blocked event loop cannot stop.

An execution renews its lease every third of the lease's duration, so a process that dies is
taken over soon after, and one that lives keeps its run. The renewals are not made on the event
loop: a step that holds the loop (an ``inline`` step, a blocking call in an ``async def``) would
otherwise stop them, every other worker would take the run over and execute the same step again.
One thread per process (:class:`_Renewer`) keeps a heap of leases by when each is next due, and
hands every due renewal to a small pool of renewal threads, so that one renewal waiting for the
database (a row lock, a reconnect) never delays the renewal of another lease: only as many
renewals as the pool has threads (:data:`RENEWAL_THREADS`) can be stuck at once. A lease has at
most one renewal under way; its next one is due an interval after that one returns, and a
renewal retries a transient database error for one interval at most (by then the next is due).
Registering a lease costs a heap push under a lock; most runs end long before their first
renewal is due, and their entry is simply skipped when it comes up.

Stopping a keeper never waits for a renewal under way: it marks the lease as no longer kept and
lets go of the execution (its callback, its loop), so nothing of a finished run stays reachable
from the heap. A renewal already sent may still reach the database after the run ended or handed
its lease back; the store refuses it there (a renewal extends only a lease that is still live and
held by the same token), so a lease handed back stays expired.

The renewals cannot cover a process that is stopped as a whole (SIGSTOP, a paused VM, swap): its
threads stop too, the lease lapses and another process takes the run over. So before each step
starts the executor asks :meth:`LeaseKeeper.still_held`: the lease counts as held only while its
last confirmation (a renewal that succeeded, or the grant itself) is younger than half the
lease, measured on this process's monotonic clock, which keeps counting while the process is
stopped; an older one is confirmed again by a fenced renewal before the step starts. A stalled
process therefore never starts a step after it lost its lease.

On an event loop other than asyncio (trio), the keeper is a task in the execution's task group
that hands each renewal to a worker thread: a blocked loop stops it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from orchestrator.core.errors import StoreUnavailableError
from orchestrator.store import Lease
from orchestrator.store.base import RunStore
from orchestrator.store.transient import retry_within

log = logging.getLogger("orchestrator.lease")

RENEWALS_PER_LEASE = 3
"""A lease is renewed this many times per duration: two renewals may fail (a slow commit) before it lapses."""

FRESH_FRACTION = 0.5
"""A confirmation of the lease younger than this share of its duration lets a step start without asking
the store; an older one (the process was stopped, or renewals are late) is confirmed again first."""

RENEWAL_THREADS = 8
"""Renewals a process makes at once: a renewal waiting for the database holds one of these threads, and the
others go on renewing the other leases."""

EARLY_FRACTION = 0.1
"""The renewer renews every lease due within this share of an interval in one wake-up, so a stream of
short runs wakes it a few times per interval, not once per run."""


class LeaseKeeper(Protocol):
    """Renews one lease until stopped; calls ``on_lost`` once if a renewal finds it taken over or fails."""

    def still_held(self) -> bool:
        """Whether the lease is certainly still this execution's: at once while its last confirmation
        is fresh, else after a fenced renewal (on the calling thread). False (and ``on_lost`` called)
        when it was taken over or the store could not confirm it."""

    def stop(self) -> None:
        """Renew no more (the execution ended, or stopped). Safe to call more than once."""


def keep_lease(store: RunStore, lease: Lease, on_lost: Callable[[Exception | None], None],
               task_group: TaskGroup) -> LeaseKeeper:
    """Start renewing ``lease`` every third of its duration.

    ``on_lost`` runs on the event loop's thread, outside the execution's tasks, with None when the
    lease was taken over, or with the error when a renewal could not reach the store (renewals
    would otherwise stop unseen: the execution is stopped instead, with that error, as when a
    write fails). ``task_group`` hosts the renewing task on event loops other than asyncio.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): no asyncio loop runs in this thread
        return _TaskKeeper(task_group, _HeldLease(store, lease, on_lost))
    held = _HeldLease(store, lease, on_lost, loop)
    _renewer().add(held)
    return held


class _HeldLease:
    """One kept lease: its renewal, its last confirmation, and whether it is still kept."""

    def __init__(self, store: RunStore, lease: Lease, on_lost: Callable[[Exception | None], None],
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.store = store
        self.lease = lease
        self.on_lost: Callable[[Exception | None], None] | None = on_lost
        self.loop = loop
        """The execution's event loop, where ``on_lost`` is called (None for a keeper that is a task)."""
        self.interval = lease.seconds / RENEWALS_PER_LEASE
        self.confirmed_at = lease.issued_at
        """Monotonic time before the last request that confirmed the lease: it lasts a duration from then."""
        self.stopped = False

    def confirm(self) -> bool | Exception:
        """One fenced renewal: True while the lease is ours, False once taken over, or the store's error.
        A transient error is retried for one interval at most: by then the next renewal is due."""
        if self.stopped:
            return False
        asked_at = time.monotonic()
        try:
            with retry_within(self.interval):
                held = self.store.renew_lease(self.lease)
        except Exception as exc:  # the store could not be reached: the execution stops with this error
            return exc
        if held:
            self.confirmed_at = max(self.confirmed_at, asked_at)
        return held

    def lose(self, verdict: bool | Exception) -> None:
        """On the loop's thread: report the lease lost, once, unless the execution stopped meanwhile."""
        on_lost = self.on_lost
        if not self.stopped and on_lost is not None:
            self.stop()
            on_lost(verdict if isinstance(verdict, Exception) else None)

    def report_lost(self, verdict: bool | Exception) -> None:
        """From a renewal thread: have the execution's loop call :meth:`lose`."""
        loop = self.loop
        if loop is not None and not self.stopped:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: its executions are over
                loop.call_soon_threadsafe(self.lose, verdict)

    def still_held(self) -> bool:
        if self.stopped:
            return False
        if time.monotonic() - self.confirmed_at < self.lease.seconds * FRESH_FRACTION:
            return True
        verdict = self.confirm()
        if verdict is True:
            return True
        self.lose(verdict)
        return False

    def stop(self) -> None:
        """No more renewals, without waiting for one under way (the store refuses it once the lease is
        handed back or ended); the execution is let go of, so an entry left in the renewer's heap until
        it comes up keeps nothing of the run alive."""
        self.stopped = True
        self.on_lost = None
        self.loop = None


class _Renewer:
    """The process's renewals: a scheduling thread with a heap of leases by when their next renewal is
    due, and up to RENEWAL_THREADS threads that make them, so that no renewal waits for another."""

    def __init__(self) -> None:
        self.due: list[tuple[float, int, _HeldLease]] = []
        self.order = itertools.count()
        self.wake = threading.Condition()
        self.jobs: queue.SimpleQueue[_HeldLease] = queue.SimpleQueue()
        self.pending = 0
        """Renewals handed to the pool and not yet returned (queued or under way)."""
        self.renewers: list[threading.Thread] = []
        self.thread = threading.Thread(target=self.loop, name="orchestrator-lease-renewer", daemon=True)
        self.thread.start()

    def add(self, held: _HeldLease) -> None:
        entry = (time.monotonic() + held.interval, next(self.order), held)
        with self.wake:
            heapq.heappush(self.due, entry)
            if self.due[0] is entry:
                self.wake.notify()

    def loop(self) -> None:
        while True:
            with self.wake:
                while not self.due:
                    self.wake.wait()
                now = time.monotonic()
                if self.due[0][0] > now:
                    self.wake.wait(self.due[0][0] - now)
                    continue
                horizon = now + self.due[0][2].interval * EARLY_FRACTION
                batch = []
                while self.due and self.due[0][0] <= horizon:
                    _, _, held = heapq.heappop(self.due)
                    if not held.stopped:  # most runs ended before their first renewal: skipped here
                        batch.append(held)
            for held in batch:  # outside the lock: registering never waits for a commit
                self.submit(held)

    def submit(self, held: _HeldLease) -> None:
        """Hand one renewal to the pool, starting a renewal thread when every one is busy (up to the limit)."""
        with self.wake:
            self.pending += 1
            if self.pending > len(self.renewers) and len(self.renewers) < RENEWAL_THREADS:
                thread = threading.Thread(target=self.work, name=f"orchestrator-lease-renewal-{len(self.renewers)}",
                                          daemon=True)
                self.renewers.append(thread)
                thread.start()
        self.jobs.put(held)

    def work(self) -> None:
        while True:
            held = self.jobs.get()
            try:
                self.renew(held)
            except Exception:  # a renewal thread outlives any one lease
                log.exception("run %s: renewing its lease failed", held.lease.run_id)
            finally:
                with self.wake:
                    self.pending -= 1
                del held

    def renew(self, held: _HeldLease) -> None:
        verdict = held.confirm()
        if verdict is True or isinstance(verdict, StoreUnavailableError):  # away for now: the steps go on,
            if verdict is not True:  # the next renewal tries again (a step only starts on a fresh lease)
                log.warning("run %s: its lease could not be renewed: %s", held.lease.run_id, verdict)
            if not held.stopped:
                self.add(held)
        else:
            held.report_lost(verdict)


_RENEWER: _Renewer | None = None
_RENEWER_LOCK = threading.Lock()


def _renewer() -> _Renewer:
    """The process's renewer, started on first use (again in a forked child: threads do not survive a fork)."""
    global _RENEWER
    with _RENEWER_LOCK:
        if _RENEWER is None or not _RENEWER.thread.is_alive():
            _RENEWER = _Renewer()
        return _RENEWER


class _TaskKeeper:
    """The keeper on other event loops: a task that sleeps and renews, in its own cancel scope."""

    def __init__(self, task_group: TaskGroup, held: _HeldLease) -> None:
        self.held = held
        self.scope = anyio.CancelScope()
        task_group.start_soon(self.keep)

    async def keep(self) -> None:
        with self.scope:
            while True:
                await anyio.sleep(self.held.interval)
                verdict = await anyio.to_thread.run_sync(self.held.confirm, abandon_on_cancel=True)
                if verdict is not True and not isinstance(verdict, StoreUnavailableError):
                    self.held.lose(verdict)
                    return

    def still_held(self) -> bool:
        return self.held.still_held()

    def stop(self) -> None:
        self.held.stop()
        self.scope.cancel()
