"""Queued runs and workers: several workers share one database and each run executes once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO, _cli_on, calls


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
    cli = _cli_on(url)
    ids = []
    for i in range(6):
        out = cli("run", str(FIXTURES / "fanout.yaml"), "--queue", "--input", f"x={i}", "--json")
        assert out.exit_code == 0, out.stderr
        ids.append(out.json()["run_id"])
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


@pytest.mark.slow
def test_two_workers_share_a_sqlite_queue(tmp_path, db_url):
    _two_workers_share_the_queue(db_url, tmp_path)


@pytest.mark.slow
def test_two_workers_share_a_postgres_queue(tmp_path, postgres_url):
    _two_workers_share_the_queue(postgres_url, tmp_path)


TIMED_STEPS = '''
import os, time

def timed(value: int, ctx) -> int:
    began = time.time()
    time.sleep(0.5)
    with open(os.environ["STEP_TIMES"], "a") as fh:
        fh.write(f"{ctx.run_id} {ctx.step_id} {began} {time.time()}\\n")
    return value + 1
'''
TIMED = """name: timed
inputs: {x: {type: integer, default: 0}}
steps:
  - {id: one, run: 'timed_steps:timed', inputs: {value: $inputs.x}}
  - {id: two, run: 'timed_steps:timed', inputs: {value: one}}
"""


@pytest.mark.slow
def test_a_worker_with_concurrency_3_overlaps_runs_and_executes_each_step_once(tmp_path, durable_url,
                                                                              durable_cli):
    (tmp_path / "timed_steps.py").write_text(TIMED_STEPS)
    (tmp_path / "timed.yaml").write_text(TIMED)
    times = tmp_path / "times.log"
    env = {**os.environ, "STEP_TIMES": str(times), "PYTHONPATH": str(REPO)}
    orchestrator = [sys.executable, "-m", "orchestrator"]
    ids = []
    for i in range(5):
        queued = durable_cli("run", str(tmp_path / "timed.yaml"), "--queue", "--input", f"x={i}", "--json")
        assert queued.exit_code == 0, queued.stderr
        ids.append(queued.json()["run_id"])
    worker = subprocess.run([*orchestrator, "worker", "--once", "--concurrency", "3", "--db", durable_url], env=env,
                            capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0, worker.stderr
    assert worker.stderr.strip() == "worker done: 5 run(s) executed"

    store = open_store(durable_url)
    assert [(store.get_run(r).status, store.get_run(r).output) for r in ids] == [("succeeded", i + 2)
                                                                                 for i in range(5)]
    steps = [line.split() for line in times.read_text().splitlines()]
    assert sorted((run, step) for run, step, _, _ in steps) == sorted((r, s) for r in ids for s in ("one", "two"))
    spans = [(float(began), float(ended), run) for run, _, began, ended in steps]
    overlapping = {frozenset((a[2], b[2])) for a in spans for b in spans
                   if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]}
    assert overlapping, "no two runs were executing at the same time"
    most_at_once = max(sum(1 for began, ended, _ in spans if began <= t < ended) for t, _, _ in spans)
    assert most_at_once <= 3
