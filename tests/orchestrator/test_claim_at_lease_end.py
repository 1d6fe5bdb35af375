"""Resuming a run at the very end of another process's lease: the lease lapses between the first try to take
it and the look at who holds it. The resume takes the run, instead of refusing with "its lease runs 0.0 s
more" (seen with a killed process on this machine, whose lease ran out while it was being ended)."""

from __future__ import annotations

from typing import Any

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import claim, enqueue_run
from orchestrator.service.worker import work
from orchestrator.store import Lease, Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.conftest import FIXTURES
from tests.store.rows import add_run, add_workflow, lease


class LapsingStore(DelegatingStore):
    """A store whose first ``acquire_lease`` finds the run's lease still held, and the lease lapses right after."""

    def __init__(self, store: Store) -> None:
        self.url = store.url
        self.store = store
        self.tries = 0

    def target(self) -> Store:
        return self.store

    def acquire_lease(self, lease: Lease, **kwargs: Any) -> bool:
        self.tries += 1
        if self.tries == 1:
            holder = self.store.get_run(lease.run_id).owner
            assert holder is not None and self.store.expire_lease(lease.run_id, holder)
            return False
        return self.store.acquire_lease(lease, **kwargs)

    def close(self) -> None:
        self.store.close()


def test_a_lease_that_lapses_while_a_resume_looks_at_it_is_taken(durable_url: str):
    with open_store(durable_url) as plain:
        run_id = add_run(plain, add_workflow(plain), lease=lease("elsewhere:4242"))
        store = concrete(LapsingStore)(plain)
        taken = claim(store, run_id)
        run = plain.get_run(run_id)
        assert (run.status, run.owner) == ("running", taken.holder)
        assert store.tries == 2


class LapsingDuringIdleCheck(DelegatingStore):
    """A store whose held run's lease lapses while a worker's idle check looks for queued runs: after the
    worker's claim found it held, before anything could release it."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.url = store.url
        self.store = store
        self.run_id = run_id
        self.lapsed = False

    def target(self) -> Store:
        return self.store

    def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("status") == "queued" and not self.lapsed:
            holder = self.store.get_run(self.run_id).owner
            assert holder is not None and self.store.expire_lease(self.run_id, holder)
            self.lapsed = True
        return self.store.list_runs(*args, **kwargs)

    def close(self) -> None:
        self.store.close()


def test_a_worker_once_takes_a_run_whose_lease_lapses_during_its_idle_check(durable_url: str):
    # seen under load: `worker --once` found the killed run's lease still held, the lease ran out while it
    # looked for queued runs, and it exited with the run left interrupted
    with open_store(durable_url) as plain:
        run_id = enqueue_run(plain, load_workflow(FIXTURES / "chain.yaml"), {"x": 1})
        assert plain.acquire_lease(lease("elsewhere:4242", run_id), statuses=("queued",))
        store = concrete(LapsingDuringIdleCheck)(plain, run_id)
        taken: list[str] = []
        work(store, once=True, on_takeover=taken.append)
        assert store.lapsed and taken == [run_id]
        assert plain.get_run(run_id).status == "succeeded"
