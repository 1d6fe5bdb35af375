"""The embedded SQLite store: plain paths for --db, its column list kept equal to the declared schema,
Store methods it does not implement itself handed to the SQL store on the same file, and ``memory://``:
the same store on a private in-memory database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.store import normalize_url, open_store
from orchestrator.store.rows import GATE_COLUMNS, MODEL_CALL_COLUMNS, RUN_COLUMNS, STEP_COLUMNS
from orchestrator.store.sqlite import TABLE_NAMES, SqliteStore
from tests.conftest import FIXTURES
from tests.store.rows import add_run, add_workflow

REPO = Path(__file__).resolve().parents[2]


def test_the_tables_and_columns_it_writes_are_the_declared_schema():
    from orchestrator.store.tables import TABLES

    assert TABLE_NAMES == tuple(TABLES)
    for table, columns in (("runs", RUN_COLUMNS), ("step_records", STEP_COLUMNS), ("gate_results", GATE_COLUMNS),
                           ("model_calls", MODEL_CALL_COLUMNS)):
        declared = [c.name for c in TABLES[table].columns]
        assert [c for c in declared if c in columns] == list(columns), table  # declared, in the table's order
        assert all(TABLES[table].c[c].nullable or TABLES[table].c[c].primary_key or TABLES[table].c[c].default
                   for c in declared if c not in columns), table  # the others may be left out


@pytest.mark.parametrize("given, expected", [
    ("/tmp/x.db", "sqlite:////tmp/x.db"),
    ("./runs.db", "sqlite:///runs.db"),
    ("runs.db", "sqlite:///runs.db"),
    ("sqlite:///a.db", "sqlite:///a.db"),
    ("memory://", "memory://"),
])
def test_a_plain_path_is_a_sqlite_database(given, expected):
    assert normalize_url(given) == expected


def test_run_and_show_with_a_plain_path_for_db(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ran = cli("run", str(FIXTURES / "ok.yaml"), "--json", "--db", "./runs.db", db=False)
    assert ran.exit_code == 0, ran.stderr
    assert (tmp_path / "runs.db").exists()
    absolute = str(tmp_path / "runs.db")
    shown = cli("show", ran.json()["run_id"], "--json", "--db", absolute, db=False)
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["status"] == "succeeded"
    missing = cli("runs", "--db", str(tmp_path / "nowhere.db"), db=False)
    assert missing.exit_code == 2 and "no database at" in missing.stderr


def test_methods_it_does_not_implement_go_to_the_sql_store_on_the_same_file(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    assert isinstance(store, SqliteStore)
    run_id = add_run(store, add_workflow(store))
    assert store.delegate is None  # nothing so far needed SQLAlchemy
    assert store.step_history("wf") == []  # delegated
    assert store.delegate is not None
    assert [r.run_id for r in store.delegate.list_runs()] == [run_id]  # the same database


def test_an_in_memory_url_is_one_database_for_both_sides():
    store = open_store("sqlite://")
    run_id = add_run(store, add_workflow(store))
    assert [r.run_id for r in store.sql().list_runs()] == [run_id]
    store.close()


def test_memory_url_opens_the_sqlite_store_in_memory_named_by_its_url():
    store = open_store("memory://")
    assert isinstance(store, SqliteStore)
    assert store.url == store.display_url == "memory://"
    store.close()


def test_each_memory_store_is_a_separate_database():
    one, two = open_store("memory://"), open_store("memory://")
    add_run(one, add_workflow(one))
    assert len(one.list_runs()) == 1
    assert two.list_runs() == [] and set(two.count_rows().values()) == {0}


def test_a_memory_store_runs_without_importing_sqlalchemy():
    code = ("import sys\n"
            "from orchestrator.store import open_store, NewRun, NewStepRecord\n"
            "s = open_store('memory://')\n"
            "wf = s.register_workflow('wf', '1', {}, None, 'h')\n"
            "r = s.create_run(NewRun(wf, 'wf', {}))\n"
            "s.insert_step_record(NewStepRecord(r, wf, 'a', 'python', 'a', 1, 'succeeded', 1.0, 2.0, output='1'))\n"
            "assert s.step_records(r)[0].output == 1 and s.count_rows()['step_records'] == 1\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'sqlmodel')))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def open_files_of(path: Path) -> list[str]:
    """The descriptors this process holds on ``path`` itself (not its -wal or -shm files)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            if Path(fd.readlink()) == path:
                found.append(fd.name)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_both_sides_of_the_store_share_one_connection_to_the_file(tmp_path: Path):
    path = (tmp_path / "one.db").resolve()
    store = open_store(f"sqlite:///{path}")
    run_id = add_run(store, add_workflow(store))
    assert len(open_files_of(path)) == 1
    assert store.step_history("wf") == []  # answered by the SQLAlchemy side
    assert [r.run_id for r in store.sql().list_runs()] == [run_id]
    assert len(open_files_of(path)) == 1  # ... on the same connection
    store.close()
    assert open_files_of(path) == []


def test_a_transaction_of_the_sqlalchemy_side_is_all_or_nothing(tmp_path: Path):
    """The shared connection is in autocommit mode for the raw side; the SQLAlchemy side still writes
    several statements as one transaction."""
    from sqlalchemy import text

    store = open_store(f"sqlite:///{tmp_path / 'tx.db'}")
    wf = add_workflow(store)
    engine = store.sql().engine
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(text("UPDATE workflows SET source = 'first' WHERE id = :id"), {"id": wf})
        conn.execute(text("UPDATE workflows SET source = 'second' WHERE id = :id"), {"id": wf})
        raise RuntimeError("halfway")
    assert store.workflow_definition(wf)[1] == "wf.yaml"  # neither update stayed
    store.close()
