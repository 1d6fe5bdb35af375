"""A worker's idle poll asks for the paused runs whose review is due: one indexed range, however many runs wait
for a person. Counted in SQLite's own unit of work (virtual machine instructions, through a progress handler)
on the database the store created, so the index the store's schema and migrations make is what is tested."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from orchestrator.engine.executor import new_lease
from orchestrator.store import open_store
from orchestrator.store.rows import NewRun

DUE_REVIEWS = ("SELECT run_id, review_deadline FROM runs WHERE status = 'paused' AND review_deadline <= ? "
               "ORDER BY review_deadline LIMIT 100")
"""The worker's question (``Store.due_reviews``): the earliest due pauses first."""


def paused_runs(path: Path, count: int, due: int) -> None:
    """A database with ``count`` paused runs, ``due`` of them past their review deadline."""
    store = open_store(f"sqlite:///{path}")
    try:
        workflow_id = store.register_workflow("waits", "1", {"name": "waits", "steps": []}, None, "waits")
        for i in range(count):
            lease = new_lease()
            run_id = store.create_run(NewRun(workflow_id, "waits", {}), lease=lease)
            store.end_lease(replace(lease, run_id=run_id), "paused", review_due=10.0 + i if i < due else None)
        assert [d for _, d in store.due_reviews(1e9)] == [10.0 + i for i in range(due)]
    finally:
        store.close()


def instructions(path: Path, sql: str, *params: object) -> int:
    conn = sqlite3.connect(path)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    try:
        conn.set_progress_handler(count, 1)
        conn.execute(sql, params).fetchall()
    finally:
        conn.close()
    return steps


def test_due_reviews_cost_the_same_beside_ten_or_a_thousand_paused_runs(tmp_path: Path) -> None:
    few, many = tmp_path / "few.db", tmp_path / "many.db"
    paused_runs(few, 10, due=3)
    paused_runs(many, 1000, due=3)
    assert instructions(many, DUE_REVIEWS, 1e9) == instructions(few, DUE_REVIEWS, 1e9)


def test_due_reviews_are_a_search_of_one_index_in_deadline_order(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    paused_runs(path, 50, due=5)
    with sqlite3.connect(path) as conn:
        plan = " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + DUE_REVIEWS, (1e9,)))
    assert "USING INDEX ix_runs_status_review_deadline (status=? AND review_deadline<?)" in plan
    assert "TEMP B-TREE" not in plan
