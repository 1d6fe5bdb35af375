"""An executing run keeps its lease for as long as it runs, and stops at once when it loses it.

Leases last ``LEASE`` seconds here, far shorter than the steps, so every run below depends on
its renewals; the other claimant is a second store handle, as another process would be.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass

import anyio
import pytest

from orchestrator import Workflow, open_store, start_run
from orchestrator.core.errors import LeaseLostError
from orchestrator.service.runner import RESUMABLE
from orchestrator.spec.events import Event, StepFinished
from orchestrator.store import Lease, Store
from orchestrator.store.delegating import DelegatingStore

LEASE = 0.3

pytestmark = pytest.mark.xdist_group("sub_second_leases")
"""Leases of 0.3 s renewed every 0.1 s: a process starved of the CPU for 0.3 s loses its lease. These tests run
one after another on one worker, so that no two of them starve each other; the other worker runs the rest."""


@dataclass
class Seen:
    """What a step saw of its own run from another store handle."""

    stolen: bool | None = None
    expires_in: float | None = None


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_LEASE_SECONDS", str(LEASE))


def outliving(url: str, seen: Seen) -> Workflow:
    """Two steps of four leases each; the second tries to take the run over from another handle."""
    wf = Workflow("outlives-its-lease", inputs={"x": "integer"}, output="second")

    @wf.step(inputs={"x": "$inputs.x"})
    async def first(x: int) -> int:
        await anyio.sleep(4 * LEASE)
        return x + 1

    @wf.step(inputs={"value": "first"})
    async def second(value: int, ctx) -> int:
        await anyio.sleep(4 * LEASE)
        other = open_store(url)
        seen.stolen = other.acquire_lease(Lease(ctx.run_id, "elsewhere:1", "other", LEASE), statuses=RESUMABLE)
        expires_at = other.get_run(ctx.run_id).lease_expires_at
        seen.expires_in = None if expires_at is None else expires_at - time.time()
        other.close()
        return value * 10

    return wf


def test_a_run_longer_than_its_lease_keeps_it_to_the_end(durable_url: str, short_lease: None):
    seen = Seen()
    store = open_store(durable_url)
    result = start_run(store, outliving(durable_url, seen).bind(), {"x": 1})
    assert (result.status, result.output) == ("succeeded", 20)
    assert seen.stolen is False  # 2.4 s into a run whose lease lasts 0.3 s, nobody else could claim it
    assert seen.expires_in is not None and 0 < seen.expires_in <= LEASE
    assert [r.step_id for r in store.step_records(result.run_id)] == ["first", "second"]


class StalledRenewals(DelegatingStore):
    """The store, except that lease renewals wait while ``stalled`` is set, as in a process stopped as a whole."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.url = store.url
        self.stalled = threading.Event()
        self.resumed = threading.Event()

    def target(self) -> Store:
        return self.store

    def renew_lease(self, lease: Lease) -> bool:
        if lease.seconds and self.stalled.is_set():
            self.resumed.wait()
        return self.store.renew_lease(lease)


def test_a_run_that_loses_its_lease_stops_at_once_and_writes_nothing_more(durable_url: str, short_lease: None):
    wf = Workflow("loses-its-lease", inputs={"x": "integer"}, output="after")
    store = StalledRenewals(open_store(durable_url))

    @wf.step(inputs={"x": "$inputs.x"})
    async def stalls(x: int, ctx) -> int:
        store.stalled.set()  # renewals stop: the lease lapses and another process takes it
        await anyio.sleep(2 * LEASE)
        other = open_store(durable_url)
        assert other.acquire_lease(Lease(ctx.run_id, "elsewhere:1", "other", 60.0), statuses=RESUMABLE)
        other.close()
        store.resumed.set()  # the next renewal, now due, finds the lease gone and cancels this
        await anyio.sleep(30)
        return x

    @wf.step(inputs={"value": "stalls"})
    def after(value: int) -> int:
        return value

    began = time.monotonic()
    with pytest.raises(LeaseLostError):
        start_run(store, wf.bind(), {"x": 1})
    assert time.monotonic() - began < 10  # stopped by the renewal, not by the 30 s sleep ending
    (run,) = store.list_runs()
    assert store.step_records(run.run_id) == []  # the new holder's run: nothing written by the old one
    assert run.owner == "elsewhere:1"


