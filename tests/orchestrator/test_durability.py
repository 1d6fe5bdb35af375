"""A story about crashes: the process is killed with SIGKILL in the middle of a run, and
`orchestrator resume` finishes it without re-executing the steps that had completed (at once: the dead
holder was on this machine; ``ORCHESTRATOR_LEASE_SECONDS=2`` here). Two resumes at once: one executes,
the other is refused naming the holder; a holder that lives keeps its run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO, _cli_on

LEASE = 2.0


def _wait_until_interrupted(store, run_id: str) -> None:
    """The killed process's lease lapses within LEASE seconds of its last heartbeat."""
    deadline = time.time() + 3 * LEASE
    while store.get_run(run_id).status != "interrupted":
        assert time.time() < deadline, f"run {run_id} never showed as interrupted"
        time.sleep(0.1)


def _killed_mid_run(tmp_path, url: str, lease: float = LEASE) -> tuple[str, Path, dict[str, str]]:
    """Start the 6-step chain, SIGKILL it after step 3 committed; the run id, the step log and the env."""
    log = tmp_path / "steps.log"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "CHAIN_SLEEP": "0.3", "PYTHONPATH": str(REPO),
           "ORCHESTRATOR_LEASE_SECONDS": str(lease)}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "chain.yaml"),
                             "--db", url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = open_store(url)
    deadline = time.time() + 30
    while time.time() < deadline:
        runs = store.list_runs()
        if runs and len([r for r in store.step_records(runs[0].run_id) if r.status == "succeeded"]) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return store.list_runs()[0].run_id, log, env


def test_a_resume_while_the_holder_lives_is_refused_naming_it(tmp_path, durable_url):
    """A holder that lives keeps its lease, even stopped (SIGSTOP, as a frozen process is): resume is
    refused naming it (``host:pid``). Only a holder known dead on this machine is taken over at once
    (``test_dead_holder.py``)."""
    log = tmp_path / "steps.log"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "CHAIN_SLEEP": "0.3", "PYTHONPATH": str(REPO),
           "ORCHESTRATOR_LEASE_SECONDS": "30"}  # far longer than this test takes
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "chain.yaml"),
                             "--db", durable_url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        store = open_store(durable_url)
        deadline = time.time() + 60
        while not store.list_runs() or not store.step_records(store.list_runs()[0].run_id):
            assert time.time() < deadline, "the run never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)
        run_id = store.list_runs()[0].run_id
        early = _cli_on(durable_url)("resume", run_id)  # from this process, not the stopped holder
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert early.exit_code == 2
    assert f"run {run_id} is being executed by {socket.gethostname()}:{proc.pid} (its lease runs" in early.stderr
    assert len(early.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_two_resumes_of_one_killed_run_execute_each_step_once(tmp_path, durable_url):
    run_id, log, env = _killed_mid_run(tmp_path, durable_url)
    store = open_store(durable_url)
    _wait_until_interrupted(store, run_id)
    before = [step for step, _ in _log_lines(log)]
    cmd = [sys.executable, "-m", "orchestrator", "resume", run_id, "--db", durable_url]
    racers = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    outcomes = [(p.wait(timeout=60), p.stderr.read() if p.stderr else "") for p in racers]
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    refused = next(err for code, err in outcomes if code == 2)
    assert f"run {run_id} is being executed by" in refused
    assert store.get_run(run_id).status == "succeeded"
    executions = [step for step, _ in _log_lines(log)]
    after_kill = executions[len(before):]
    # each remaining step ran once, by the one resume that won; the step in flight at the kill
    # (started, never committed) is the only one that ran twice
    assert sorted(after_kill) == sorted(set(after_kill)), executions
    assert [s for s in ("s1", "s2", "s3") if executions.count(s) != 1] == [], executions
    assert executions.count("s6") == 1


def _log_lines(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_finishes_without_repeating_completed_steps(tmp_path, durable_url,
                                                                                monkeypatch):
    log = tmp_path / "steps.log"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "CHAIN_SLEEP": "0.4", "PYTHONPATH": str(REPO),
           "ORCHESTRATOR_LEASE_SECONDS": str(LEASE)}
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
    assert run.status in ("running", "interrupted")  # nobody finished it
    completed = [r.step_id for r in store.step_records(run.run_id) if r.status == "succeeded"]
    assert completed[:3] == ["s1", "s2", "s3"]
    keys_before = {step: key for step, key in _log_lines(log)}

    _wait_until_interrupted(store, run.run_id)
    for name in ("STEP_LOG", "CHAIN_SLEEP", "ORCHESTRATOR_LEASE_SECONDS"):  # the steps log where they did
        monkeypatch.setenv(name, env[name])
    resumed = _cli_on(durable_url)("resume", run.run_id)  # from this process, not the killed one
    assert resumed.exit_code == 0, resumed.stderr
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


def test_resume_of_an_unknown_run_is_exit_2(cli, store):
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
        assert f"run {run_id} is being executed by" in result.stderr
    finally:
        proc.kill()
        proc.wait(timeout=10)
