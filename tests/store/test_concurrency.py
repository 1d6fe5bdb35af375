"""Racing workers and reviewers: the store is the referee on every backend.

``separate`` gives each thread its own store handle on the database (two worker processes);
``shared`` makes both threads use one handle (a TUI's workers). On ``memory://`` both are the
one in-process store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.core.errors import ReviewError
from orchestrator.store import Store
from tests.store.conftest import Backend
from tests.store.rows import add_run, add_workflow, lease, paused_run, review, step

QUEUED = 30


def race(n: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads released together; their results (or exceptions) in thread order."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as exc:  # the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    return results


def handles(backend: Backend, store: Store, mode: str, n: int) -> list[Store]:
    return [store] * n if mode == "shared" else [store, *(backend.connect() for _ in range(n - 1))]


@pytest.mark.parametrize("mode", ["separate", "shared"])
def test_two_workers_racing_claim_every_queued_run_exactly_once(backend: Backend, store: Store, mode: str):
    wf = add_workflow(store)
    queued = [add_run(store, wf, status="queued") for _ in range(QUEUED)]
    stores = handles(backend, store, mode, 2)

    def drain(i: int) -> list[str]:
        claimed = []
        while (run_id := stores[i].claim_queued_run(lease(f"worker-{i}"))) is not None:
            claimed.append(run_id)
        return claimed

    results = race(2, drain)
    assert not any(isinstance(r, Exception) for r in results), results
    first, second = results
    assert sorted(first + second) == sorted(queued)  # every run once, none twice
    for i, claimed in enumerate(results):
        assert claimed == sorted(claimed, key=queued.index)  # each worker took them oldest first
        for run_id in claimed:
            assert store.get_run(run_id).owner == f"worker-{i}"
            assert store.get_run(run_id).status == "running"
    assert store.claim_queued_run("late") is None


@pytest.mark.parametrize("mode", ["separate", "shared"])
def test_two_reviewers_racing_on_one_pause_store_one_decision(backend: Backend, store: Store, mode: str):
    run_id, wf, paused = paused_run(store)
    before = store.count_rows()
    stores = handles(backend, store, mode, 2)

    def decide(i: int) -> int:
        return stores[i].decide(review(run_id, paused, reviewer=f"reviewer-{i}"),
                                new_records=[step(run_id, wf, "b", attempt=2, origin="approved")])

    results = race(2, decide)
    winners = [i for i, r in enumerate(results) if isinstance(r, int)]
    losers = [r for r in results if isinstance(r, ReviewError)]
    assert len(winners) == 1 and len(losers) == 1, results
    [stored] = store.reviews(run_id)
    assert stored.reviewer == f"reviewer-{winners[0]}"
    after = store.count_rows()
    assert (after["reviews"], after["step_records"]) == (before["reviews"] + 1, before["step_records"] + 1)
    assert store.get_run(run_id).status == "running"


def test_concurrent_writers_get_distinct_increasing_ids(backend: Backend, store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    stores = handles(backend, store, "separate", 4)

    def write(i: int) -> list[int]:
        return [stores[i].insert_step_record(step(run_id, wf, f"s{i}", attempt=n)) for n in range(1, 11)]

    results = race(4, write)
    assert not any(isinstance(r, Exception) for r in results), results
    ids = [record_id for ids in results for record_id in ids]
    assert len(set(ids)) == 40
    for per_thread in results:
        assert per_thread == sorted(per_thread)
    assert [r.id for r in store.step_records(run_id)] == sorted(ids)
