"""A sync step that outlives its timeout: recorded as timed out, its late output discarded, and the
command exits promptly (the abandoned thread does not keep the process alive)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from orchestrator.store import open_store
from tests.conftest import REPO

STEPS = '''
import os, time
def nap(x: int) -> int:
    time.sleep(float(os.environ.get("NAP", "6")))
    open(os.environ["SIDE"], "a").write("late\\n")
    return x
'''
WORKFLOW = """name: slow
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: nap, run: 'slow_steps:nap', inputs: {x: $inputs.x}, timeout: 0.5}
"""


def test_a_sync_step_past_its_timeout_is_recorded_and_the_process_exits_promptly(tmp_path):
    (tmp_path / "slow_steps.py").write_text(STEPS)
    (tmp_path / "slow.yaml").write_text(WORKFLOW)
    side = tmp_path / "side.txt"
    db = f"sqlite:///{tmp_path / 'o.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(side), "NAP": "120"}
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "slow.yaml"), "--db", db],
                          env=env, capture_output=True, text=True, timeout=100)  # waiting for the nap: a hang
    assert proc.returncode == 1
    assert "step 'nap' timed out after 0.5 s" in proc.stdout
    assert not side.exists()  # the process ended before the step's late side effect
    records = open_store(db).step_records(open_store(db).list_runs()[0].run_id)
    assert [(r.status, r.error_type, r.output) for r in records] == [("failed", "TimeoutError", None)]


def test_an_isolated_step_is_killed_on_timeout_and_its_side_effect_never_happens(tmp_path):
    (tmp_path / "slow_steps.py").write_text(STEPS)
    (tmp_path / "slow.yaml").write_text(WORKFLOW.replace("timeout: 0.5}", "timeout: 2, isolation: process}"))
    side = tmp_path / "side.txt"
    db = f"sqlite:///{tmp_path / 'o.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(side), "NAP": "4"}
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "slow.yaml"), "--db", db],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "step 'nap' timed out after 2 s" in proc.stdout
    time.sleep(3)  # past the moment the step would have written its side effect
    assert not side.exists()


def test_an_isolated_step_returns_its_output_and_reports_its_errors_by_type(tmp_path):
    (tmp_path / "slow_steps.py").write_text(STEPS + "\ndef boom(x: int, ctx) -> int:\n"
                                            "    raise KeyError(f'{ctx.step_id} T-{x}')\n")
    (tmp_path / "ok.yaml").write_text(WORKFLOW.replace("timeout: 0.5}", "timeout: 30, isolation: process}"))
    (tmp_path / "boom.yaml").write_text(WORKFLOW.replace("slow_steps:nap", "slow_steps:boom")
                                        .replace("timeout: 0.5}", "isolation: process}"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(tmp_path / "side.txt"), "NAP": "0"}
    ok = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "ok.yaml"), "--input", "x=7",
                         "--db", db, "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert __import__("json").loads(ok.stdout)["output"] == 7
    boom = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "boom.yaml"), "--input",
                           "x=99", "--db", db, "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert boom.returncode == 1
    assert __import__("json").loads(boom.stdout)["steps"][0]["error"] == "KeyError: 'nap T-99'"


ASYNC_STEPS = '''
import asyncio, os, time

async def swallows(x: int) -> int:
    """Catches its cancellation and returns anyway, late."""
    try:
        await asyncio.sleep(3)
    except asyncio.CancelledError:
        pass
    time.sleep(0.3)
    open(os.environ["SIDE"], "a").write("swallows returned\\n")
    return x

async def blocks(x: int) -> int:
    """Never yields: its deadline cannot fire while it runs."""
    time.sleep(3)
    open(os.environ["SIDE"], "a").write("blocks returned\\n")
    return x

async def behaves(x: int) -> int:
    await asyncio.sleep(0.2)
    return x
'''


def _async_step_run(tmp_path, function: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "async_steps.py").write_text(ASYNC_STEPS)
    (tmp_path / "wf.yaml").write_text(WORKFLOW.replace("slow_steps:nap", f"async_steps:{function}")
                                      .replace("timeout: 0.5}", "timeout: 1}"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(tmp_path / "side.txt")}
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "wf.yaml"), "--input", "x=5",
                           "--db", db, "--json"], env=env, capture_output=True, text=True, timeout=60)
    return proc, __import__("json").loads(proc.stdout)


def test_an_async_step_that_swallows_its_cancellation_is_timed_out_and_its_late_output_discarded(tmp_path):
    proc, doc = _async_step_run(tmp_path, "swallows")
    assert proc.returncode == 1, proc.stderr
    step = doc["steps"][0]
    assert (step["status"], step["output"]) == ("failed", None)
    assert step["error"] == ("TimeoutError: step 'nap' timed out after 1 s: it ignored its cancellation and "
                             "returned late; its output is discarded")
    assert (tmp_path / "side.txt").read_text() == "swallows returned\n"  # it did return, after its deadline


def test_an_async_step_that_blocks_the_event_loop_is_timed_out_naming_the_block(tmp_path):
    proc, doc = _async_step_run(tmp_path, "blocks")
    assert proc.returncode == 1, proc.stderr
    step = doc["steps"][0]
    assert (step["status"], step["output"]) == ("failed", None)
    assert step["error"].startswith("TimeoutError: step 'nap' timed out after 1 s: the event loop was blocked for 3.")
    assert step["error"].endswith(" s: the step did not yield; use a sync step or isolation: process")
    assert (tmp_path / "side.txt").read_text() == "blocks returned\n"
    shown = subprocess.run([sys.executable, "-m", "orchestrator", "show", doc["run_id"], "--db",
                            f"sqlite:///{tmp_path / 'o.db'}"], env={**os.environ, "PYTHONPATH": str(REPO),
                                                                   "COLUMNS": "300"},
                           capture_output=True, text=True, timeout=60)
    assert "the event loop was blocked for 3." in shown.stdout


def test_a_well_behaved_async_step_within_its_timeout_succeeds(tmp_path):
    proc, doc = _async_step_run(tmp_path, "behaves")
    assert proc.returncode == 0, proc.stderr
    assert (doc["status"], doc["output"], doc["steps"][0]["error"]) == ("succeeded", 5, None)