def test_a_step_that_blocks_the_event_loop_longer_than_the_lease_keeps_it(durable_url: str, short_lease: None):
    """Renewals come from a thread of their own: a blocked loop cannot starve them."""
    wf = Workflow("blocks-the-loop", inputs={"x": "integer"}, output="blocks")
    stolen: list[bool] = []

    @wf.step(inputs={"x": "$inputs.x"}, inline=True)
    def blocks(x: int, ctx) -> int:
        time.sleep(6 * LEASE)
        other = open_store(durable_url)
        stolen.append(other.acquire_lease(Lease(ctx.run_id, "elsewhere:1", "other", 60.0), statuses=RESUMABLE))
        other.close()
        return x

    result = start_run(open_store(durable_url), wf.bind(), {"x": 1})
    assert (result.status, stolen) == ("succeeded", [False])


def test_a_process_that_stalled_past_its_lease_starts_no_step_before_asking_the_store(
        durable_url: str, short_lease: None):
    """Renewals that stop with the whole process (here: they wait) leave the loop's own check: a step
    about to start after a gap longer than half the lease confirms the lease first, and finds it gone."""
    wf = Workflow("stalls-between-steps", inputs={"x": "integer"}, output="after")
    store = StalledRenewals(open_store(durable_url))
    started: list[str] = []

    @wf.step(inputs={"x": "$inputs.x"}, inline=True)
    def before(x: int) -> int:
        started.append("before")
        return x

    @wf.step(inputs={"value": "before"}, inline=True)
    def after(value: int) -> int:
        started.append("after")
        return value

    def stall_once_recorded(event: Event) -> None:
        """Between ``before``'s committed record and ``after``'s start, the process stalls past its lease."""
        if isinstance(event, StepFinished) and event.step_id == "before":
            store.stalled.set()
            time.sleep(2 * LEASE)
            other = open_store(durable_url)
            assert other.acquire_lease(Lease(event.run_id, "elsewhere:1", "other", 60.0), statuses=RESUMABLE)
            other.close()
            store.resumed.set()  # the process continues: its renewals and its loop at once

    with pytest.raises(LeaseLostError):
        start_run(store, wf.bind(), {"x": 1}, on_event=stall_once_recorded)
    assert started == ["before"]  # "after" never started, though no renewal had yet told the loop
    (run,) = store.list_runs()
    assert [r.step_id for r in store.step_records(run.run_id)] == ["before"]


class UnreachableOnRenewal(DelegatingStore):
    """The store, except that renewing a lease fails as a database gone away would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.url = store.url

    def target(self) -> Store:
        return self.store

    def renew_lease(self, lease: Lease) -> bool:
        if lease.seconds == 0:  # handing the lease back still reaches the database
            return self.store.renew_lease(lease)
        raise sqlite3.OperationalError("unable to open database file")


def test_a_run_whose_lease_cannot_be_renewed_stops_with_the_stores_error_and_stays_resumable(
        tmp_path, short_lease: None):
    wf = Workflow("unrenewable", inputs={"x": "integer"}, output="slow")

    @wf.step(inputs={"x": "$inputs.x"})
    async def slow(x: int) -> int:
        await anyio.sleep(30)
        return x

    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    began = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        start_run(UnreachableOnRenewal(store), wf.bind(), {"x": 1})
    assert time.monotonic() - began < 10  # stopped at the first renewal, not after the step's 30 s
    (run,) = store.list_runs()
    assert run.status == "interrupted" and store.step_records(run.run_id) == []
