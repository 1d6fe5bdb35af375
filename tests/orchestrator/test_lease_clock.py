"""Leases are judged by the database's clock: on PostgreSQL a host whose clock runs fast cannot see a
live lease as expired. The hosts are real processes; the fast one has ``time.time`` moved 20 s ahead
before the command starts. Executions are counted from the steps' own log, outside the processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO
from tests.pg_cluster import wait_for

pytestmark = pytest.mark.skipif(not os.environ.get("ORCHESTRATOR_TEST_PG_URL"),
                                reason="ORCHESTRATOR_TEST_PG_URL is not set; no PostgreSQL to test")

WORKFLOW = FIXTURES / "db_chaos.py"
AHEAD = 20.0

FAST_HOST = (f"import sys, time; real = time.time; time.time = lambda: real() + {AHEAD}; "
             "sys.argv[0] = 'orchestrator'; from orchestrator.cli import main; main()")
"""``orchestrator ARGS...`` on a host whose clock is ``AHEAD`` seconds fast."""


def executions(log: Path) -> Counter[tuple[str, str]]:
    words = log.read_text().split()
    return Counter(zip(words[0::2], words[1::2], strict=True))


@pytest.mark.slow
def test_a_host_whose_clock_is_20_s_fast_does_not_take_over_a_live_15_s_lease(
        postgres_url: str, tmp_path: Path) -> None:
    log, hold = tmp_path / "steps.log", tmp_path / "go"
    log.touch()
    env = {**os.environ, "STEP_LOG": str(log), "HOLD_STEP": "s2", "HOLD_FILE": str(hold), "PYTHONPATH": str(REPO),
           "ORCHESTRATOR_LEASE_SECONDS": "15"}
    with (tmp_path / "holder.txt").open("w") as holder_err:
        holder = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(WORKFLOW), "--input", "n=1",
                                   "--db", postgres_url], env=env, stdout=subprocess.DEVNULL, stderr=holder_err)
    try:
        wait_for(lambda: any(step == "s2" for _, step in executions(log)), "the holder to reach s2")
        ((run_id, _),) = {key for key in executions(log) if key[1] == "s1"}
        clock_check = subprocess.run([sys.executable, "-c", FAST_HOST.replace(
            "from orchestrator.cli import main; main()", "print(time.time() - real())")],
            capture_output=True, text=True, env=env, timeout=60)
        assert float(clock_check.stdout) == pytest.approx(AHEAD, abs=1)  # the fast host's clock really is fast

        fast = subprocess.run([sys.executable, "-c", FAST_HOST, "resume", run_id, "--db", postgres_url],
                              capture_output=True, text=True, env=env, timeout=120)
        assert fast.returncode == 2, fast.stderr
        assert f"run {run_id} is being executed by" in fast.stderr
        fast_worker = subprocess.run([sys.executable, "-c", FAST_HOST, "worker", "--once", "--db", postgres_url],
                                     capture_output=True, text=True, env=env, timeout=120)
        assert fast_worker.returncode == 0, fast_worker.stderr
        assert executions(log)[(run_id, "s2")] == 1  # neither took the run over
    finally:
        hold.touch()
        assert holder.wait(timeout=120) == 0, (tmp_path / "holder.txt").read_text()
    assert executions(log) == Counter({(run_id, step): 1 for step in ("s1", "s2", "s3", "s4", "s5")})
    store = open_store(postgres_url)
    try:
        run = store.get_run(run_id)
        assert run.status == "succeeded" and run.owner is None
    finally:
        store.close()
