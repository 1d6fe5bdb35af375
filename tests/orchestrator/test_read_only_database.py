"""Read commands work on a database whose directory cannot be written (a mounted backup, a read-only
volume): ``show`` and ``runs`` open it read-only instead of switching it to WAL, which creates ``-wal`` and
``-shm`` files beside it. The directory is made read-only for real: for a non-root user by its mode, for
root (whom modes do not stop) by a read-only bind mount in a mount namespace of the command's own; either
way the test first checks that a file cannot be created there."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]
PROBE_WRITABLE = 99

RUN_READ_ONLY = r'''
set -e
mount --bind "$0" "$0"
mount -o remount,bind,ro "$0"
if touch "$0/probe" 2>/dev/null; then exit 99; fi
exec "$@"
'''


def _in_read_only_directory(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``orchestrator ARGS`` while ``directory`` cannot be written (exit 99 if it still could be)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            probe = directory / "probe"
            try:
                probe.touch()
            except PermissionError:
                pass
            else:
                return subprocess.CompletedProcess(args, PROBE_WRITABLE, "", "")
            return subprocess.run([*ORCHESTRATOR, *args], env=env, capture_output=True, text=True, timeout=60)
        finally:
            directory.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.fail("running as root, a read-only directory needs unshare(1) for a private read-only bind mount")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", RUN_READ_ONLY,
                           str(directory), *ORCHESTRATOR, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def backup(tmp_path: Path, cli, db_url: str) -> tuple[Path, str]:
    """A database with a paused run, copied as a backup is: one file, no -wal or -shm beside it."""
    run_id = cli("run", str(FIXTURES / "gated.yaml"), "--json").json()["run_id"]
    source = Path(db_url.split("///", 1)[1])
    directory = tmp_path / "backup"
    directory.mkdir()
    with sqlite3.connect(source) as live, sqlite3.connect(directory / "o.db") as copy:
        live.backup(copy)
    assert sorted(p.name for p in directory.iterdir()) == ["o.db"]
    return directory, run_id


def test_show_and_runs_read_a_database_in_a_read_only_directory(backup):
    directory, run_id = backup
    db = str(directory / "o.db")
    shown = _in_read_only_directory(directory, "show", run_id, "--json", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert (json.loads(shown.stdout)["run_id"], json.loads(shown.stdout)["status"]) == (run_id, "paused")

    listed = _in_read_only_directory(directory, "runs", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "paused")]

    table = _in_read_only_directory(directory, "show", run_id, "--db", db)
    assert table.returncode == 0, table.stderr
    assert run_id in table.stdout
    assert sorted(p.name for p in directory.iterdir()) == ["o.db"]  # nothing was created beside it


def test_a_write_to_a_database_in_a_read_only_directory_is_one_line_exit_2(backup):
    directory, run_id = backup
    result = _in_read_only_directory(directory, "approve", run_id, "--db", str(directory / "o.db"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
