"""A loop survives its process: two racing resumes after a kill in the middle of a loop leave each iteration
executed once (a single resume after the kill, by every face, is a case of tests/durability/test_kill_and_resume.py).

Executions are counted from the step log the iterations append to, outside the processes, on SQLite and
on PostgreSQL.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.flow.conftest import FLOW, durable_env, executions, wait_interrupted

ITERATIONS = [f"draft#{n}" for n in range(1, 7)]
"""loop_slow.yaml's loop: until the score (0.3 an iteration) reaches 1.8, so six iterations."""


def _completed(url: str, run_id: str) -> set[str]:
    return {r.unit for r in open_store(url).step_records(run_id) if r.iteration is not None
            and r.status == "succeeded"}


def _killed_mid_loop(tmp_path: Path, url: str) -> tuple[str, Path, dict[str, str]]:
    """Run the six-iteration loop, SIGKILL the process once the third iteration has started (the step log,
    cheap to read however loaded the machine is, says so; the first two have committed their records by then)."""
    log = tmp_path / "steps.log"
    log.touch()
    env = durable_env(log, ITEM_SLEEP="1.0")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FLOW / "loop_slow.yaml"), "--db", url],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while "draft#3" not in executions(log):
        assert time.time() < deadline and proc.poll() is None, "the loop never reached its third iteration"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    store = open_store(url)
    run_id = store.list_runs()[0].run_id
    assert 2 <= len(_completed(url, run_id)) < 6, "the kill must land in the middle of the loop"
    wait_interrupted(url, run_id)
    return run_id, log, env


@pytest.mark.slow
def test_two_racing_resumes_leave_each_iteration_executed_once_after_the_kill(tmp_path, durable_url):
    run_id, log, env = _killed_mid_loop(tmp_path, durable_url)
    completed = _completed(durable_url, run_id)
    before = len(executions(log))
    racers = [subprocess.Popen([sys.executable, "-m", "orchestrator", "resume", run_id, "--db", durable_url],
                               env={**env, "ITEM_SLEEP": "0.2"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in racers)
    # one executes; the other is refused while it holds the lease (2), or finds the run already done (0)
    assert codes[0] == 0 and codes[1] in (0, 2), [p.stderr.read() for p in racers if p.stderr]
    rerun = Counter(executions(log)[before:])
    assert all(n == 1 for n in rerun.values()), rerun
    assert not completed & set(rerun)
    store = open_store(durable_url)
    assert store.get_run(run_id).status == "succeeded"
    assert sorted(r.unit for r in store.step_records(run_id) if r.iteration is not None
                  and r.status == "succeeded") == ITERATIONS


@pytest.mark.slow
def test_a_loop_ends_on_until_or_pauses_at_max_and_each_decision_continues_it(tmp_path, durable_cli, monkeypatch):
    """Through the CLI (in-process) on each backend: until ends a loop; max pauses it at its repeat gate, and
    approve, edit and retry each continue it (retry with a new round), no iteration running twice."""
    log = tmp_path / "steps.log"
    log.touch()
    monkeypatch.setenv("STEP_LOG", str(log))
    loop = str(FLOW / "loop.yaml")
    ended = durable_cli("run", loop, "--json")
    assert ended.exit_code == 0, ended.stderr
    assert ended.json()["output"] == "ESSAY V3"

    outputs = {}
    replacement = tmp_path / "draft.json"
    replacement.write_text(json.dumps({"text": "by hand", "score": 1, "revises": None}))
    for decision, target, extra in (("approve", "5", ()), ("edit", "5", ("--output", str(replacement))),
                                    ("retry", "2", ())):
        paused = durable_cli("run", loop, "--input", f"target={target}", "--json")
        assert paused.exit_code == 3, paused.stderr
        doc = paused.json()
        assert doc["paused_steps"] == ["draft"]
        decided = durable_cli(decision, doc["run_id"], "--step", "draft", *extra, "--json")
        assert decided.exit_code == 0, decided.stderr
        outputs[decision] = decided.json()["output"]
    assert outputs == {"approve": "ESSAY V4", "edit": "BY HAND", "retry": "ESSAY V7"}
    # three loops to max 4 and one round of three more after the retry; each iteration ran once
    assert Counter(executions(log)) == Counter(
        [*ITERATIONS[:3], *ITERATIONS[:4] * 3, *(f"draft#{n}" for n in (5, 6, 7)), *["publish"] * 4])
