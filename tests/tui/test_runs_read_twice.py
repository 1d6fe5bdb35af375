"""A page of the runs list is read with two queries (paused runs first, then the newest of any status): a run
that was paused for the first and has moved on by the second is listed once, where it was read first. Seen
as a crash of the runs screen (a row key listed twice) when a decision's continuation ended between them."""

from __future__ import annotations

from typing import Any

from orchestrator.store import NewRun, Store
from orchestrator.store.delegating import DelegatingStore, concrete
from orchestrator.store.triage import RunPage
from tui.queries import load_runs


class MovesOnBetweenReads(DelegatingStore):
    """The store, where the paused run ``moving`` succeeds right after the first page of runs is read."""

    def __init__(self, store: Store, moving: str) -> None:
        self.url = store.url
        self.store = store
        self.moving = moving
        self.pages = 0

    def target(self) -> Store:
        return self.store

    def triage_runs(self, query: Any) -> RunPage:
        page = self.store.triage_runs(query)
        self.pages += 1
        if self.pages == 1:
            assert self.store.set_run_status(self.moving, "succeeded")
        return page

    def close(self) -> None:
        self.store.close()


def test_a_run_that_moves_on_between_the_two_reads_is_listed_once(store: Store) -> None:
    workflow = store.register_workflow("w", "1", {"name": "w", "steps": []}, None, "w")
    done = store.create_run(NewRun(workflow, "w", {}, status="succeeded"))
    moving = store.create_run(NewRun(workflow, "w", {}, status="paused"))
    page = load_runs(concrete(MovesOnBetweenReads)(store, moving))
    assert [row.run_id for row in page.rows] == [moving, done]
