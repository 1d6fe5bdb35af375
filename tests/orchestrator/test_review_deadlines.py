"""Timed-out reviews are found by their stored deadline, however many runs wait for a person.

Each paused run stores when its earliest ``review_timeout`` is due; an idle worker asks for the due ones
(an indexed query) instead of reading every paused run. Here two real worker processes share a database
with 1000 runs paused for a person (no timeout), a few older runs whose review times out, and a queue of
runs to execute: every step of every queued run executes once (counted from a side-effect file outside
the processes), and each timed-out review is decided once, oldest runs included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import enqueue_run, start_run
from orchestrator.store import Store, open_store
from tests.conftest import REPO

ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]

STEPS = '''
import os

def _log(what, ctx):
    with open(os.environ["SIDE"], "a") as fh:
        fh.write(f"{what} {ctx.run_id}\\n")

def never(output):
    return (False, "waits for a person")

def held(x: int) -> int:
    return x

def ask(x: int, ctx) -> int:
    _log("ask", ctx)
    return x

def after(value: int, ctx) -> int:
    _log("after", ctx)
    return value + 1

def a(x: int, ctx) -> int:
    _log("a", ctx)
    return x

def b(value: int, ctx) -> int:
    _log("b", ctx)
    return value + 1

def c(value: int, ctx) -> int:
    _log("c", ctx)
    return value + 1
'''
HELD = """name: held
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: held, run: 'deadline_steps:held', inputs: {x: $inputs.x}, gates: [{gate: 'deadline_steps:never'}]}
"""
TIMED = """name: timed
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: ask, run: 'deadline_steps:ask', inputs: {x: $inputs.x}, gates: [{gate: 'deadline_steps:never'}],
     review_timeout: 1, on_review_timeout: approve}
  - {id: after, run: 'deadline_steps:after', inputs: {value: ask}}
output: after
"""
WORK = """name: work
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: a, run: 'deadline_steps:a', inputs: {x: $inputs.x}}
  - {id: b, run: 'deadline_steps:b', inputs: {value: a}}
  - {id: c, run: 'deadline_steps:c', inputs: {value: b}}
output: c
"""
TIMED_RUNS, HELD_RUNS, QUEUED_RUNS = 5, 1000, 20
STARTERS = 8
"""Threads starting the held runs side by side, each on its own connection: a paused run costs a few
milliseconds of work but several commits, and on PostgreSQL the commits, not the work, are the time."""


def _start_paused(url: str, workflow: BoundWorkflow, count: int) -> list[str]:
    """Start ``count`` runs of ``workflow`` (each pauses at its gate) from STARTERS threads; their ids."""
    def start(share: int) -> list[str]:
        store = open_store(url)
        try:
            return [start_run(store, workflow, {}).run_id for _ in range(share)]
        finally:
            store.close()

    shares = [count // STARTERS + (i < count % STARTERS) for i in range(STARTERS)]
    with ThreadPoolExecutor(STARTERS) as pool:
        return [run_id for started in pool.map(start, shares) for run_id in started]


def held_statuses(store: Store) -> dict[str, str]:
    """Each held run's stored status, read in one query."""
    return {run.run_id: run.status for run in store.list_runs(workflow="held", limit=2 * HELD_RUNS)}


def _wait_for(predicate, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_two_workers_beside_1000_paused_runs_execute_each_step_once_and_decide_each_timed_out_review_once(
        tmp_path, durable_url, monkeypatch):
    (tmp_path / "deadline_steps.py").write_text(STEPS)
    for name, text in (("held", HELD), ("timed", TIMED), ("work", WORK)):
        (tmp_path / f"{name}.yaml").write_text(text)
    side = tmp_path / "side.txt"
    side.touch()
    monkeypatch.setenv("SIDE", str(side))
    store = open_store(durable_url)
    # the timed runs are the oldest paused runs: a scan of the newest would never reach them
    timed = [start_run(store, load_workflow(tmp_path / "timed.yaml"), {}).run_id for _ in range(TIMED_RUNS)]
    held_workflow = load_workflow(tmp_path / "held.yaml")
    held = [start_run(store, held_workflow, {}).run_id]  # its workflow is stored before the threads start
    held += _start_paused(durable_url, held_workflow, HELD_RUNS - 1)
    assert {store.get_run(r).status for r in timed} == {"paused"}
    assert held_statuses(store) == {run_id: "paused" for run_id in held}
    work_workflow = load_workflow(tmp_path / "work.yaml")
    queued = [enqueue_run(store, work_workflow, {}) for _ in range(QUEUED_RUNS)]

    env = {**os.environ, "PYTHONPATH": str(REPO), "ORCHESTRATOR_LEASE_SECONDS": "2"}
    workers = [subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.05", "--db", durable_url], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        _wait_for(lambda: all(store.get_run(r).status == "succeeded" for r in queued + timed),
                  "the queued runs or the timed-out reviews were not all finished")
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outcomes = [proc.communicate(timeout=60) for proc in workers]
    assert [proc.returncode for proc in workers] == [0, 0], [err for _, err in outcomes]

    executions = Counter(side.read_text().splitlines())
    expected = {f"{step} {r}" for r in queued for step in "abc"} | {f"{step} {r}" for r in timed
                                                                    for step in ("ask", "after")}
    assert set(executions) == expected
    assert set(executions.values()) == {1}  # every step of every run executed exactly once
    for run_id in timed:
        assert [(v.decision, v.reviewer) for v in store.reviews(run_id)] == [("approve", "review-timeout")]
        assert store.get_run(run_id).output == 2
    assert held_statuses(store) == {run_id: "paused" for run_id in held}
    assert store.reviews_of(held) == {}
