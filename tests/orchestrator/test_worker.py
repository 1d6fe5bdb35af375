"""Queued runs and workers: several workers share one database and each run executes once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO, calls

PG_URL = os.environ.get("ORCHESTRATOR_TEST_PG_URL")


def test_queued_run_waits_for_a_worker(cli, store, step_log):
    result = cli("run", str(FIXTURES / "ok.yaml"), "--queue", "--json")
    assert result.exit_code == 0
    run_id = result.json()["run_id"]
    assert store.get_run(run_id).status == "queued"
    assert calls(step_log) == []
    worked = cli("worker", "--once")
    assert worked.exit_code == 0
    assert store.get_run(run_id).status == "succeeded"
    assert calls(step_log).count("add") == 1


def test_queue_rejects_bad_inputs_before_storing(cli, store):
    result = cli("run", str(FIXTURES / "types.yaml"), "--queue", "--input", "n=many")
    assert result.exit_code == 2
    assert store.count_rows()["runs"] == 0


def _two_workers_share_the_queue(url: str, tmp_path) -> None:
    log = tmp_path / "steps.log"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "orchestrator"]
    ids = []
    for i in range(6):
        out = subprocess.run([*run, "run", str(FIXTURES / "fanout.yaml"), "--queue", "--input", f"x={i}",
                              "--db", url, "--json"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        ids.append(__import__("json").loads(out.stdout)["run_id"])
    workers = [subprocess.Popen([*run, "worker", "--once", "--db", url], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for w in workers:
        w.wait(timeout=120)
        assert w.returncode == 0, w.stderr.read()
    store = open_store(url)
    assert [store.get_run(r).status for r in ids] == ["succeeded"] * 6
    assert [store.get_run(r).output for r in ids] == [2 * i for i in range(6)]
    assert calls(log).count("start") == 6  # every run's first step executed exactly once
    assert calls(log).count("add") == 6


def test_two_workers_share_a_sqlite_queue(tmp_path, db_url):
    _two_workers_share_the_queue(db_url, tmp_path)


@pytest.mark.skipif(not PG_URL, reason="ORCHESTRATOR_TEST_PG_URL is not set; no PostgreSQL to test")
def test_two_workers_share_a_postgres_queue(tmp_path):
    store = open_store(PG_URL)
    for run in store.list_runs(status="queued"):
        store.set_run_status(run.run_id, "failed", error="left over from an earlier test session")
    _two_workers_share_the_queue(PG_URL, tmp_path)
