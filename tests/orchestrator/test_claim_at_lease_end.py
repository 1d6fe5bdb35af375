"""Resuming a run at the very end of another process's lease: the lease lapses between the first try to take
it and the look at who holds it. The resume takes the run, instead of refusing with "its lease runs 0.0 s
more" (seen with a killed process on this machine, whose lease ran out while it was being ended)."""

from __future__ import annotations

from typing import Any

from orchestrator.service.runner import claim
from orchestrator.store import Lease, Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
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
