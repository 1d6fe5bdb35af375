"""With ``--json`` stdout holds the JSON document and nothing else: what steps print (on the event loop,
on worker threads, in ``isolation: process`` children, in the evaluator) goes to stderr. Real processes,
so a child's own file descriptors are covered too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURES, REPO

PRINTING = str(FIXTURES / "printing.yaml")
SAID = ["said on the event loop", "said on a worker thread", "said in a child process", "said by the evaluator"]


def orchestrator(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args, "--db", str(db)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_run_json_keeps_what_steps_print_off_stdout(tmp_path: Path):
    done = orchestrator("run", PRINTING, "--json", db=tmp_path / "o.db")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert doc["status"] == "succeeded" and doc["output"] == {"score": 0.9}
    for line in SAID:
        assert line in done.stderr and line not in done.stdout


def test_a_decision_with_json_that_continues_the_run_prints_only_json(tmp_path: Path):
    db = tmp_path / "o.db"
    paused = orchestrator("run", PRINTING, "--input", "x=1", "--json", db=db)
    assert paused.returncode == 3, paused.stderr
    run_id = json.loads(paused.stdout)["run_id"]
    approved = orchestrator("approve", run_id, "--json", db=db)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "succeeded"
    assert "said in a child process" in approved.stderr and "approve recorded for step 'thread'" in approved.stderr


def test_without_json_step_output_stays_on_stdout(tmp_path: Path):
    done = orchestrator("run", PRINTING, db=tmp_path / "o.db")
    assert done.returncode == 0, done.stderr
    for line in SAID:
        assert line in done.stdout
