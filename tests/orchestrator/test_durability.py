"""A story about crashes: the process is killed with SIGKILL in the middle of a run, and
`orchestrator resume` finishes it without re-executing the steps that had completed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO


def _log_lines(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in path.read_text().splitlines() if line.strip()]


def test_sigkill_mid_run_then_resume_finishes_without_repeating_completed_steps(tmp_path, durable_url):
    log = tmp_path / "steps.log"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "CHAIN_SLEEP": "0.4", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "chain.yaml"),
                             "--db", durable_url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    store = open_store(durable_url)
    # Wait until three steps have committed their records, then kill the process mid-step.
    while time.time() < deadline:
        runs = store.list_runs()
        if runs and len([r for r in store.step_records(runs[0].run_id) if r.status == "succeeded"]) >= 3:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("the run never reached step 3")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    run = store.list_runs()[0]
    assert run.status == "running"  # nobody finished it
    completed = [r.step_id for r in store.step_records(run.run_id) if r.status == "succeeded"]
    assert completed[:3] == ["s1", "s2", "s3"]
    keys_before = {step: key for step, key in _log_lines(log)}

    resumed = subprocess.run([sys.executable, "-m", "orchestrator", "resume", run.run_id, "--db", durable_url],
                             env=env, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert store.get_run(run.run_id).status == "succeeded"
    assert store.get_run(run.run_id).output == 6

    executions = [step for step, _ in _log_lines(log)]
    for step in completed:
        assert executions.count(step) == 1, f"{step} ran again after resume"
    assert executions.count("s6") == 1
    # the step that was in flight when the process died keeps its idempotency key
    for step, key in _log_lines(log):
        assert keys_before.get(step, key) == key
    assert len({key for _, key in _log_lines(log)}) == 6


def test_resume_of_a_finished_run_changes_nothing(cli, step_log):
    run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
    before = step_log.read_text()
    result = cli("resume", run_id)
    assert result.exit_code == 0
    assert step_log.read_text() == before


def test_resume_of_an_unknown_run_is_exit_2(cli):
    result = cli("resume", "rnope")
    assert result.exit_code == 2
    assert "no run 'rnope'" in result.stderr


def test_resume_refuses_a_run_that_a_live_process_is_executing(tmp_path, durable_url, cli):
    env = {**os.environ, "STEP_LOG": str(tmp_path / "log"), "CHAIN_SLEEP": "1.0", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "chain.yaml"),
                             "--db", durable_url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        store = open_store(durable_url)
        deadline = time.time() + 30
        while time.time() < deadline and not (store.list_runs() and store.step_records(store.list_runs()[0].run_id)):
            time.sleep(0.05)
        run_id = store.list_runs()[0].run_id
        result = cli("resume", run_id, "--db", durable_url, db=False)
        assert result.exit_code == 2
        assert f"run {run_id} is being executed by process" in result.stderr
    finally:
        proc.kill()
        proc.wait(timeout=10)
