"""A tree of runs survives its process: after a SIGKILL inside a child run two racing resumes leave each step
executed once, a killed map of children resumed pauses where it would have, and one executor holds the whole
tree, so while its lease lives a resume of the parent or of a child is refused (a single resume or worker after
the kill, by every face, is a case of tests/durability/test_kill_and_resume.py).

Executions are counted from the step log the steps append to (``WORKFLOW.UNIT KEY``), outside the
processes, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.engine.attempt import idempotency_key
from orchestrator.store import Store, open_store
from tests.conftest import REPO, Result, _cli_on
from tests.flow.conftest import FLOW, executions

LEASE = 2.0


def _env(log: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "STEP_LOG": str(log), "PYTHONPATH": str(REPO), "ORCHESTRATOR_LEASE_SECONDS": str(LEASE),
            **extra}


def _cli(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, *args: str) -> Result:
    """``orchestrator ARGS --db URL`` in this process (not the killed or holding one), with the variables of ``env``
    that the steps and the lease read."""
    for name in ("STEP_LOG", "ORCHESTRATOR_LEASE_SECONDS", "STEP_SLEEP", "STEP_HOLD", "HOLD_STEP"):
        if name in env:
            monkeypatch.setenv(name, env[name])
    return _cli_on(url)(*args)


def _completed(store: Store, run_id: str) -> set[str]:
    """The idempotency keys (one per run and unit) of every unit of the run and of its child runs that has a
    completed (succeeded, or paused for review) record: the steps that must never run again."""
    found = {idempotency_key(run_id, r.unit) for r in store.step_records(run_id)
             if r.status in ("succeeded", "gate_failed") and r.origin == "executed"}
    for child in store.child_runs(run_id):
        found |= _completed(store, child.run_id)
    return found


def _keys(log: Path) -> list[str]:
    """The idempotency key of each execution logged, in order."""
    return [line.split()[1] for line in log.read_text().splitlines() if line.strip()]


def _start_and_kill(tmp_path: Path, url: str, workflow: str, until: Callable[[Store, str], bool],
                    **env: str) -> tuple[str, Path, dict[str, str]]:
    """Start a run of ``workflow`` with slow steps; SIGKILL its process once ``until(store, run_id)`` holds."""
    log = tmp_path / "steps.log"
    log.touch()
    environment = _env(log, STEP_SLEEP="0.4", **env)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FLOW / workflow), "--db", url],
                            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = open_store(url)
    deadline = time.time() + 90
    run_id = None
    while time.time() < deadline:
        runs = store.list_runs()
        if runs:
            run_id = runs[-1].run_id
            if until(store, run_id):
                break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert run_id is not None and until(store, run_id), "the kill must land where the test says"
    assert store.get_run(run_id).status in ("running", "interrupted"), "the kill must land before the run ends"
    return run_id, log, environment


def _child_record_done(step: str) -> Callable[[Store, str], bool]:
    def check(store: Store, run_id: str) -> bool:
        return any(r.step_id == step and r.status == "succeeded"
                   for child in store.child_runs(run_id) for r in store.step_records(child.run_id))
    return check


def _children_done(count: int) -> Callable[[Store, str], bool]:
    def check(store: Store, run_id: str) -> bool:
        return sum(1 for c in store.child_runs(run_id) if c.status == "succeeded") >= count
    return check


def _wait_interrupted(store: Store, run_id: str) -> None:
    deadline = time.time() + 4 * LEASE
    while store.get_run(run_id).status != "interrupted":
        assert time.time() < deadline, "the killed run never showed as interrupted"
        time.sleep(0.05)


@pytest.mark.slow
def test_two_racing_resumes_after_a_kill_inside_the_child_run_each_step_once(tmp_path, durable_url):
    run_id, log, env = _start_and_kill(tmp_path, durable_url, "tree_parent.yaml", _child_record_done("retrieve"))
    store = open_store(durable_url)
    completed = _completed(store, run_id)
    _wait_interrupted(store, run_id)
    before = len(executions(log))
    racers = [subprocess.Popen([sys.executable, "-m", "orchestrator", "resume", run_id, "--db", durable_url],
                               env={**env, "STEP_SLEEP": "0.3"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in racers)
    # one executes the tree; the other is refused while it holds the lease (2), or finds the run done (0)
    assert codes[0] == 0 and codes[1] in (0, 2), [p.stderr.read() for p in racers if p.stderr]
    rerun = Counter(executions(log)[before:])
    assert rerun == Counter({"tree-research.summarize": 1, "tree-parent.write": 1}), rerun
    assert not completed & set(_keys(log)[before:])
    assert store.get_run(run_id).status == "succeeded"


@pytest.mark.slow
def test_a_kill_in_a_map_of_child_runs_resumes_only_the_unfinished_children(tmp_path, durable_url, monkeypatch):
    run_id, log, env = _start_and_kill(tmp_path, durable_url, "tree_map.yaml", _children_done(2))
    store = open_store(durable_url)
    completed = _completed(store, run_id)
    finished = {c.parent_step for c in store.child_runs(run_id) if c.status == "succeeded"}
    _wait_interrupted(store, run_id)
    before = len(executions(log))
    res = _cli(monkeypatch, {**env, "STEP_SLEEP": "0"}, durable_url, "resume", run_id, "--json")
    assert res.exit_code == 3, res.stderr  # ticket 3 pauses inside its child, as it would have
    doc = res.json()
    assert doc["paused_steps"] == ["per_ticket[3] > classify"]
    rerun_keys = _keys(log)[before:]
    assert not completed & set(rerun_keys), "completed steps ran again"
    assert all(n == 1 for n in Counter(rerun_keys).values()), Counter(rerun_keys)
    children = {c["step"]: c["run_id"] for c in doc["children"]}
    assert len(children) == 5
    for unit in finished:  # a child that had finished is the same run, untouched
        assert idempotency_key(children[unit], "classify") not in rerun_keys
    for unit in set(children) - finished:  # every other child classified its ticket exactly once in all
        key = idempotency_key(children[unit], "classify")
        assert _keys(log).count(key) + sum(1 for k in completed if k == key) >= 1
        assert Counter(_keys(log))[key] <= 1 + (key not in completed and key in _keys(log)[:before])


@pytest.mark.slow
def test_while_the_tree_runs_a_resume_of_the_parent_or_of_a_child_is_refused(tmp_path, durable_url, monkeypatch):
    log = tmp_path / "steps.log"
    log.touch()
    hold = tmp_path / "hold"
    hold.touch()  # the child's first step waits until the test removes it
    env = _env(log, STEP_HOLD=str(hold), HOLD_STEP="tree-research.retrieve", ORCHESTRATOR_LEASE_SECONDS="15")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FLOW / "tree_parent.yaml"),
                             "--db", durable_url], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    store = open_store(durable_url)
    deadline = time.time() + 60
    while time.time() < deadline:
        runs = store.list_runs()
        if runs and store.child_runs(runs[0].run_id):
            break
        time.sleep(0.02)
    run_id = store.list_runs()[0].run_id
    child_id = store.child_runs(run_id)[0].run_id
    for target in (run_id, child_id):
        res = _cli(monkeypatch, env, durable_url, "resume", target)
        assert res.exit_code == 2, res.stderr
        assert f"run {run_id} is being executed by" in res.stderr
    hold.unlink()
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    assert Counter(executions(log)) == Counter({"tree-parent.plan": 1, "tree-research.retrieve": 1,
                                                "tree-research.summarize": 1, "tree-parent.write": 1})
