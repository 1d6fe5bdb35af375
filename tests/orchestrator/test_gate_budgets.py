"""Gates cannot hang a run: a gate that never returns is cut off at its budget (its own ``timeout:``, else
the step's ``timeout``) with a failed verdict naming the gate and the budget; blocking gates run off the
event loop, so Ctrl-C stops a run while one runs; the ``regex`` gate cannot backtrack for ever. Real
processes: the abandoned gate threads die with them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

DEADLINE = 120
"""Seconds any of these commands may take before the test calls it hung (they take about one)."""


def orchestrator(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args, "--db", str(db)], capture_output=True,
                          text=True, cwd=REPO, timeout=DEADLINE)


def only_gate(doc: dict) -> dict:
    (step,) = doc["steps"]
    (gate,) = step["gates"]
    return gate


def test_a_gate_that_never_returns_fails_at_its_own_timeout(tmp_path: Path):
    done = orchestrator("run", str(FIXTURES / "gate_budget_own.yaml"), "--json", db=tmp_path / "o.db")
    assert done.returncode == 3, done.stderr  # a failed verdict pauses, as any failing gate does
    gate = only_gate(json.loads(done.stdout))
    assert (gate["gate"], gate["passed"]) == ("sleeper", False)
    assert gate["reason"] == "gate 'sleeper' took longer than its budget of 0.5 s (its timeout)"


def test_without_its_own_timeout_a_gate_has_the_step_s(tmp_path: Path):
    done = orchestrator("run", str(FIXTURES / "gate_budget_step.yaml"), "--json", db=tmp_path / "o.db")
    assert done.returncode == 1, done.stderr  # on_gate_fail: fail
    doc = json.loads(done.stdout)
    assert only_gate(doc)["reason"] == "gate 'sleeper' took longer than its budget of 0.5 s (the step's timeout)"
    assert doc["status"] == "failed"


@pytest.mark.slow
def test_ctrl_c_stops_a_run_while_a_gate_runs(tmp_path: Path):
    started = tmp_path / "gate-started"
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "gate_forever.yaml"),
                                "--db", str(tmp_path / "o.db")], env={**os.environ, "GATE_STARTED": str(started)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + DEADLINE
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=DEADLINE)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted; run r" in stderr and "is resumable" in stderr


def test_a_backtracking_pattern_is_a_quick_verdict(tmp_path: Path):
    done = orchestrator("run", str(FIXTURES / "regex_backtrack.yaml"), "--json", db=tmp_path / "o.db")
    assert done.returncode == 3, done.stderr
    gate = only_gate(json.loads(done.stdout))
    assert gate["reason"] == "output 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' does not fully match pattern '^(a+)+$'"
