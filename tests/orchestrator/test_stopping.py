"""Stopping an executor on purpose, with real processes: a worker drains on SIGTERM (the steps in
flight finish and are recorded) and stops at once on a second signal; Ctrl-C stops `orchestrator run`
at once. Either way the run's lease is handed back, so `orchestrator resume` continues it at once
(leases last 30 s here: a lease left behind would make it exit 2), and completed steps never run again.

The workflow: ``first``, then a sync ``nap`` and an async ``anap`` side by side (each sleeps ``NAP``
seconds), then ``last``. Every step appends ``<step> start`` and ``<step> end`` to a side-effect file.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import enqueue_run
from orchestrator.store import open_store
from tests.conftest import REPO, _cli_on

ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]

STEPS = '''
import os, time
import anyio

def _log(what):
    with open(os.environ["SIDE"], "a") as fh:
        fh.write(what + "\\n")

def first(x: int) -> int:
    _log("first start")
    return x

def nap(value: int) -> int:
    _log("nap start")
    time.sleep(float(os.environ["NAP"]))
    _log("nap end")
    return value

async def anap(value: int) -> int:
    _log("anap start")
    await anyio.sleep(float(os.environ["NAP"]))
    _log("anap end")
    return value

def last(a: int, b: int) -> int:
    _log("last start")
    return a + b
'''
WORKFLOW = """name: naps
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: first, run: 'nap_steps:first', inputs: {x: $inputs.x}}
  - {id: nap, run: 'nap_steps:nap', inputs: {value: first}}
  - {id: anap, run: 'nap_steps:anap', inputs: {value: first}}
  - {id: last, run: 'nap_steps:last', inputs: {a: nap, b: anap}}
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "nap_steps.py").write_text(STEPS)
    (tmp_path / "naps.yaml").write_text(WORKFLOW)
    side = tmp_path / "side.txt"
    side.touch()
    return tmp_path / "naps.yaml", side


def _env(side: Path, nap: float) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(side), "NAP": str(nap),
            "ORCHESTRATOR_LEASE_SECONDS": "30"}


def _default_sigint() -> None:
    """A child started from a shell that ignores SIGINT would inherit that; Ctrl-C must reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lines(side: Path) -> list[str]:
    return side.read_text().splitlines()


def _wait_for(predicate, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _both_naps_started(side: Path) -> bool:
    return {"nap start", "anap start"} <= set(_lines(side))


def _queue(workflow: Path, url: str) -> str:
    """Queue a run of ``workflow`` for a worker process (from this process: queueing is not the point)."""
    store = open_store(url)
    try:
        return enqueue_run(store, load_workflow(workflow), {})
    finally:
        store.close()


def _resume_finishes(run_id: str, url: str, side: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``orchestrator resume RUN`` (in this process, without naps) finishes the run the stopped process left."""
    for name in ("SIDE", "NAP", "ORCHESTRATOR_LEASE_SECONDS"):
        monkeypatch.setenv(name, _env(side, 0)[name])
    resumed = _cli_on(url)("resume", run_id)
    assert resumed.exit_code == 0, resumed.stderr
    run = open_store(url).get_run(run_id)
    assert (run.status, run.output) == ("succeeded", 2)


def _stderr_lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
    threading.Thread(target=read, daemon=True).start()
    return lines


def _statuses(url: str, run_id: str) -> dict[str, str]:
    return {r.step_id: r.status for r in open_store(url).step_records(run_id, latest_only=True)}


@pytest.mark.slow
def test_sigterm_drains_a_worker_the_steps_in_flight_are_recorded_and_resume_finishes_the_run(
        tmp_path, durable_url, monkeypatch):
    workflow, side = _setup(tmp_path)
    env = _env(side, 2)
    run_id = _queue(workflow, durable_url)
    worker = subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.1", "--db", durable_url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _both_naps_started(side), "the naps never started")
    worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=60)

    assert worker.returncode == 0, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"worker stopped by SIGTERM: 0 run(s) executed, 1 handed back ({run_id}: `orchestrator resume RUN` or any "
        "worker continues them)")
    assert _statuses(durable_url, run_id) == {"first": "succeeded", "nap": "succeeded", "anap": "succeeded"}
    assert open_store(durable_url).get_run(run_id).status == "interrupted"  # resumable, not held

    _resume_finishes(run_id, durable_url, side, monkeypatch)
    assert sorted(_lines(side)) == sorted(["first start", "nap start", "nap end", "anap start", "anap end",
                                           "last start"])  # every step executed exactly once


