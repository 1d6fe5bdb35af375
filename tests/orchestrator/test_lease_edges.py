"""A lease's edges, with real worker processes: a step never starts without its lease, and a step that
blocks the event loop cannot starve the renewals. Every step appends ``<step> <pid>`` to a side-effect
file before it acts, so executions are counted from outside the processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import enqueue_run
from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO

ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]

STEPS = '''
import os, signal, time
from pathlib import Path

def _log(what):
    with open(os.environ["SIDE"], "a") as fh:
        fh.write(f"{what} {os.getpid()}\\n")

stall = Path(os.environ.get("STALL_ONCE", "/nonexistent"))
if stall.exists():  # the first process to load the steps stops itself here: after its claim, before any step
    stall.unlink()
    _log("stalled")
    os.kill(os.getpid(), signal.SIGSTOP)

def first(x: int) -> int:
    _log("first")
    release = Path(os.environ["RELEASE"])
    while not release.exists():
        time.sleep(0.02)
    return x

def flaky(x: int, ctx) -> int:
    _log(f"flaky{ctx.attempt}")
    if ctx.attempt == 1:
        raise ConnectionError("the service hiccupped")
    return x

def hold(value: int) -> int:
    _log("hold")
    time.sleep(float(os.environ["HOLD"]))
    return value + 1
'''
WORKFLOW = """name: edges
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: first, run: 'edge_steps:first', inputs: {x: $inputs.x}}
  - {id: hold, run: 'edge_steps:hold', inputs: {value: first}, inline: true}
output: hold
"""


RETRIED = """name: retried
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: flaky, run: 'edge_steps:flaky', inputs: {x: $inputs.x}, inline: true, retry: {attempts: 2, backoff: 5}}
output: flaky
"""


def _setup(tmp_path: Path, *, hold: float, lease: float) -> tuple[Path, dict[str, str]]:
    (tmp_path / "edge_steps.py").write_text(STEPS)
    (tmp_path / "edges.yaml").write_text(WORKFLOW)
    (tmp_path / "retried.yaml").write_text(RETRIED)
    side = tmp_path / "side.txt"
    side.touch()
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(side), "HOLD": str(hold),
           "RELEASE": str(tmp_path / "release"), "STALL_ONCE": str(tmp_path / "stall"),
           "ORCHESTRATOR_LEASE_SECONDS": str(lease)}
    return tmp_path / "edges.yaml", env


def _side(env: dict[str, str]) -> list[tuple[str, int]]:
    return [(what, int(pid)) for what, pid in (line.split() for line in Path(env["SIDE"]).read_text().splitlines())]


def _wait_for(predicate, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _queue(workflow: Path, url: str) -> str:
    """Queue a run of ``workflow`` for the worker processes (from this process: queueing is not the point)."""
    store = open_store(url)
    try:
        return enqueue_run(store, load_workflow(workflow), {})
    finally:
        store.close()


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """A failing test still kills its workers (a stopped one would otherwise stay for ever)."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


