"""Keeping a run's lease alive while it executes, from a thread a blocked event loop cannot stop.

An execution renews its lease every third of the lease's duration, so a process that dies is
taken over soon after, and one that lives keeps its run. The renewals run on one thread per
process (:class:`_Renewer`), not on the event loop: a step that holds the loop (an ``inline``
step, a blocking call in an ``async def``) would otherwise stop them, every other worker would
take the run over and execute the same step again. Registering a lease with that thread costs a
heap push under a lock; most runs end long before their first renewal is due, and their entry is
simply skipped when it comes up.

The renewals cannot cover a process that is stopped as a whole (SIGSTOP, a paused VM, swap): its
thread stops too, the lease lapses and another process takes the run over. So before each step
starts the executor asks :meth:`LeaseKeeper.still_held`: the lease counts as held only while its
last confirmation (a renewal that succeeded, or the grant itself) is younger than half the
lease, measured on this process's monotonic clock, which keeps counting while the process is
stopped; an older one is confirmed again by a fenced renewal before the step starts. A stalled
process therefore never starts a step after it lost its lease.

On an event loop other than asyncio (trio), the keeper is a task in the execution's task group,
as before: a blocked loop stops it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from orchestrator.core.errors import StoreUnavailableError
from orchestrator.store import Lease
from orchestrator.store.base import RunStore

log = logging.getLogger("orchestrator.lease")

RENEWALS_PER_LEASE = 3
"""A lease is renewed this many times per duration: two renewals may fail (a slow commit) before it lapses."""

FRESH_FRACTION = 0.5
"""A confirmation of the lease younger than this share of its duration lets a step start without asking
the store; an older one (the process was stopped, or renewals are late) is confirmed again first."""

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
    held = _HeldLease(store, lease, on_lost)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): no asyncio loop runs in this thread
        return _TaskKeeper(task_group, held)
    _renewer().add(held, loop)
    return held


class _HeldLease:
    """One kept lease: its renewal, its last confirmation, and whether it is still kept.

    ``guard`` orders a renewal against :meth:`stop`: once ``stop`` returns, no renewal is under
    way or will start, so a lease handed back right after (expiring now) is never extended again.
    """

    def __init__(self, store: RunStore, lease: Lease, on_lost: Callable[[Exception | None], None]) -> None:
        self.store = store
        self.lease = lease
        self.on_lost = on_lost
        self.interval = lease.seconds / RENEWALS_PER_LEASE
        self.confirmed_at = lease.issued_at
        """Monotonic time before the last request that confirmed the lease: it lasts a duration from then."""
        self.stopped = False
        self.guard = threading.Lock()

    def confirm(self) -> bool | Exception:
        """One fenced renewal: True while the lease is ours, False once taken over, or the store's error."""
        with self.guard:
            if self.stopped:
                return False
            asked_at = time.monotonic()
            try:
                held = self.store.renew_lease(self.lease)
            except Exception as exc:  # the store could not be reached: the execution stops with this error
                return exc
            if held:
                self.confirmed_at = asked_at
            return held

    def lose(self, verdict: bool | Exception) -> None:
        """On the loop's thread: report the lease lost, once, unless the execution stopped meanwhile."""
        if not self.stopped:
            self.stopped = True
            self.on_lost(verdict if isinstance(verdict, Exception) else None)

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
        with self.guard:
            self.stopped = True


class _Renewer:
    """The process's renewal thread: a heap of leases by when their next renewal is due."""

    def __init__(self) -> None:
        self.due: list[tuple[float, int, _HeldLease, asyncio.AbstractEventLoop]] = []
        self.order = itertools.count()
        self.wake = threading.Condition()
        self.thread = threading.Thread(target=self.loop, name="orchestrator-lease-renewer", daemon=True)
        self.thread.start()

    def add(self, held: _HeldLease, loop: asyncio.AbstractEventLoop) -> None:
        entry = (time.monotonic() + held.interval, next(self.order), held, loop)
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
                    _, _, held, loop = heapq.heappop(self.due)
                    if not held.stopped:  # most runs ended before their first renewal: skipped here
                        batch.append((held, loop))
            for held, loop in batch:  # outside the lock: registering never waits for a commit
                verdict = held.confirm()
                if verdict is True or isinstance(verdict, StoreUnavailableError):  # away for now: the steps go on,
                    if verdict is not True:  # the next renewal tries again (a step only starts on a fresh lease)
                        log.warning("run %s: its lease could not be renewed: %s", held.lease.run_id, verdict)
                    self.add(held, loop)
                elif not held.stopped:
                    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: its executions are over
                        loop.call_soon_threadsafe(held.lose, verdict)


_RENEWER: _Renewer | None = None
_RENEWER_LOCK = threading.Lock()


def _renewer() -> _Renewer:
    """The process's renewal thread, started on first use (again in a forked child: threads do not survive a fork)."""
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
                verdict = self.held.confirm()
                if verdict is not True and not isinstance(verdict, StoreUnavailableError):
                    self.held.lose(verdict)
                    return

    def still_held(self) -> bool:
        return self.held.still_held()

    def stop(self) -> None:
        self.held.stop()
        self.scope.cancel()
