"""Reviewers racing on a pause inside a child run, as separate processes: one names it from the parent
(``approve PARENT --step 'research > retrieve'``), the other from the child (``approve CHILD``). Exactly one
decision is stored, the other reviewer is refused (exit 2), and every step runs once. A decision on another
pause of the same tree, taken while the first decision's continuation holds the tree, waits for it and then
lands. Executions are counted from the step log the steps write; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import REPO, _cli_on
from tests.flow.conftest import FLOW, executions


def _env(log: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "STEP_LOG": str(log), "PYTHONPATH": str(REPO), "ORCHESTRATOR_LEASE_SECONDS": "5",
            **extra}


def _cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _paused(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, workflow: str, *inputs: str) -> dict:
    """Run ``workflow`` to its pauses in this process (the racing reviewers are the processes), with the
    environment the reviewers get."""
    for name in ("STEP_LOG", "ORCHESTRATOR_LEASE_SECONDS"):
        monkeypatch.setenv(name, env[name])
    paused = _cli_on(url)("run", str(FLOW / workflow), *[a for i in inputs for a in ("--input", i)], "--json")
    assert paused.exit_code == 3, paused.stderr
    return paused.json()


@pytest.mark.slow
def test_racing_reviewers_from_the_parent_and_from_the_child_decide_once(tmp_path, durable_url, monkeypatch):
    log = tmp_path / "steps.log"
    log.touch()
    env = _env(log)
    doc = _paused(monkeypatch, env, durable_url, "tree_review.yaml")
    child_id = doc["children"][0]["run_id"]
    racing = {**env, "STEP_SLEEP": "0.3"}  # the winner's continuation takes a while: the loser meets it
    racers = [_cli(racing, "approve", doc["run_id"], "--step", "research > retrieve", "--db", durable_url),
              _cli(racing, "approve", child_id, "--db", durable_url)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in racers]
    assert sorted(code for code, _ in results) == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    # refused whenever it came: while the winner's decision was stored, while its continuation ran, or after
    # the tree had finished and nothing waits any more
    assert any(said in loser for said in ("already decided", "not paused", "has no step waiting for review")), loser
    store = open_store(durable_url)
    assert [(r.step_id, r.decision) for r in store.reviews(child_id)] == [("retrieve", "approve")]
    assert store.reviews(doc["run_id"]) == []
    assert store.get_run(doc["run_id"]).status == "succeeded"
    assert Counter(executions(log)) == Counter({"tree-review.plan": 1, "tree-research.retrieve": 1,
                                                "tree-research.summarize": 1, "tree-review.write": 1})


@pytest.mark.slow
def test_a_decision_on_another_pause_waits_while_the_tree_is_continued_then_lands(tmp_path, durable_url, monkeypatch):
    log = tmp_path / "steps.log"
    log.touch()
    env = _env(log)
    doc = _paused(monkeypatch, env, durable_url, "tree_map.yaml", "unclear=[1, 3]")
    assert doc["paused_steps"] == ["per_ticket[1] > classify", "per_ticket[3] > classify"]
    hold = tmp_path / "hold"
    hold.touch()  # ticket 1's answer, once approved, waits until the test removes this file
    held = {**env, "STEP_HOLD": str(hold), "HOLD_STEP": "tree-triage.answer"}
    first = _cli(held, "approve", doc["run_id"], "--step", "per_ticket[1] > classify", "--db", durable_url)
    deadline = time.time() + 60
    while Counter(executions(log))["tree-triage.answer"] < 4:  # three ran before the pauses, and ticket 1's now
        assert time.time() < deadline and first.poll() is None, first.stderr.read() if first.stderr else ""
        time.sleep(0.02)
    ticket3 = next(c["run_id"] for c in doc["children"] if c["step"] == "per_ticket[3]")
    second = _cli(env, "approve", ticket3, "--db", durable_url)
    time.sleep(1.0)
    assert second.poll() is None, "the second decision waits for the tree, not refused"
    store = open_store(durable_url)
    assert store.reviews(ticket3) == []
    hold.unlink()
    assert first.wait(timeout=120) in (0, 3), first.stderr.read() if first.stderr else ""
    assert second.wait(timeout=120) == 0, second.stderr.read() if second.stderr else ""
    assert store.get_run(doc["run_id"]).status == "succeeded"
    assert Counter(executions(log)) == Counter({"tree-map.tickets": 1, "tree-triage.classify": 5,
                                                "tree-triage.answer": 5, "tree-map.combine": 1})


@pytest.mark.slow
def test_a_decision_inside_a_tree_another_process_keeps_executing_is_refused_naming_it(tmp_path, db_url, monkeypatch):
    """The first decision's continuation holds the tree past the wait: the second is refused (exit 2), names
    the holder and stores nothing; decided once the tree pauses again, it lands."""
    log = tmp_path / "steps.log"
    log.touch()
    env = _env(log)
    doc = _paused(monkeypatch, env, db_url, "tree_map.yaml", "unclear=[1, 3]")
    hold = tmp_path / "hold"
    hold.touch()
    held = {**env, "STEP_HOLD": str(hold), "HOLD_STEP": "tree-triage.answer"}
    first = _cli(held, "approve", doc["run_id"], "--step", "per_ticket[1] > classify", "--db", db_url)
    deadline = time.time() + 60
    while Counter(executions(log))["tree-triage.answer"] < 4:
        assert time.time() < deadline and first.poll() is None, first.stderr.read() if first.stderr else ""
        time.sleep(0.02)
    second = _cli(env, "approve", doc["run_id"], "--step", "per_ticket[3] > classify", "--db", db_url)
    _, err = second.communicate(timeout=120)  # waits for the tree as long as a decision waits, then gives up
    assert second.returncode == 2, err
    assert f"run {doc['run_id']}, the root of the tree, is being executed by" in err
    assert "nothing was decided" in err
    store = open_store(db_url)
    ticket3 = next(c["run_id"] for c in doc["children"] if c["step"] == "per_ticket[3]")
    assert store.reviews(ticket3) == []
    hold.unlink()
    assert first.wait(timeout=120) == 3, first.stderr.read() if first.stderr else ""
    again = _cli(env, "approve", doc["run_id"], "--db", db_url)  # the one pause left
    assert again.wait(timeout=120) == 0, again.stderr.read() if again.stderr else ""
    assert Counter(executions(log)) == Counter({"tree-map.tickets": 1, "tree-triage.classify": 5,
                                                "tree-triage.answer": 5, "tree-map.combine": 1})
