"""A database this command cannot use is bad input like any other: a read-only one is exit 2 with
one line (not a "database error", exit 1), ``db revision`` says when a newer orchestrator wrote the
database, and ``review`` on a path with no database refuses like the other read commands."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES


def _with_one_run(cli, path: Path) -> None:
    assert cli("run", str(FIXTURES / "ok.yaml"), "--db", f"sqlite:///{path}", db=False).exit_code == 0


def _runs_in(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_a_database_opened_read_only_is_exit_2_and_unchanged(cli, tmp_path):
    path = tmp_path / "runs.db"
    _with_one_run(cli, path)
    url = f"sqlite:///file:{path}?mode=ro"
    result = cli("run", str(FIXTURES / "ok.yaml"), "--db", url, db=False)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: the database file:{path} is read-only (attempt to write a readonly database): this command writes "
        "to it; check the file's permissions, or --db"]
    assert _runs_in(path) == 1
    assert cli("runs", "--db", url, db=False).exit_code == 0  # reading it is fine


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a file whatever its mode")
def test_a_read_only_database_file_is_exit_2(cli, tmp_path):
    path = tmp_path / "runs.db"
    _with_one_run(cli, path)
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        result = cli("run", str(FIXTURES / "ok.yaml"), "--db", f"sqlite:///{path}", db=False)
    finally:
        tmp_path.chmod(0o755)
    assert result.exit_code == 2
    assert "is read-only" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def _newer(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    return path


def test_db_revision_says_a_newer_orchestrator_wrote_the_database(cli, tmp_path):
    from orchestrator.store.migrate import HEAD_REVISION

    path = _newer(tmp_path)
    result = cli("db", "revision", "--db", str(path), db=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "stored: 9999", f"head:   {HEAD_REVISION}",
        f"a newer orchestrator wrote this database (schema 9999; this one knows revisions up to {HEAD_REVISION}): "
        "upgrade the package; `orchestrator db upgrade` cannot downgrade it"]
    assert "upgrade is pending" not in result.stdout
    as_json = cli("db", "revision", "--json", "--db", str(path), db=False).json()
    assert (as_json["stored"], as_json["current"], as_json["newer"]) == ("9999", False, True)
    assert cli("db", "revision", "--check", "--db", str(path), db=False).exit_code == 2


def test_db_revision_of_an_older_database_still_says_an_upgrade_is_pending(cli, tmp_path):
    path = tmp_path / "older.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    result = cli("db", "revision", "--db", str(path), db=False)
    assert "an upgrade is pending" in result.stdout
    assert cli("db", "revision", "--json", "--db", str(path), db=False).json()["newer"] is False
    assert cli("db", "revision", "--check", "--db", str(path), db=False).exit_code == 1


def test_review_on_a_path_with_no_database_creates_nothing(cli, tmp_path):
    path = tmp_path / "sub" / "orchestrator.db"
    result = cli("review", "--db", f"sqlite:///{path}", db=False)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: no database at {path}; nothing has run with this --db yet "
                                     "(check --db or ORCHESTRATOR_DB)")
    assert not (tmp_path / "sub").exists()
