"""A worker's Prometheus metrics, scraped over HTTP from a real worker process while it runs a backlog."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import FIXTURES, REPO


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
        assert metrics['orchestrator_step_duration_seconds_count{workflow="gated"}'] == sum(steps.values())
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
