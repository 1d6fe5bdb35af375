"""A map survives its process: two racing resumes after a kill in the middle of a map leave each instance
executed once (a single resume after the kill, by every face, is a case of
tests/durability/test_kill_and_resume.py). Several paused instances are several pauses, each decided once
however many reviewers race for it.

Executions are counted from the step log the instances append to, outside the processes, on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.flow.conftest import FLOW, durable_env, executions, wait_interrupted


def _killed_mid_map(tmp_path: Path, url: str) -> tuple[str, Path, dict[str, str]]:
    """Run an 8-item map two at a time, SIGKILL the process once 3 instances have completed records."""
    log = tmp_path / "steps.log"
    log.touch()
    env = durable_env(log, ITEM_SLEEP="0.4")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FLOW / "map_slow.yaml"), "--db", url],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = open_store(url)
    deadline = time.time() + 60
    run_id = None
    while time.time() < deadline:
        runs = store.list_runs()
        if runs:
            run_id = runs[0].run_id
            done = [r for r in store.step_records(run_id) if r.index is not None and r.status == "succeeded"]
            if len(done) >= 3:
                break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert run_id is not None
    completed = [r for r in store.step_records(run_id) if r.index is not None and r.status == "succeeded"]
    assert 3 <= len(completed) < 8, "the kill must land in the middle of the map"
    return run_id, log, env


@pytest.mark.slow
def test_two_racing_resumes_leave_each_instance_executed_once_after_the_kill(tmp_path, durable_url):
    run_id, log, env = _killed_mid_map(tmp_path, durable_url)
    store = open_store(durable_url)
    completed = {r.unit for r in store.step_records(run_id) if r.index is not None and r.status == "succeeded"}
    wait_interrupted(durable_url, run_id)
    before = len(executions(log))
    racers = [subprocess.Popen([sys.executable, "-m", "orchestrator", "resume", run_id, "--db", durable_url],
                               env={**env, "ITEM_SLEEP": "0.3"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in racers)
    # one executes; the other is refused while it holds the lease (2), or finds the run already done (0)
    assert codes[0] == 0 and codes[1] in (0, 2), [p.stderr.read() for p in racers if p.stderr]
    rerun = Counter(executions(log)[before:])
    assert all(n == 1 for n in rerun.values()), rerun
    assert not completed & set(rerun)
    assert store.get_run(run_id).status == "succeeded"


@pytest.mark.slow
def test_several_paused_instances_are_decided_once_each_by_racing_reviewers(tmp_path, durable_url, durable_cli,
                                                                             monkeypatch):
    """Three paused instances, two reviewer processes racing on each: every instance is decided once (more
    instances would only start more processes; the race is between the two on each one)."""
    log = tmp_path / "steps.log"
    log.touch()
    env = durable_env(log, ORCHESTRATOR_LEASE_SECONDS="15")  # no lease lapses here: this is about decisions, not deaths
    monkeypatch.setenv("STEP_LOG", str(log))
    res = durable_cli("run", str(FLOW / "map_two_pauses.yaml"), "--input", "count=3", "--json")  # set-up, here
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    run_id = doc["run_id"]
    waiting = doc["paused_steps"]
    assert waiting == ["summarize[0]", "summarize[1]", "summarize[2]"]
    reviewers = []
    for unit in waiting:
        for who in ("ann", "bob"):
            reviewers.append((unit, subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "approve", run_id, "--step", unit, "--reviewer", who,
                 "--db", durable_url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = [(unit, p.wait(timeout=120), p.stderr.read()) for unit, p in reviewers]
    store = open_store(durable_url)
    decided = Counter(r.step_id for r in store.reviews(run_id))
    assert decided == Counter({unit: 1 for unit in waiting}), "\n".join(f"{u} {rc} {e}" for u, rc, e in results)
    assert store.get_run(run_id).status == "succeeded"
    assert Counter(executions(log))["combine"] == 1
    for unit in waiting:
        assert Counter(executions(log))[unit] == 1  # approval never re-runs the paused instance
