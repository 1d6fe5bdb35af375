"""A database that is not ours is never written to: every command on another application's database
(tables, none of the orchestrator's) is exit 2 in one line and leaves the file byte for byte as it
was; only ``run``, a worker and ``db upgrade`` create the orchestrator's schema, and only in an empty
database. Commands that only read do not even create it there.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

RUN_ID = "r0123456789abcdef01234567"

COMMANDS = {
    "runs": ("runs",),
    "show": ("show", RUN_ID),
    "trace": ("trace", RUN_ID),
    "stats": ("stats",),
    "report": ("report",),
    "review": ("review",),
    "resume": ("resume", RUN_ID),
    "approve": ("approve", RUN_ID),
    "reject": ("reject", RUN_ID),
    "label": ("label", RUN_ID, "--correct"),
    "attribute": ("attribute", RUN_ID, "--method", "trace"),
    "replay": ("replay", RUN_ID, "--from", "src"),
    "db revision": ("db", "revision"),
    "db upgrade": ("db", "upgrade"),
    "run": ("run", str(FIXTURES / "ok.yaml")),
    "run --queue": ("run", str(FIXTURES / "ok.yaml"), "--queue"),
    "worker": ("worker", "--once"),
}
"""Every command that opens a database, with what it needs besides."""


def app_database(path: Path, *, alembic: str | None = None) -> bytes:
    """Another application's SQLite file (with its own Alembic version table if ``alembic``); its bytes."""
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                       "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customers(id));"
                       "INSERT INTO customers (name) VALUES ('ann'), ('bob');"
                       "INSERT INTO orders (customer) VALUES (1);")
    if alembic is not None:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES (?)", (alembic,))
    conn.commit()
    conn.close()
    return path.read_bytes()


def files_beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_command_on_another_applications_database_is_exit_2_and_writes_nothing(cli, tmp_path, command) -> None:
    app_db = tmp_path / "app.db"
    before = app_database(app_db)
    result = cli(*command, "--db", str(app_db), db=False)
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: the database {app_db} is not an orchestrator database (it holds other tables: "
                     "customers, orders); nothing was written to it; check --db or ORCHESTRATOR_DB"], result.stderr
    assert app_db.read_bytes() == before
    assert files_beside(app_db) == ["app.db"]


def test_another_applications_alembic_version_is_not_taken_for_a_newer_orchestrator(cli, tmp_path) -> None:
    app_db = tmp_path / "app.db"
    before = app_database(app_db, alembic="3f2a9c1b7d4e")
    for command in (("runs",), ("run", str(FIXTURES / "ok.yaml")), ("db", "revision"), ("db", "upgrade")):
        result = cli(*command, "--db", str(app_db), db=False)
        assert result.exit_code == 2 and "is not an orchestrator database" in result.stderr, result.stderr
        assert "newer" not in result.stderr
    assert app_db.read_bytes() == before


def test_a_read_command_on_an_empty_database_creates_nothing_and_run_creates_the_schema(cli, tmp_path,
                                                                                       step_log) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for command in (("runs",), ("show", RUN_ID), ("stats",), ("approve", RUN_ID)):
        result = cli(*command, "--db", str(empty), db=False)
        assert result.exit_code == 2, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: the database {empty} is empty: nothing has run with this --db yet (check --db or "
            "ORCHESTRATOR_DB)"]
        assert empty.read_bytes() == b""
    ran = cli("run", str(FIXTURES / "ok.yaml"), "--db", str(empty), db=False)
    assert ran.exit_code == 0, ran.stderr
    assert cli("runs", "--db", str(empty), db=False).exit_code == 0


def test_run_on_a_missing_file_still_creates_the_database(cli, tmp_path, step_log) -> None:
    new = tmp_path / "sub" / "new.db"
    assert cli("run", str(FIXTURES / "ok.yaml"), "--db", str(new), db=False).exit_code == 0
    assert new.stat().st_size > 0


@pytest.mark.skipif(not os.environ.get("ORCHESTRATOR_TEST_PG_URL"), reason="ORCHESTRATOR_TEST_PG_URL is not set")
def test_another_applications_postgresql_schema_is_refused_and_left_alone(cli, postgres_url) -> None:
    import psycopg

    from orchestrator.store import normalize_url

    plain = normalize_url(postgres_url).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id serial PRIMARY KEY, name text)")
        conn.execute("INSERT INTO customers (name) VALUES ('ann')")
    for command in (("runs",), ("show", RUN_ID), ("run", str(FIXTURES / "ok.yaml")), ("db", "upgrade")):
        result = cli(*command, "--db", postgres_url, db=False)
        assert result.exit_code == 2, result.stderr
        assert "is not an orchestrator database (it holds other tables: customers)" in result.stderr
    with psycopg.connect(plain) as conn:
        tables = conn.execute("SELECT table_name FROM information_schema.tables "
                              "WHERE table_schema = current_schema()").fetchall()
    assert tables == [("customers",)]
