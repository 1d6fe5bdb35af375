"""The same store code on PostgreSQL: runs, pauses, racing reviewers and resume.

Needs a server: set ORCHESTRATOR_TEST_PG_URL (CI sets it to the local PostgreSQL).
"""

from __future__ import annotations

import os
import threading

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import ReviewError
from orchestrator.service import review
from orchestrator.service.runner import continue_run, start_run
from orchestrator.store import open_store
from tests.conftest import FIXTURES

PG_URL = os.environ.get("ORCHESTRATOR_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="ORCHESTRATOR_TEST_PG_URL is not set; no PostgreSQL to test")


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    """A brand-new schema per test (see ``tests/store/conftest.py``), dropped afterwards."""
    return postgres_url


def test_a_run_succeeds_on_postgres(pg_url):
    store = open_store(pg_url)
    result = start_run(store, load_workflow(FIXTURES / "ok.yaml"), {"x": "2"})
    assert result.status == "succeeded" and result.output == 10
    records = store.step_records(result.run_id)
    assert [r.step_id for r in records][0] == "src"
    assert {c["step_id"] for c in store.latest_records(result.run_id)["total"].consumed} == {"left", "right"}


def test_pause_race_and_resume_on_postgres(pg_url):
    spec = load_workflow(FIXTURES / "gated.yaml")
    run_id = start_run(open_store(pg_url), spec, {}).run_id
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def decide(fn) -> None:
        s = open_store(pg_url)
        barrier.wait()
        try:
            fn(s, run_id, comment="race")
            outcomes.append("won")
        except ReviewError:
            outcomes.append("lost")

    threads = [threading.Thread(target=decide, args=(fn,)) for fn in (review.approve, review.approve)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost", "won"]
    store = open_store(pg_url)
    assert len(store.reviews(run_id)) == 1
    result = continue_run(store, run_id)
    assert result.status == "succeeded"
    assert store.latest_records(run_id)["scored"].origin == "approved"
