"""``ORCHESTRATOR_SQLITE_BUSY``: how long a SQLite statement waits for another connection's write lock.

A bad value is refused in one line (exit 2) before anything is written; 0 makes a locked database
fail at once; a wait longer than the lock is held lets the run through."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

GATED = str(FIXTURES / "gated.yaml")


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan", "100000"])
def test_a_bad_busy_timeout_is_one_line_exit_2_and_creates_no_database(cli, db_url: str, tmp_path: Path,
                                                                        monkeypatch, value: str):
    monkeypatch.setenv("ORCHESTRATOR_SQLITE_BUSY", value)

    result = cli("run", GATED, "--input", "x=9")

    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert f"ORCHESTRATOR_SQLITE_BUSY={value!r}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "orchestrator.db").exists()


def hold_write_lock(path: Path, taken: threading.Event, release: threading.Event) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait(timeout=60)
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def test_no_busy_wait_fails_a_run_on_a_locked_database_at_once_and_a_long_one_waits_for_the_lock(
        cli, tmp_path: Path, monkeypatch):
    db = tmp_path / "orchestrator.db"
    assert cli("run", GATED, "--input", "x=9").exit_code == 0  # the database exists, with its schema
    monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "0")  # a busy database is not retried either

    taken, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(db, taken, release))
    holder.start()
    taken.wait()
    try:
        monkeypatch.setenv("ORCHESTRATOR_SQLITE_BUSY", "0")
        refused = cli("run", GATED, "--input", "x=9")
        monkeypatch.setenv("ORCHESTRATOR_SQLITE_BUSY", "60")
        threading.Timer(0.5, release.set).start()  # let go while the next run waits
        waited = cli("run", GATED, "--input", "x=9")
    finally:
        release.set()
        holder.join()

    assert refused.exit_code == 1
    assert "database is locked" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert waited.exit_code == 0
    assert "succeeded" in waited.stdout
