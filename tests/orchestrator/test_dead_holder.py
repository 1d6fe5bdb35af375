"""A run whose executor was killed on this machine is resumed at once, not after its lease: the lease
names its holder's pid and start time, and a holder whose process is gone (or whose pid now belongs to
a process started later) holds nothing. Leases last 30 s here, so waiting one out would fail the tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.engine.leases.holder import holder_name, this_holder
from orchestrator.service.runner import enqueue_run
from orchestrator.store import Lease, open_store
from tests.conftest import REPO, Result, _cli_on

ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a holder's process is read from /proc")

STEPS = '''
import os, time

def _log(what):
    with open(os.environ["SIDE"], "a") as fh:
        fh.write(what + "\\n")

def first(x: int) -> int:
    _log("first")
    return x

def nap(value: int) -> int:
    _log("nap")
    time.sleep(float(os.environ["NAP"]))
    return value + 1
'''
WORKFLOW = """name: killed
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: first, run: 'killed_steps:first', inputs: {x: $inputs.x}}
  - {id: nap, run: 'killed_steps:nap', inputs: {value: first}}
output: nap
"""


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "killed_steps.py").write_text(STEPS)
    (tmp_path / "killed.yaml").write_text(WORKFLOW)
    side = tmp_path / "side.txt"
    side.touch()
    return tmp_path / "killed.yaml", {**os.environ, "PYTHONPATH": str(REPO), "SIDE": str(side), "NAP": "60",
                                      "ORCHESTRATOR_LEASE_SECONDS": "30"}


def _wait_for(predicate, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _resume(run_id: str, url: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Result:
    """``orchestrator resume RUN --json`` from this process (not the dead holder's), without the nap."""
    for name in ("SIDE", "ORCHESTRATOR_LEASE_SECONDS"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("NAP", "0")
    return _cli_on(url)("resume", run_id, "--json")


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
@pytest.mark.slow
def test_resume_takes_the_run_of_a_sigkilled_run_at_once(tmp_path, durable_url, reaped, monkeypatch):
    """SIGKILL leaves the lease with 30 s to run; resume right after takes the run and finishes it, and
    the step that completed before the kill is not executed again (also while the killed process is still
    a zombie its parent has not reaped)."""
    workflow, env = _setup(tmp_path)
    killed = subprocess.Popen([*ORCHESTRATOR, "run", str(workflow), "--db", durable_url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: Path(env["SIDE"]).read_text().splitlines() == ["first", "nap"], "the nap never started")
        store = open_store(durable_url)
        [run] = store.list_runs()
        killed.send_signal(signal.SIGKILL)
        if reaped:
            killed.wait(timeout=60)
        else:
            _wait_for(lambda: Path(f"/proc/{killed.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                      "the killed process never became a zombie")
        assert store.get_run(run.run_id).status == "running"  # its lease has about 30 s to run

        resumed = _resume(run.run_id, durable_url, env, monkeypatch)
    finally:
        killed.kill()
        killed.communicate(timeout=60)
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == 2
    assert Path(env["SIDE"]).read_text().splitlines() == ["first", "nap", "nap"]  # first ran once


@pytest.mark.slow
def test_a_holder_whose_pid_now_belongs_to_a_later_process_holds_nothing(tmp_path, durable_url, monkeypatch):
    """The pid of a dead holder may be given to a new process; its start time tells them apart, so a
    holder naming a living pid with another start time is gone, and one naming it exactly is alive."""
    workflow, env = _setup(tmp_path)
    with closing(open_store(durable_url)) as queueing:
        run_id = enqueue_run(queueing, load_workflow(workflow), {})
    living = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        name, identity = this_holder().rsplit(":", 1)[0], this_holder().split("#", 1)[1]
        start, machine = identity.split("@")
        exact = Lease(run_id, holder=_holder_of(living.pid, machine), token="t-exact", seconds=30)
        reused = Lease(run_id, holder=f"{name}:{living.pid}#{int(start) - 1}@{machine}", token="t-reused",
                       seconds=30)
        store = open_store(durable_url)

        assert store.acquire_lease(exact, statuses=("queued",))
        refused = _resume(run_id, durable_url, env, monkeypatch)
        assert refused.exit_code == 2
        assert f"is being executed by {holder_name(exact.holder)} (its lease runs" in refused.stderr

        store.renew_lease(Lease(run_id, exact.holder, exact.token, 0.0))  # hand it back, then hold it as the
        assert store.acquire_lease(reused, statuses=("running",))         # same pid started at another time
        resumed = _resume(run_id, durable_url, env, monkeypatch)
        assert resumed.exit_code == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == 2
    finally:
        living.kill()
        living.wait(timeout=60)


def _holder_of(pid: int, machine: str) -> str:
    """How a lease held by process ``pid`` of this machine names it."""
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return f"{this_holder().rsplit(':', 1)[0]}:{pid}#{start}@{machine}"


@pytest.mark.slow
def test_a_worker_takes_over_the_run_of_a_sigkilled_process_at_once(tmp_path, durable_url):
    """A worker that finds nothing queued ends the leases of holders of this machine that are gone, so the
    run of a killed `run` is recovered now: with 30 s still on the lease, `worker --once` finishes it, and the
    step that completed before the kill is not executed again."""
    workflow, env = _setup(tmp_path)
    killed = subprocess.Popen([*ORCHESTRATOR, "run", str(workflow), "--db", durable_url], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: Path(env["SIDE"]).read_text().splitlines() == ["first", "nap"], "the nap never started")
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        store = open_store(durable_url)
        [run] = store.list_runs()
        assert store.get_run(run.run_id).status == "running"  # its lease has about 30 s to run

        worked = subprocess.run([*ORCHESTRATOR, "worker", "--once", "--db", durable_url], env={**env, "NAP": "0"},
                                capture_output=True, text=True, timeout=60)
    finally:
        killed.kill()
        killed.wait(timeout=60)
    assert worked.returncode == 0, worked.stderr
    assert f"run {run.run_id}: its holder" in worked.stderr and "is gone; taking it over" in worked.stderr
    assert store.get_run(run.run_id).status == "succeeded"
    assert Path(env["SIDE"]).read_text().splitlines() == ["first", "nap", "nap"]  # first ran once
