"""When the database misbehaves: a PostgreSQL server of the test's own is stopped and restarted, and
sessions are cut with ``pg_terminate_backend``, under real ``run``, ``resume`` and ``worker`` processes.
Executions are counted from the steps' own log, outside the processes.

What must hold: a transient error is retried with back-off on a fresh connection; a store error is
never the step's failure (past the retries the execution stops, hands its lease back and the run
stays resumable), and no message shows SQL or its parameters; one run's store error does not stop
a worker's other runs; a worker started before its database waits for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO
from tests.pg_cluster import PrivateCluster, private_cluster, wait_for  # noqa: F401  (a fixture)

WORKFLOW = FIXTURES / "db_chaos.py"
STEPS = ("s1", "s2", "s3", "s4", "s5")

pytestmark = pytest.mark.xdist_group("private_postgres_cluster")
"""The module's tests share one private server (``private_cluster`` is module-scoped): on one worker it is
initialised once, where spread over several each would ``initdb`` and start a server of its own."""


@pytest.fixture
def database(private_cluster: PrivateCluster, request: pytest.FixtureRequest) -> str:  # noqa: F811
    """A new database on the private server for this test; its URL names the test as application_name."""
    name = "t_" + str(abs(hash(request.node.nodeid)))[:12]
    with psycopg.connect(private_cluster.url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:{private_cluster.port}/{name}?application_name={quote(name)}"


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "STEP_LOG": str(tmp_path / "steps.log"), "PYTHONPATH": str(REPO), **extra}
    (tmp_path / "steps.log").touch()
    return env


def executions(tmp_path: Path) -> Counter[tuple[str, str]]:
    """(run id, step) -> how many times the step's code ran."""
    lines = (tmp_path / "steps.log").read_text().split()
    return Counter(zip(lines[0::2], lines[1::2], strict=True))


class Process:
    """An ``orchestrator`` command in a subprocess, its stderr in a file the test may read while it runs."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str], name: str = "") -> None:
        self.stderr_path = tmp_path / f"stderr-{args[0]}{name}.txt"
        with self.stderr_path.open("w") as stderr:
            self.proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=env, text=True,
                                         stdout=subprocess.DEVNULL, stderr=stderr)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait(self) -> int:
        return self.proc.wait(timeout=120)


def logged(tmp_path: Path, step: str) -> bool:
    return any(s == step for _, s in executions(tmp_path))


def test_a_record_written_while_the_server_restarts_is_written_once_it_is_back(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    hold = tmp_path / "go"
    env = environment(tmp_path, HOLD_STEP="s2", HOLD_FILE=str(hold))
    proc = Process(tmp_path, "run", str(WORKFLOW), "--input", "n=1", "--db", database, env=env)
    wait_for(lambda: logged(tmp_path, "s2"), "step s2 to start")
    private_cluster.stop()  # s2's record meets a server that is down, then restarting
    try:
        hold.touch()
        wait_for(lambda: "did not answer" in proc.stderr(), "the write to be retried")
    finally:
        private_cluster.start()
    assert proc.wait() == 0, proc.stderr()
    err = proc.stderr()
    assert "[SQL" not in err and "parameters" not in err
    ran = executions(tmp_path)
    assert sorted(step for _, step in ran) == list(STEPS) and set(ran.values()) == {1}
    (run_id,) = {run for run, _ in ran}
    store = open_store(database)
    try:
        assert store.get_run(run_id).status == "succeeded"
        assert [r.status for r in store.step_records(run_id)] == ["succeeded"] * 5
    finally:
        store.close()


@pytest.mark.slow
def test_a_server_away_past_the_retries_stops_the_run_resumable_and_no_message_shows_sql(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    hold = tmp_path / "go"
    env = environment(tmp_path, HOLD_STEP="s2", HOLD_FILE=str(hold), ORCHESTRATOR_DB_RETRY_SECONDS="1",
                      ORCHESTRATOR_LEASE_SECONDS="2")
    proc = Process(tmp_path, "run", str(WORKFLOW), "--input", "n=1", "--db", database, env=env)
    wait_for(lambda: logged(tmp_path, "s2"), "step s2 to start")
    private_cluster.stop()
    try:
        hold.touch()
        code = proc.wait()
    finally:
        private_cluster.start()
    err = proc.stderr()
    assert code == 1, err
    assert "[SQL" not in err and "parameters" not in err and "INSERT" not in err, err
    (run_id,) = {run for run, _ in executions(tmp_path)}
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and f"orchestrator resume {run_id}" in error_lines[0], err
    store = open_store(database)
    try:
        assert [r.step_id for r in store.step_records(run_id)] == ["s1"]  # s2's outcome was never a failure
        assert store.get_run(run_id).status in ("running", "interrupted") and store.get_run(run_id).error is None
        wait_for(lambda: store.get_run(run_id).status == "interrupted", "the lease to lapse", timeout=30)
    finally:
        store.close()
    resumed = subprocess.run([sys.executable, "-m", "orchestrator", "resume", run_id, "--db", database],
                             env={**env, "HOLD_STEP": ""}, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    ran = executions(tmp_path)
    assert ran[(run_id, "s1")] == 1 and ran[(run_id, "s2")] == 2  # s2 ran again: its record was never written
    assert all(ran[(run_id, s)] == 1 for s in ("s3", "s4", "s5"))


@pytest.mark.slow
def test_a_terminated_session_is_replaced_and_the_run_goes_on(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    hold = tmp_path / "go"
    env = environment(tmp_path, HOLD_STEP="s3", HOLD_FILE=str(hold))
    proc = Process(tmp_path, "run", str(WORKFLOW), "--input", "n=1", "--db", database, env=env)
    wait_for(lambda: logged(tmp_path, "s3"), "step s3 to start")
    assert private_cluster.terminate_backends(database.rsplit("=", 1)[1]) >= 1
    hold.touch()
    assert proc.wait() == 0, proc.stderr()
    assert sorted(executions(tmp_path).values()) == [1] * 5


@pytest.mark.slow
def test_one_runs_store_error_does_not_stop_the_workers_other_run(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    """Run n=1 holds in its step s2 while the server is away; run n=2's records meet the outage past the
    retries, so that run is handed back. The held run is not cancelled: once the server is back its
    step's record is written and it finishes in the same worker, each of its steps executed once."""
    hold = tmp_path / "go"
    env = environment(tmp_path, HOLD_STEP="s2", HOLD_FILE=str(hold), HOLD_N="1", CHAOS_SLEEP="0.2",
                      ORCHESTRATOR_DB_RETRY_SECONDS="1", ORCHESTRATOR_LEASE_SECONDS="3")
    store = open_store(database)
    try:
        from orchestrator.bind.loader import load_workflow
        from orchestrator.service.runner import enqueue_run

        workflow = load_workflow(WORKFLOW)
        held, other = (enqueue_run(store, workflow, {"n": n}) for n in (1, 2))
    finally:
        store.close()
    worker = Process(tmp_path, "worker", "--once", "--concurrency", "2", "--poll", "0.2", "--db", database, env=env)
    wait_for(lambda: executions(tmp_path)[(held, "s2")] == 1 and executions(tmp_path)[(other, "s2")] == 1,
             "both runs to reach s2")
    private_cluster.stop()
    try:
        wait_for(lambda: f"run {other} handed back" in worker.stderr(), "the other run to be handed back")
        assert worker.proc.poll() is None, worker.stderr()  # the worker lives on, and so does the held run
    finally:
        private_cluster.start()
    hold.touch()
    assert worker.wait() == 0, worker.stderr()
    ran = executions(tmp_path)
    assert [ran[(held, s)] for s in STEPS] == [1] * 5, ran  # never cancelled, never taken over
    assert all(ran[(other, s)] >= 1 for s in STEPS)
    store = open_store(database)
    try:
        assert store.get_run(held).status == "succeeded" and store.get_run(other).status == "succeeded"
    finally:
        store.close()


