"""A new SQLite database is created from plain SQL: the same schema the migrations build, without
importing SQLAlchemy or Alembic, and safely when several processes create one file at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from orchestrator.store import NewRun, open_store
from orchestrator.store.migrate import HEAD_REVISION, stored_revision
from orchestrator.store.sqlite_ddl import SCHEMA_FILE, dump_head_schema
from orchestrator.store.sqlite_sql import ensure_schema
from tests.conftest import REPO


def schema_of(path: Path) -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    finally:
        conn.close()


def test_a_new_database_has_exactly_the_schema_the_migrations_create(tmp_path: Path) -> None:
    open_store(f"sqlite:///{tmp_path / 'plain.db'}").close()
    ensure_schema(f"sqlite:///{tmp_path / 'migrated.db'}", "normal")
    assert schema_of(tmp_path / "plain.db") == schema_of(tmp_path / "migrated.db")
    assert stored_revision(f"sqlite:///{tmp_path / 'plain.db'}") == HEAD_REVISION


def test_the_packaged_schema_is_what_the_migrations_produce() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == dump_head_schema(), (
        "regenerate it: python -m orchestrator.store.sqlite_ddl > orchestrator/store/sqlite_schema.sql")


def test_creating_a_database_and_running_on_it_imports_neither_sqlalchemy_nor_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    script = (
        "import sys\n"
        "from orchestrator import Workflow, open_store, start_run\n"
        "wf = Workflow('tiny', inputs={'x': 'integer'}, output='double')\n"
        "wf.step(id='double', inputs={'x': '$inputs.x'})(lambda x: 2 * x)\n"
        f"store = open_store({url!r})\n"
        "print(start_run(store, wf.bind(), {'x': 21}).output)\n"
        "print(sorted(m for m in ('sqlalchemy', 'alembic') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["42", "[]"]


def test_processes_creating_one_new_database_at_once_all_use_it(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    url = f"sqlite:///{path}"
    script = ("import sys\nfrom orchestrator.store import NewRun, open_store\n"
              f"store = open_store({url!r})\n"
              "workflow = store.register_workflow('w', '1', {}, None, 'hash')\n"
              "print(store.create_run(NewRun(workflow, 'w', {}, status='queued')))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in results]
    store = open_store(f"sqlite:///{path}")
    assert sorted(r.run_id for r in store.list_runs(status="queued")) == sorted(out.strip() for out, _ in results)
    assert stored_revision(f"sqlite:///{path}") == HEAD_REVISION
    assert len([t for t in schema_of(path) if t[0] == "table" and t[1] == "alembic_version"]) == 1


def test_opening_a_new_file_waits_for_a_writer_that_holds_it_before_it_is_in_wal_mode(tmp_path: Path) -> None:
    """Switching to WAL needs the file's exclusive lock, and SQLite refuses it at once (without the
    busy timeout) while another connection of a not-yet-WAL file holds its write lock: what two
    processes creating one file at the same moment meet."""
    path = tmp_path / "new.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: writer.execute("ROLLBACK"))
    release.start()
    try:
        store = open_store(f"sqlite:///{path}")
        workflow = store.register_workflow("w", "1", {}, None, "hash")
        run_id = store.create_run(NewRun(workflow, "w", {}, status="queued"))
        assert [r.run_id for r in store.list_runs(status="queued")] == [run_id]
        store.close()
    finally:
        release.join()
        writer.close()
    assert stored_revision(f"sqlite:///{path}") == HEAD_REVISION
