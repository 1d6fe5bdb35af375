"""The leases of one process are renewed independently: a renewal stuck in the database (a row lock, a
reconnect) holds up no other lease's, stopping a keeper never waits for a renewal under way, a lease
handed back stays expired even when a renewal sent before it lands after, and a stopped keeper keeps
nothing of its execution alive.

What the test looks at is the store (whether a run's lease is live, as another process sees it) and the
order of events; the one renewal that blocks is released by the test itself.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator

import anyio
import pytest

from orchestrator.engine.executor import release_lease
from orchestrator.engine.leases.keeper import keep_lease
from orchestrator.store import Lease, NewRun, Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete

BLOCKED_LEASE = 0.9
"""The lease whose first renewal (due after 0.3 s) waits in the database until the test lets it go."""
OTHER_LEASE = 1.5
"""The lease beside it, renewed every 0.5 s: it lapses unless its renewals go on meanwhile."""
WAIT = 20.0
"""How long the test waits for something that should happen (a guard against hanging, not a measure)."""


class OneRenewalBlocks(DelegatingStore):
    """The store, except that renewing ``blocked_run``'s lease waits until ``release`` is set (as a renewal
    behind another transaction's row lock would); renewals of other runs are counted as they return."""

    def __init__(self, store: Store, blocked_run: str) -> None:
        self.url = store.url
        self.store = store
        self.blocked_run = blocked_run
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        self.renewed: Counter[str] = Counter()
        self.counted = threading.Condition()

    def target(self) -> Store:
        return self.store

    def renew_lease(self, lease: Lease) -> bool:
        if lease.run_id == self.blocked_run:
            self.entered.set()
            self.release.wait(WAIT)
            held = self.store.renew_lease(lease)
            self.returned.set()
            return held
        held = self.store.renew_lease(lease)
        with self.counted:
            self.renewed[lease.run_id] += 1
            self.counted.notify_all()
        return held

    def wait_renewals(self, run_id: str, count: int) -> bool:
        with self.counted:
            return self.counted.wait_for(lambda: self.renewed[run_id] >= count, WAIT)


class Execution:
    """Stands for an execution's state, which the keeper reaches through its ``on_lost`` callback."""

    def __init__(self) -> None:
        self.lost: list[Exception | None] = []

    def on_lost(self, error: Exception | None) -> None:
        self.lost.append(error)


def held_run(store: Store, seconds: float) -> Lease:
    workflow = store.register_workflow("leases", "1", {"name": "leases", "steps": []}, None, "leases")
    lease = Lease("", "here:1", f"token-{seconds}", seconds, issued_at=time.monotonic())
    run_id = store.create_run(NewRun(workflow, "leases", {}), lease=lease)
    return Lease(run_id, lease.holder, lease.token, seconds, issued_at=lease.issued_at)


@pytest.fixture
def store(durable_url: str) -> Iterator[Store]:
    plain = open_store(durable_url)
    yield plain
    plain.close()


def test_a_stuck_renewal_holds_up_no_other_lease_and_stopping_it_waits_for_nothing(store: Store) -> None:
    blocked = held_run(store, BLOCKED_LEASE)
    other = held_run(store, OTHER_LEASE)
    slow = concrete(OneRenewalBlocks)(store, blocked.run_id)
    blocked_execution, other_execution = Execution(), Execution()
    order: list[str] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            stuck = keep_lease(slow, blocked, blocked_execution.on_lost, tg)
            kept = keep_lease(slow, other, other_execution.on_lost, tg)
            assert await anyio.to_thread.run_sync(slow.entered.wait, WAIT), "the blocked lease was never renewed"
            # three renewals of the other lease, a whole duration of it, while the first one is stuck
            assert await anyio.to_thread.run_sync(slow.wait_renewals, other.run_id, 3), \
                "the other lease's renewals waited behind the stuck one"
            assert not slow.returned.is_set()
            assert store.get_run(other.run_id).status == "running"  # its lease is live, as others see it
            stuck.stop()  # on the loop, while the renewal is still under way
            order.append("stopped" if not slow.returned.is_set() else "stopped after the renewal returned")
            await anyio.to_thread.run_sync(release_lease, store, blocked)  # the execution hands its lease back
            slow.release.set()
            assert await anyio.to_thread.run_sync(slow.returned.wait, WAIT)
            kept.stop()

    anyio.run(main)
    assert order == ["stopped"]
    # the renewal that landed after the hand-back did not extend the lease: anyone may take the run now
    assert store.get_run(blocked.run_id).status == "interrupted"
    assert blocked_execution.lost == [] and other_execution.lost == []


def test_a_stopped_keeper_keeps_nothing_of_its_execution_alive(store: Store) -> None:
    lease = held_run(store, OTHER_LEASE)
    execution = Execution()
    gone = weakref.ref(execution)

    async def main(on_lost: Callable[[Exception | None], None]) -> None:
        async with anyio.create_task_group() as tg:
            keep_lease(store, lease, on_lost, tg).stop()

    anyio.run(main, execution.on_lost)
    del execution
    gc.collect()
    assert gone() is None  # its renewal was still due, a third of the lease away, when it stopped