@pytest.mark.slow
def test_a_second_sigterm_stops_the_worker_at_once_and_still_hands_the_lease_back(
        tmp_path, durable_url, monkeypatch):
    workflow, side = _setup(tmp_path)
    env = _env(side, 60)
    run_id = _queue(workflow, durable_url)
    worker = subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.1", "--db", durable_url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr = _stderr_lines(worker)
    _wait_for(lambda: _both_naps_started(side), "the naps never started")
    worker.send_signal(signal.SIGTERM)
    assert stderr.get(timeout=60).startswith("SIGTERM: draining 1 run(s)")
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)  # the naps would take 60 s

    assert worker.returncode == 130
    assert stderr.get(timeout=10).startswith("worker stopped at once by a second signal (steps in flight "
                                             "abandoned): 0 run(s) executed, 1 handed back")
    assert _statuses(durable_url, run_id) == {"first": "succeeded"}  # the abandoned naps left no record
    assert open_store(durable_url).get_run(run_id).status == "interrupted"

    _resume_finishes(run_id, durable_url, side, monkeypatch)
    lines = _lines(side)
    assert [lines.count(s) for s in ("first start", "nap start", "anap start", "last start")] == [1, 2, 2, 1]


@pytest.mark.slow
def test_ctrl_c_stops_a_run_at_once_names_it_and_resume_finishes_it(
        tmp_path, durable_url, monkeypatch):
    workflow, side = _setup(tmp_path)
    proc = subprocess.Popen([*ORCHESTRATOR, "run", str(workflow), "--db", durable_url], env=_env(side, 60),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    _wait_for(lambda: _both_naps_started(side), "the naps never started")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)  # the naps would take 60 s

    store = open_store(durable_url)
    run_id = store.list_runs()[0].run_id
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"error: interrupted; run {run_id} is resumable: `orchestrator resume {run_id}` finishes it without "
        "re-running its completed steps")
    assert store.get_run(run_id).status == "interrupted"  # the lease was handed back
    assert _statuses(durable_url, run_id) == {"first": "succeeded"}

    _resume_finishes(run_id, durable_url, side, monkeypatch)
    lines = _lines(side)
    assert [lines.count(s) for s in ("first start", "nap start", "anap start", "last start")] == [1, 2, 2, 1]


@pytest.mark.slow
def test_sigterm_stops_a_run_like_ctrl_c_exits_143_and_resume_takes_it_at_once(
        tmp_path, durable_url, monkeypatch):
    """SIGTERM is what `docker stop`, systemd and CI timeouts send: the lease is handed back as on Ctrl-C,
    so an immediate resume is not refused for the rest of the lease (30 s here)."""
    workflow, side = _setup(tmp_path)
    proc = subprocess.Popen([*ORCHESTRATOR, "run", str(workflow), "--db", durable_url], env=_env(side, 60),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _both_naps_started(side), "the naps never started")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)  # the naps would take 60 s

    store = open_store(durable_url)
    run_id = store.list_runs()[0].run_id
    assert proc.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"error: terminated (SIGTERM); run {run_id} is resumable: `orchestrator resume {run_id}` finishes it "
        "without re-running its completed steps")
    assert store.get_run(run_id).status == "interrupted"
    _resume_finishes(run_id, durable_url, side, monkeypatch)
    lines = _lines(side)
    assert [lines.count(s) for s in ("first start", "nap start", "anap start", "last start")] == [1, 2, 2, 1]


LINGERING_STEP = '''
import os, threading, time
from pathlib import Path

def linger(x: int) -> int:
    """Leaves a thread that keeps the process from exiting (as a library's exporter thread may)."""
    release = Path(os.environ["RELEASE"])

    def wait() -> None:
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    threading.Thread(target=wait, daemon=False).start()
    with open(os.environ["SIDE"], "a") as fh:
        fh.write("linger start\\n")
    return x
'''


@pytest.mark.slow
def test_a_second_sigterm_after_the_drain_finished_exits_130(tmp_path, durable_url):
    """The drain is over (the summary is printed) but the process still waits, here for a thread a step
    left running; a second SIGTERM then stops it at once with the documented 130, never by the default
    action (-15) nor with the 0 of the first signal's drain."""
    (tmp_path / "linger_steps.py").write_text(LINGERING_STEP)
    workflow = tmp_path / "linger.yaml"
    workflow.write_text("name: linger\ninputs: {x: {type: integer, default: 1}}\n"
                        "steps:\n  - {id: linger, run: 'linger_steps:linger', inputs: {x: $inputs.x}}\n")
    side = tmp_path / "side.txt"
    side.touch()
    env = {**_env(side, 0), "RELEASE": str(tmp_path / "release")}
    run_id = _queue(workflow, durable_url)
    worker = subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.1", "--db", durable_url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_store(durable_url)
    try:
        stderr = _stderr_lines(worker)
        _wait_for(lambda: store.get_run(run_id).status == "succeeded", "the run never finished")
        worker.send_signal(signal.SIGTERM)
        assert stderr.get(timeout=60).startswith("SIGTERM: draining 0 run(s)")
        assert stderr.get(timeout=60).startswith("worker stopped by SIGTERM: 1 run(s) executed, 0 handed back")
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)  # the lingering thread would hold it for 60 s
    finally:
        (tmp_path / "release").touch()
        worker.kill()
        worker.communicate(timeout=60)

    assert worker.returncode == 130
    assert _lines(side) == ["linger start"]
