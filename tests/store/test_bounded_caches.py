"""A long-lived store's caches are bounded: a worker that runs for weeks does not leak memory.

What the caches hold never changes once stored (a run's key, a workflow version's id), so an
evicted entry costs one query, never a wrong answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import bounded, open_store
from orchestrator.store.bounded import BoundedCache
from orchestrator.store.sql import SqlStore
from orchestrator.store.sqlite import SqliteStore
from tests.store.rows import add_run, add_workflow, step


def test_a_bounded_cache_keeps_at_most_its_size_and_forgets_the_oldest_first() -> None:
    cache: BoundedCache[int, int] = BoundedCache(8)
    for key in range(100):
        cache[key] = key * 2
    assert len(cache) <= 8
    assert 99 in cache and cache[99] == 198
    assert 0 not in cache


def test_run_keys_and_workflow_ids_stay_bounded_and_evicted_runs_still_resolve(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = 16
    monkeypatch.setattr(bounded, "DEFAULT_SIZE", small)  # what every cache of a store opened now holds
    store = open_store(f"sqlite:///{tmp_path / 'o.db'}")
    assert isinstance(store, SqliteStore)
    sql = store.sql()
    assert isinstance(sql, SqlStore)
    try:
        runs = []
        for n in range(5 * small):
            wf = add_workflow(store, "wf", f"h{n}")
            runs.append((add_run(store, wf), wf))
            store.insert_step_record(step(runs[-1][0], wf, "a"))
        for run_id, _ in runs:  # the SQLAlchemy half's cache is filled by the reads it serves
            assert len(store.reviews(run_id)) == 0
            assert sql.attributions(run_id) == []
        assert max(len(store.run_pks), len(store.workflow_ids), len(sql.run_pks)) <= small
        first_run, first_wf = runs[0]  # long evicted: looked up again, same answers
        assert [r.step_id for r in store.step_records(first_run)] == ["a"]
        assert add_workflow(store, "wf", "h0") == first_wf
    finally:
        store.close()
