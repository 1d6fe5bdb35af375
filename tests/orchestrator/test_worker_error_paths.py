"""A worker whose run fails on the database hands that run back off its event loop, where it makes the run's
other store calls: the other runs it executes go on meanwhile.

One run's first store call fails past its retries, and handing its lease back then waits in the database
until a step of another run has moved on. That step is async: it moves only while the worker's event loop
is free. The order is read from side-effect files the step and the store double write.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import StoreUnavailableError
from orchestrator.service.runner import enqueue_run
from orchestrator.service.worker import Worker, WorkOptions
from orchestrator.spec.records import RunView
from orchestrator.store import Lease, Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete

WAIT = 10.0
"""How long either side waits for the other (a guard against hanging, not a measure)."""

HEALTHY = '''
import os
from pathlib import Path
import anyio

async def wait_for_the_hand_back() -> str:
    """Moves on once the other run's hand-back is under way, and says so: only while the loop is free."""
    handing_back, moved_on = Path(os.environ["HANDING_BACK"]), Path(os.environ["MOVED_ON"])
    with anyio.move_on_after(float(os.environ["WAIT"])):
        while not handing_back.exists():
            await anyio.sleep(0.01)
    moved_on.write_text("moved on")
    return "done"
'''


class FailingRun(DelegatingStore):
    """The store, except that reading ``broken`` fails as a database gone away past its retries would, and
    handing its lease back waits (up to WAIT) for the other run's step to move on, as a slow database would."""

    def __init__(self, store: Store, handing_back: Path, moved_on: Path) -> None:
        self.url = store.url
        self.store = store
        self.broken = ""
        self.handing_back = handing_back
        self.moved_on = moved_on
        self.waited_for: list[bool] = []

    def target(self) -> Store:
        return self.store

    def get_run(self, run_id: str) -> RunView:
        if run_id == self.broken:
            raise StoreUnavailableError("the database did not answer (5 tries over 30.0 s): connection lost")
        return self.store.get_run(run_id)

    def hand_back_lease(self, lease: Lease) -> bool:
        if lease.run_id == self.broken:
            self.handing_back.write_text("handing back")
            deadline = time.monotonic() + WAIT
            while not self.moved_on.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.waited_for.append(self.moved_on.exists())
        return self.store.hand_back_lease(lease)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def healthy_workflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "healthy_steps.py").write_text(HEALTHY)
    path = tmp_path / "healthy.yaml"
    path.write_text("name: healthy\nsteps:\n  - id: wait\n    run: healthy_steps:wait_for_the_hand_back\n")
    monkeypatch.setenv("WAIT", str(WAIT))
    return path


def test_a_run_failing_on_the_database_is_handed_back_off_the_loop_while_another_goes_on(
        durable_url: str, tmp_path: Path, healthy_workflow: Path, monkeypatch: pytest.MonkeyPatch,
        step_log: Path) -> None:
    handing_back, moved_on = tmp_path / "handing-back", tmp_path / "moved-on"
    monkeypatch.setenv("HANDING_BACK", str(handing_back))
    monkeypatch.setenv("MOVED_ON", str(moved_on))
    store = concrete(FailingRun)(open_store(durable_url), handing_back, moved_on)
    healthy = enqueue_run(store, load_workflow(healthy_workflow), {})
    store.broken = enqueue_run(store, load_workflow(healthy_workflow), {})
    worker = Worker(store, WorkOptions(once=True, concurrency=2, recover=False, store_calls_off_loop=True))
    anyio.run(worker.run, False)
    assert worker.summary.handed_back == [store.broken]
    assert worker.summary.executed == 1
    assert store.waited_for and all(store.waited_for), "the hand-back held the worker's loop: the other run stood still"
    assert store.get_run(healthy).status == "succeeded"
    assert store.store.get_run(store.broken).status == "interrupted"  # resumable at once by anyone
    store.close()
