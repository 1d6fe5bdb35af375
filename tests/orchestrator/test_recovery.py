"""Recovery under faults, with real processes: a killed executor's run is finished by a worker,
and a stopped one that wakes after losing its lease writes nothing.

Leases last ``LEASE`` seconds here (``ORCHESTRATOR_LEASE_SECONDS``); steps append to a log file,
so executions are counted from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import enqueue_run
from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO, calls

LEASE = 2.0
ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]


def _env(log) -> dict[str, str]:
    return {**os.environ, "STEP_LOG": str(log), "CHAIN_SLEEP": "0.4", "PYTHONPATH": str(REPO),
            "ORCHESTRATOR_LEASE_SECONDS": str(LEASE)}


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.time() + seconds
    while not predicate():
        assert time.time() < deadline, what
        time.sleep(0.05)


def _completed(store, run_id: str) -> int:
    return len([r for r in store.step_records(run_id) if r.status == "succeeded"])


@pytest.mark.slow
def test_a_worker_finishes_the_run_of_a_killed_process_within_two_leases(tmp_path, durable_url):
    log = tmp_path / "steps.log"
    log.touch()
    env = _env(log)
    proc = subprocess.Popen([*ORCHESTRATOR, "run", str(FIXTURES / "chain.yaml"), "--db", durable_url], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = open_store(durable_url)
    _wait(lambda: store.list_runs() and _completed(store, store.list_runs()[0].run_id) >= 2, 30, "no progress")
    run_id = store.list_runs()[0].run_id
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    killed_at = time.time()
    done_before = [r.step_id for r in store.step_records(run_id) if r.status == "succeeded"]

    worker = subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.1", "--max-runs", "1", "--db", durable_url],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: store.get_run(run_id).status == "succeeded", 30, "the worker never finished the run")
        # taken over once the lease lapsed, then the 4 remaining steps of 0.4 s ran
        assert time.time() - killed_at < 2 * LEASE + 6 * 0.4 + 5
    finally:
        worker.wait(timeout=30)
    assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
    assert store.get_run(run_id).output == 6
    assert [s for s in done_before if calls(log).count(s) != 1] == []  # completed steps never ran again


@pytest.mark.slow
def test_a_stopped_worker_that_wakes_after_losing_its_lease_writes_nothing(tmp_path, durable_url):
    log = tmp_path / "steps.log"
    log.touch()
    env = _env(log)
    store = open_store(durable_url)
    run_id = enqueue_run(store, load_workflow(FIXTURES / "chain.yaml"), {})  # queued here, executed by workers
    sleeper = subprocess.Popen([*ORCHESTRATOR, "worker", "--once", "--db", durable_url], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait(lambda: _completed(store, run_id) >= 1, 30, "the first worker never started")
    sleeper.send_signal(signal.SIGSTOP)
    try:
        rescuer = subprocess.run([*ORCHESTRATOR, "worker", "--poll", "0.1", "--max-runs", "1", "--db", durable_url],
                                 env=env, capture_output=True, text=True, timeout=60)
        assert rescuer.returncode == 0, rescuer.stderr
        assert store.get_run(run_id).status == "succeeded"
        rows_after_rescue = store.count_rows()
        records_after_rescue = [(r.id, r.step_id, r.status) for r in store.step_records(run_id)]
    finally:
        sleeper.send_signal(signal.SIGCONT)
    sleeper.wait(timeout=30)
    assert store.count_rows() == rows_after_rescue  # the woken worker wrote nothing
    assert [(r.id, r.step_id, r.status) for r in store.step_records(run_id)] == records_after_rescue
    assert store.get_run(run_id).status == "succeeded" and store.get_run(run_id).output == 6


@pytest.mark.slow
def test_a_process_killed_while_its_evaluator_scores_leaves_the_run_resumable_and_two_resumes_score_it_once(
        tmp_path, durable_url):
    log = tmp_path / "steps.log"
    log.touch()
    env = {**_env(log), "CHAIN_SLEEP": "0.05"}
    proc = subprocess.Popen([*ORCHESTRATOR, "run", str(FIXTURES / "scored_chain.yaml"), "--input", "x=1",
                             "--db", durable_url], env={**env, "JUDGE_SLEEP": "60"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: "judge" in calls(log), 30, "the evaluator never started")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    store = open_store(durable_url)
    (run,) = store.list_runs()
    assert run.status != "succeeded" and store.outcomes(run.run_id) == []  # not ended unscored
    _wait(lambda: store.list_runs(status="interrupted"), 3 * LEASE, "the killed run's lease never lapsed")

    resumes = [subprocess.Popen([*ORCHESTRATOR, "resume", run.run_id, "--db", durable_url], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=60) for p in resumes)
    assert codes[0] == 0 and codes[1] in (0, 2), [p.stderr.read() for p in resumes if p.stderr]  # 2: lease held
    ended = store.get_run(run.run_id)
    assert (ended.status, ended.output) == ("succeeded", 3)
    assert [(o.source, o.value, o.correct) for o in store.outcomes(run.run_id)] == [("evaluator", 1.0, True)]
    assert [calls(log).count(step) for step in ("s1", "s2")] == [1, 1]  # no step ran again
