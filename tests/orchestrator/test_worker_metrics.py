"""A worker's Prometheus metrics, scraped over HTTP from a real worker process while it runs a backlog."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO
from tests.store.test_sqlite_busy import hold_write_lock


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for every sample of a scrape (labels as Prometheus prints them)."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return samples(response.read().decode())


@pytest.mark.slow
def test_a_worker_serves_its_runs_steps_queue_and_waiting_runs_as_prometheus_metrics(durable_url, durable_cli):
    for x in (9, 9, 9, 1, 9, 1):  # x=1 pauses at its gate, x=9 succeeds
        queued = durable_cli("run", str(FIXTURES / "gated.yaml"), "--queue", "--input", f"x={x}", "--json")
        assert queued.exit_code == 0, queued.stderr
        assert queued.json()["status"] == "queued"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-m", "orchestrator", "worker", "--poll", "0.1",
                               "--metrics-port", str(port), "--db", durable_url],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics: dict[str, float] = {}
        for _ in range(600):  # until the backlog is worked off (or the worker died)
            assert worker.poll() is None, worker.communicate()[1]
            try:
                metrics = scrape(port)
            except OSError:  # not listening yet
                metrics = {}
            finished = sum(v for k, v in metrics.items() if k.startswith("orchestrator_runs_finished_total"))
            if finished == 6:
                break
            time.sleep(0.1)
        assert metrics['orchestrator_runs_finished_total{status="succeeded",workflow="gated"}'] == 4
        assert metrics['orchestrator_runs_finished_total{status="paused",workflow="gated"}'] == 2
        assert metrics['orchestrator_runs_started_total{workflow="gated"}'] == 6
        steps = {k: v for k, v in metrics.items() if k.startswith("orchestrator_steps_total")}
        assert steps['orchestrator_steps_total{status="gate_failed",workflow="gated"}'] == 2
        assert steps['orchestrator_steps_total{status="succeeded",workflow="gated"}'] >= 4
        durations = {k: v for k, v in metrics.items() if k.startswith("orchestrator_step_duration_seconds_count")}
        assert durations['orchestrator_step_duration_seconds_count{step="scored",workflow="gated"}'] == 6
        assert sum(durations.values()) == sum(steps.values())
        assert metrics["orchestrator_queue_depth"] == 0
        assert metrics["orchestrator_runs_awaiting_review"] == 2
        assert metrics["orchestrator_oldest_paused_run_age_seconds"] >= 0
        assert metrics["orchestrator_lease_takeovers_total"] == 0
        assert "orchestrator_store_retries_total" in metrics
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    assert re.search(rf"metrics at http://127\.0\.0\.1:{port}/metrics", stderr)


def test_a_metrics_port_that_is_taken_is_refused_with_exit_2(cli, db_url):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = cli("worker", "--once", "--metrics-port", str(port))
    assert res.exit_code == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in res.stderr and "Traceback" not in res.stderr


NAPPING_STEPS = '''
import os, time

def nap(x: int) -> int:
    with open(os.environ["NAPPING"], "w") as fh:
        fh.write("napping")
    time.sleep(float(os.environ["NAP"]))
    return x + 1
'''
NAPPING_WORKFLOW = """name: napping
inputs: {x: {type: integer, default: 1}}
steps:
  - {id: nap, run: 'napping_steps:nap', inputs: {x: $inputs.x}}
output: nap
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a dead holder is recognised through /proc")
def test_a_run_taken_over_from_an_executor_that_was_killed_counts_one_lease_takeover(tmp_path, db_url):
    """The executor is SIGKILLed mid-step, holding the run's lease (30 s of it left); a worker on this machine
    sees that its holder is gone, takes the run over at once, and its scrape counts the takeover."""
    (tmp_path / "napping_steps.py").write_text(NAPPING_STEPS)
    (tmp_path / "napping.yaml").write_text(NAPPING_WORKFLOW)
    napping = tmp_path / "napping.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NAPPING": str(napping), "NAP": "60",
           "ORCHESTRATOR_LEASE_SECONDS": "30"}
    cli = [sys.executable, "-m", "orchestrator"]
    killed = subprocess.Popen([*cli, "run", str(tmp_path / "napping.yaml"), "--db", db_url], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not napping.exists():  # until the step runs under the executor's lease
            assert killed.poll() is None, "the run ended before it was killed"
            time.sleep(0.02)
    finally:
        killed.kill()
        killed.wait(timeout=60)
    port = free_port()
    worker = subprocess.Popen([*cli, "worker", "--poll", "0.1", "--metrics-port", str(port), "--db", db_url],
                              env={**env, "NAP": "0"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics: dict[str, float] = {}
        succeeded = 'orchestrator_runs_finished_total{status="succeeded",workflow="napping"}'
        for _ in range(600):  # until the run taken over has ended (or the worker died)
            assert worker.poll() is None, worker.communicate()[1]
            try:
                metrics = scrape(port)
            except OSError:  # not listening yet
                metrics = {}
            if metrics.get(succeeded) == 1:
                break
            time.sleep(0.05)
        assert metrics[succeeded] == 1
        assert metrics["orchestrator_lease_takeovers_total"] == 1
        assert metrics['orchestrator_runs_started_total{workflow="napping"}'] == 1
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    assert "is gone; taking it over" in stderr


def test_the_retry_tallies_count_each_transient_error_and_each_call_tried_again(cli, store, db_url, tmp_path,
                                                                                 monkeypatch):
    """What the worker's store metrics report, on a SQLite database another connection holds locked: a store
    call refused with retrying off is a transient error nobody tried again; with retrying on, the run waits
    for the lock and each try again is counted."""
    from orchestrator.service.metrics import StoreReadings

    tallies = StoreReadings(store).retry_tallies
    gated = str(FIXTURES / "gated.yaml")
    assert cli("run", gated, "--input", "x=9").exit_code == 0  # the database exists, with its schema
    monkeypatch.setenv("ORCHESTRATOR_SQLITE_BUSY", "0")  # a locked database answers "locked" at once
    taken, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(tmp_path / "orchestrator.db", taken, release))
    holder.start()
    taken.wait()
    retrying = logging.getLogger("orchestrator.store")
    let_go = LetGoOnRetry(release)
    retrying.addHandler(let_go)
    try:
        before = tallies()
        monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "0")
        refused = cli("run", gated, "--input", "x=9")
        unretried = tallies()
        monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "60")
        waited = cli("run", gated, "--input", "x=9")  # the lock is let go at its first retry
        retried = tallies()
    finally:
        retrying.removeHandler(let_go)
        release.set()
        holder.join()
    assert refused.exit_code == 1 and "database is locked" in refused.stderr
    assert unretried.transient_errors > before.transient_errors and unretried.retries == before.retries
    assert waited.exit_code == 0, waited.stderr
    assert retried.retries > unretried.retries
    assert retried.transient_errors - unretried.transient_errors == retried.retries - unretried.retries


class LetGoOnRetry(logging.Handler):
    """Sets ``release`` when the store logs that it will try again."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(logging.WARNING)
        self.lock_released = release

    def emit(self, record: logging.LogRecord) -> None:
        if "did not answer" in record.getMessage():
            self.lock_released.set()
