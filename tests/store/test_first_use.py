"""First use is idempotent under concurrency: many processes opening a new database at once.

Eight ``orchestrator run`` processes start on a database nobody has opened: each creates the schema
if it finds none and registers the same workflow version. All eight must succeed, leaving one
schema (at the head revision), one workflow row and eight runs, on SQLite and on PostgreSQL. Then
eight more start a workflow the (now existing) database has not seen: one more workflow row, eight
more runs. The processes import everything first and wait at a start line, so their first
statements race. The start line, not repetition, is what makes them race, so each backend is tried on
one fresh database: more rounds would only raise the odds at eight processes' cost each.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.migrate import HEAD_REVISION
from tests.conftest import FIXTURES, REPO
from tests.store.conftest import PG_ENV

PROCESSES = 8

LAUNCHER = """
import sys, time
from pathlib import Path
from orchestrator.cli import main
from orchestrator.store import sql, sqlite  # noqa: F401  (imported before the start line, not after)
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.002)
sys.argv = ["orchestrator", *sys.argv[3:]]
main()
"""
"""A process that imports the CLI, says it is ready, waits for the start line, then runs the command."""


FIRST_WORKFLOW = FIXTURES / "ok.yaml"
SECOND_WORKFLOW = REPO / "tests" / "fixtures" / "release_db" / "release_fixture.yaml"
SECOND_INPUTS = ("--input", "topic=first-use")


def run_together(tmp: Path, url: str, workflow: Path, *inputs: str) -> list[subprocess.CompletedProcess[str]]:
    """Start PROCESSES ``orchestrator run WORKFLOW [INPUTS] --db URL`` at once; their results."""
    tmp.mkdir()
    go = tmp / "go"
    env = {**{k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}, "PYTHONPATH": str(REPO)}
    procs = []
    for i in range(PROCESSES):
        ready = tmp / f"ready-{i}"
        procs.append((ready, subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(ready), str(go), "run", str(workflow), *inputs, "--db", url],
            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    try:
        while not all(ready.exists() or proc.poll() is not None for ready, proc in procs):
            time.sleep(0.01)
        go.touch()
        results = []
        for _ready, proc in procs:
            stdout, stderr = proc.communicate(timeout=300)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
        return results
    finally:
        for _ready, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def assert_all_succeeded(results: list[subprocess.CompletedProcess[str]]) -> None:
    failures = [f"exit {r.returncode}: {r.stderr.strip() or r.stdout.strip()}" for r in results if r.returncode]
    assert failures == []


def counts(conn: Any) -> tuple[int, int, list[tuple[str]]]:
    """(workflow rows, succeeded runs, the alembic_version rows) through a DBAPI connection."""
    workflows = conn.execute("SELECT count(*) FROM workflows").fetchone()[0]
    succeeded = conn.execute("SELECT count(*) FROM runs WHERE status = 'succeeded'").fetchone()[0]
    return workflows, succeeded, [tuple(r) for r in conn.execute("SELECT version_num FROM alembic_version")]


@pytest.mark.slow
def test_eight_processes_create_a_new_sqlite_database_together(tmp_path: Path) -> None:
    db = tmp_path / "first-use.db"
    url = f"sqlite:///{db}"
    assert_all_succeeded(run_together(tmp_path / "first", url, FIRST_WORKFLOW))
    with closing(sqlite3.connect(db)) as conn:
        assert counts(conn) == (1, PROCESSES, [(HEAD_REVISION,)])
    assert_all_succeeded(run_together(tmp_path / "second", url, SECOND_WORKFLOW, *SECOND_INPUTS))
    with closing(sqlite3.connect(db)) as conn:
        assert counts(conn) == (2, 2 * PROCESSES, [(HEAD_REVISION,)])


@pytest.fixture
def new_postgres_database() -> Iterator[Callable[[], str]]:
    """A factory of brand-new PostgreSQL databases (each dropped at teardown), as URLs."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set; set it to a PostgreSQL URL (e.g. "
                    "postgresql://postgres@127.0.0.1:5432/test) to test first use on PostgreSQL")
    import psycopg
    from sqlalchemy.engine import make_url

    created: list[str] = []

    def create() -> str:
        name = f"orchestrator_first_use_{secrets.token_hex(4)}"
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return make_url(base).set(database=name).render_as_string(hide_password=False)

    yield create
    with psycopg.connect(base, autocommit=True) as admin:
        for name in created:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
def test_eight_processes_create_a_new_postgresql_database_together(tmp_path: Path, new_postgres_database) -> None:
    import psycopg

    url = new_postgres_database()
    assert_all_succeeded(run_together(tmp_path / "first", url, FIRST_WORKFLOW))
    with psycopg.connect(url) as conn:
        assert counts(conn) == (1, PROCESSES, [(HEAD_REVISION,)])
    assert_all_succeeded(run_together(tmp_path / "second", url, SECOND_WORKFLOW, *SECOND_INPUTS))
    with psycopg.connect(url) as conn:
        assert counts(conn) == (2, 2 * PROCESSES, [(HEAD_REVISION,)])