def _worker(url: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*ORCHESTRATOR, "worker", "--poll", "0.05", "--db", url, *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    STARTED.append(proc)
    return proc


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.slow
def test_a_worker_stopped_after_its_claim_starts_no_step_once_another_holds_the_run(tmp_path, durable_url):
    """The first worker claims the run and is stopped (SIGSTOP) before any step starts; its lease lapses,
    a second worker takes the run over and is inside ``first`` when the first one continues (SIGCONT):
    the first one must find its lease gone before starting ``first`` again."""
    workflow, env = _setup(tmp_path, hold=0, lease=1)
    run_id = _queue(workflow, durable_url)
    Path(env["STALL_ONCE"]).touch()
    stalled = _worker(durable_url, env, "--once")
    store = open_store(durable_url)  # one store polled throughout: a store opened per poll holds a connection each
    _wait_for(lambda: _stopped(stalled.pid), "the first worker never stopped itself")
    _wait_for(lambda: store.get_run(run_id).status == "interrupted", "the lease never lapsed")

    other = _worker(durable_url, env)
    _wait_for(lambda: ("first", other.pid) in _side(env), "the second worker never started the run")
    stalled.send_signal(signal.SIGCONT)
    # with --once, the first worker exits once it gave the run up and found nothing else to claim
    _wait_for(lambda: stalled.poll() is not None or ("first", stalled.pid) in _side(env),
              "the first worker neither gave the run up nor started a step")
    Path(env["RELEASE"]).touch()
    _wait_for(lambda: store.get_run(run_id).status == "succeeded", "the run never finished")
    other.send_signal(signal.SIGTERM)
    for proc in (stalled, other):
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr

    assert [what for what, pid in _side(env) if pid == stalled.pid] == ["stalled"]  # it started no step
    assert [what for what, _ in _side(env)].count("first") == 1
    assert store.get_run(run_id).output == 2


@pytest.mark.slow
def test_a_worker_stopped_between_two_attempts_of_a_step_starts_no_retry_once_another_holds_the_run(
        tmp_path, durable_url):
    """The lease is confirmed before every attempt, not only a step's first: the first worker's attempt 1
    fails and is recorded, and the worker is stopped (SIGSTOP) while it waits out the retry's 5 s backoff.
    Its lease lapses, a second worker runs attempt 2 and finishes the run; continued (SIGCONT), the first
    worker must find its lease gone instead of starting attempt 2 again."""
    _, env = _setup(tmp_path, hold=0, lease=1)
    run_id = _queue(tmp_path / "retried.yaml", durable_url)
    store = open_store(durable_url)
    stalled = _worker(durable_url, env, "--once")
    _wait_for(lambda: [r.attempt for r in store.step_records(run_id)] == [1], "attempt 1 was never recorded")
    stalled.send_signal(signal.SIGSTOP)  # within the backoff: attempt 2 is seconds away
    assert _side(env) == [("flaky1", stalled.pid)]
    _wait_for(lambda: store.get_run(run_id).status == "interrupted", "the lease never lapsed")

    other = _worker(durable_url, env)
    _wait_for(lambda: store.get_run(run_id).status == "succeeded", "the second worker never finished the run")
    stalled.send_signal(signal.SIGCONT)
    _, stderr = stalled.communicate(timeout=60)  # --once: it exits once it gave the run up
    assert stalled.returncode == 0, stderr
    other.send_signal(signal.SIGTERM)
    _, stderr = other.communicate(timeout=60)
    assert other.returncode == 0, stderr

    assert _side(env) == [("flaky1", stalled.pid), ("flaky2", other.pid)]  # attempt 2 executed once
    assert [(r.attempt, r.status) for r in store.step_records(run_id)] == [(1, "failed"), (2, "succeeded")]
    assert store.get_run(run_id).output == 1


@pytest.mark.slow
def test_two_workers_execute_a_3s_inline_step_under_a_1s_lease_once(tmp_path, durable_url):
    """The inline step holds its worker's event loop for three leases; renewals come from a thread, so the
    other worker, polling all along, never takes the run over."""
    workflow, env = _setup(tmp_path, hold=3, lease=1)
    Path(env["RELEASE"]).touch()
    run_id = _queue(workflow, durable_url)
    workers = [_worker(durable_url, env) for _ in range(2)]
    store = open_store(durable_url)
    _wait_for(lambda: store.get_run(run_id).status == "succeeded", "the run never finished")
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr

    assert [what for what, _ in _side(env)] == ["first", "hold"]  # each step executed once
    assert store.get_run(run_id).output == 2


@pytest.mark.slow
def test_a_worker_takes_an_interrupted_run_over_before_a_backlog_of_400_queued_runs(tmp_path, durable_url):
    """Recovery does not wait for the queue: the first run a fresh worker claims is the one whose executor
    was killed, not the oldest of 400 queued runs (``benchmarks/chaos.py --backlog`` times it)."""
    workflow, env = _setup(tmp_path, hold=0, lease=1)
    killed_run = _queue(workflow, durable_url)
    killed = _worker(durable_url, env)
    _wait_for(lambda: ("first", killed.pid) in _side(env), "the first worker never started the run")
    killed.kill()
    killed.communicate(timeout=60)
    store = open_store(durable_url)
    bound = load_workflow(workflow)
    backlog = [enqueue_run(store, bound, {}) for _ in range(400)]
    _wait_for(lambda: store.get_run(killed_run).status == "interrupted", "the killed worker's lease never lapsed")
    Path(env["RELEASE"]).touch()

    fresh = _worker(durable_url, env, "--max-runs", "1")
    _, stderr = fresh.communicate(timeout=120)
    assert fresh.returncode == 0, stderr
    assert store.get_run(killed_run).status == "succeeded"
    assert {store.get_run(r).status for r in backlog} == {"queued"}


@pytest.mark.parametrize("seconds", ["inf", "nan", "1e300", "0"])
@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_lease_that_never_expires_is_refused_in_one_line_and_nothing_is_stored(cli, store, monkeypatch,
                                                                                   seconds, command):
    monkeypatch.setenv("ORCHESTRATOR_LEASE_SECONDS", seconds)
    args = ("run", str(FIXTURES / "ok.yaml")) if command == "run" else ("worker", "--once")
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: ORCHESTRATOR_LEASE_SECONDS={seconds!r} must be a number of seconds above 0 and at most 86400 "
        "(a day)"]
    assert set(store.count_rows().values()) == {0}
