"""Keeping a run's lease alive while it executes: a timer on the event loop, not a task per run.

An execution renews its lease every third of the lease's duration, so a process that dies is
taken over soon after, and one that lives keeps its run. Most runs are over long before the
first renewal is due (a 5-step run takes about a millisecond against a 5 s renewal), so what the
keeper costs is mostly what it costs to start and stop. A task that sleeps costs a task, a timer,
and at the end a cancellation delivered to it and awaited (~0.15 ms a run, a sixth of a short
run's time); a timer callback on the loop costs one timer handle, cancelled with one call.

On asyncio (every blocking entry point, and the usual async caller) the keeper is such a timer.
On any other event loop anyio supports, it is a task in the execution's task group, as before;
both renew the lease the same way and report its loss the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from orchestrator.store import Lease, Store


class LeaseKeeper(Protocol):
    """Renews one lease until stopped; calls ``on_lost`` once if a renewal finds it taken over or fails."""

    def stop(self) -> None:
        """Renew no more (the execution ended, or stopped). Safe to call more than once."""


def keep_lease(store: Store, lease: Lease, on_lost: Callable[[Exception | None], None],
               task_group: TaskGroup) -> LeaseKeeper:
    """Start renewing ``lease`` every third of its duration.

    ``task_group`` hosts the renewing task on event loops other than asyncio; on asyncio it is
    not used. ``on_lost`` runs on the event loop's thread, outside the execution's tasks, with
    None when the lease was taken over, or with the error when a renewal could not reach the store
    (a timer callback that raised would only be logged by the loop, and renewals would stop unseen:
    the execution is stopped instead, with that error, as when a write fails).
    """
    interval = lease.seconds / 3
    renew = _Renewal(store, lease, on_lost)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): no asyncio loop runs in this thread
        return _TaskKeeper(task_group, interval, renew)
    return _TimerKeeper(loop, interval, renew)


class _Renewal:
    """One renewal: True while the lease is still ours; on the first False, ``on_lost`` is called."""

    def __init__(self, store: Store, lease: Lease, on_lost: Callable[[Exception | None], None]) -> None:
        self.store = store
        self.lease = lease
        self.on_lost = on_lost

    def __call__(self) -> bool:
        try:
            if self.store.renew_lease(self.lease):
                return True
        except Exception as exc:  # the store could not be reached: the execution stops with this error
            self.on_lost(exc)
            return False
        self.on_lost(None)
        return False


class _TimerKeeper:
    """The asyncio keeper: a ``call_later`` handle that re-arms itself after each renewal."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float, renew: _Renewal) -> None:
        self.loop = loop
        self.interval = interval
        self.renew = renew
        self.stopped = False
        self.handle = loop.call_later(interval, self.fire)

    def fire(self) -> None:
        if not self.stopped and self.renew():
            self.handle = self.loop.call_later(self.interval, self.fire)

    def stop(self) -> None:
        self.stopped = True
        self.handle.cancel()


class _TaskKeeper:
    """The keeper on other event loops: a task that sleeps and renews, in its own cancel scope."""

    def __init__(self, task_group: TaskGroup, interval: float, renew: _Renewal) -> None:
        self.interval = interval
        self.renew = renew
        self.scope = anyio.CancelScope()
        task_group.start_soon(self.keep)

    async def keep(self) -> None:
        with self.scope:
            while True:
                await anyio.sleep(self.interval)
                if not self.renew():
                    return

    def stop(self) -> None:
        self.scope.cancel()