def test_a_worker_started_before_its_database_waits_for_it(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    store = open_store(database)
    try:
        from orchestrator.bind.loader import load_workflow
        from orchestrator.service.runner import enqueue_run

        run_id = enqueue_run(store, load_workflow(WORKFLOW), {"n": 5})
    finally:
        store.close()
    env = environment(tmp_path)
    private_cluster.stop()
    try:
        worker = Process(tmp_path, "worker", "--once", "--db", database, env=env)
        wait_for(lambda: worker.stderr().count("waiting for it") >= 2, "the worker to log two tries")
        assert worker.proc.poll() is None  # it waits; it did not exit 2
    finally:
        private_cluster.start()
    assert worker.wait() == 0, worker.stderr()
    assert "[SQL" not in worker.stderr()
    assert sorted(executions(tmp_path).values()) == [1] * 5
    store = open_store(database)
    try:
        assert store.get_run(run_id).status == "succeeded"
    finally:
        store.close()


@pytest.mark.slow
def test_chaos_workers_finish_every_run_with_each_step_once_through_restarts_and_cut_sessions(
        private_cluster: PrivateCluster, database: str, tmp_path: Path) -> None:  # noqa: F811
    """Two worker processes (two runs each at a time) over 8 queued runs of the 5-step chain; the server is
    stopped and restarted twice, and between the restarts every worker session is cut. The outages are
    shorter than the store's retries and the lease, so every step's code runs exactly once."""
    store = open_store(database)
    try:
        from orchestrator.bind.loader import load_workflow
        from orchestrator.service.runner import enqueue_run

        workflow = load_workflow(WORKFLOW)
        runs = [enqueue_run(store, workflow, {"n": n}) for n in range(8)]
    finally:
        store.close()
    env = environment(tmp_path, CHAOS_SLEEP="0.15", ORCHESTRATOR_DB_RETRY_SECONDS="30")
    workers = [Process(tmp_path, "worker", "--once", "--concurrency", "2", "--poll", "0.2", "--db", database,
                       env=env, name=str(i)) for i in range(2)]
    app = database.rsplit("=", 1)[1]
    done = 0
    for fault in ("restart", "terminate", "restart"):
        done += 8
        wait_for(lambda goal=done: sum(executions(tmp_path).values()) >= goal,  # type: ignore[misc]
                 f"{done} step executions before the {fault}")
        if fault == "terminate":
            assert private_cluster.terminate_backends(app) >= 1
        else:
            private_cluster.stop()
            try:
                wait_for(lambda: any("did not answer" in w.stderr() for w in workers), "a worker to meet the outage")
            finally:
                private_cluster.start()
    assert [w.wait() for w in workers] == [0, 0], [w.stderr() for w in workers]
    ran = executions(tmp_path)
    assert sorted(ran) == sorted((run, step) for run in runs for step in STEPS)
    assert set(ran.values()) == {1}, {key: n for key, n in ran.items() if n != 1}
    store = open_store(database)
    try:
        assert {store.get_run(run).status for run in runs} == {"succeeded"}
    finally:
        store.close()
