"""Schema migrations: new databases start at head, older ones are upgraded on open, newer ones refused.

The release database fixture (``tests/fixtures/release_db``, built by the release's own code) is
opened by this code through the CLI: its paused run continues and succeeds, its earlier records
read back as the release showed them, and its schema ends at the head revision. The same content
is upgraded on PostgreSQL from the release schema (revision 0001) with no ``alembic_version``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from orchestrator.core.errors import InputError
from orchestrator.store import normalize_url, open_store
from orchestrator.store.migrate import (
    HEAD_REVISION,
    RELEASE_REVISION,
    alembic_config,
    ensure_schema,
    script_head,
    stored_revision,
)
from orchestrator.store.tables import metadata
from tests.conftest import REPO, Result, _cli_on

RELEASE_DB = REPO / "tests" / "fixtures" / "release_db"
MANIFEST = json.loads((RELEASE_DB / "release.json").read_text())
TABLE_ORDER = ("workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """The orchestrator command, invoked in-process on the database ``db`` (the fixture's step module
    importable from anywhere, no ``ORCHESTRATOR_DB`` from the environment). Each command opens the database
    afresh, as a separate process would: nothing about a schema is remembered between commands."""
    monkeypatch.syspath_prepend(str(RELEASE_DB))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)

    def invoke(*args: str, db: str) -> Result:
        return _cli_on(db)(*args)

    return invoke


def upgrade_to(conn: sa.Connection, revision: str) -> None:
    command.upgrade(alembic_config(conn), revision)
    conn.commit()


def schema_differences(conn: sa.Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), metadata))


# -- revisions ----------------------------------------------------------------------------------------


def test_head_revision_is_the_head_of_the_migration_scripts() -> None:
    assert HEAD_REVISION == script_head()


def test_the_migrations_build_exactly_the_declared_schema(durable_url: str) -> None:
    engine = sa.create_engine(normalize_url(durable_url))
    with engine.connect() as conn:
        upgrade_to(conn, "head")
        assert schema_differences(conn) == []
    engine.dispose()


def test_a_new_database_is_created_at_head_and_then_left_alone(durable_url: str) -> None:
    url = normalize_url(durable_url)
    assert stored_revision(url) is None
    first = ensure_schema(url)
    assert (first.before, first.action, first.after) == (None, "created", HEAD_REVISION)
    assert stored_revision(url) == HEAD_REVISION
    assert ensure_schema(url).action == "current"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert schema_differences(conn) == []
    engine.dispose()


def test_a_database_at_an_older_revision_is_upgraded(durable_url: str) -> None:
    url = normalize_url(durable_url)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        upgrade_to(conn, RELEASE_REVISION)
    change = ensure_schema(engine)
    assert (change.before, change.action) == (RELEASE_REVISION, "upgraded")
    with engine.connect() as conn:
        assert schema_differences(conn) == []
    assert stored_revision(engine) == HEAD_REVISION
    engine.dispose()


def test_an_unversioned_database_with_newer_columns_is_adopted(durable_url: str) -> None:
    """A development build between the release and migrations created every declared column."""
    url = normalize_url(durable_url)
    engine = sa.create_engine(url)
    metadata.create_all(engine)
    change = ensure_schema(engine)
    assert (change.before, change.action) == (None, "adopted")
    assert stored_revision(engine) == HEAD_REVISION
    engine.dispose()


def test_an_unversioned_database_of_an_earlier_build_gets_the_columns_the_release_added_by_hand(
        durable_url: str) -> None:
    """Builds before the release lacked four columns the release added with ALTER TABLE (they are marked so
    on their declaration): adopting such a database adds them, then upgrades it to the head."""
    url = normalize_url(durable_url)
    engine = sa.create_engine(url)
    metadata.create_all(engine)
    late = {("step_records", "llm"), ("runs", "trace_id"), ("runs", "lease_token"), ("runs", "lease_expires_at")}
    with engine.begin() as conn:
        for table, column in sorted(late):
            conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    change = ensure_schema(engine)
    inspector = sa.inspect(engine)
    columns = {(table, c["name"]) for table in ("runs", "step_records") for c in inspector.get_columns(table)}
    assert (change.before, change.action) == (None, "adopted")
    assert late <= columns
    assert stored_revision(engine) == HEAD_REVISION
    engine.dispose()


def test_a_newer_schema_than_the_code_knows_is_refused_and_left_as_it_is(durable_url: str, cli) -> None:
    url = normalize_url(durable_url)
    ensure_schema(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(InputError, match="database schema 9999 is newer than this orchestrator; upgrade the "
                                         "package"):
        ensure_schema(engine)
    assert stored_revision(engine) == "9999"
    engine.dispose()
    refused = cli("runs", db=durable_url)
    assert refused.exit_code == 2
    assert "database schema 9999 is newer than this orchestrator" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.slow
def test_opening_a_current_database_reads_one_row_and_imports_no_alembic(durable_url: str) -> None:
    ensure_schema(normalize_url(durable_url))
    probe = ("import sys; from orchestrator.store import open_store; "
             f"open_store({durable_url!r}).close(); print(sorted(m for m in sys.modules if m.startswith('alembic')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_stored_revision_reads_a_stdlib_sqlite_connection(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with sqlite3.connect(db) as conn:
        assert stored_revision(conn) is None
    ensure_schema(f"sqlite:///{db}")
    conn = sqlite3.connect(db)
    assert stored_revision(conn) == HEAD_REVISION
    conn.close()


@pytest.mark.slow
def test_db_upgrade_says_what_it_did_and_db_revision_where_a_database_stands(durable_url: str, cli) -> None:
    engine = sa.create_engine(normalize_url(durable_url))
    with engine.connect() as conn:
        upgrade_to(conn, RELEASE_REVISION)
    engine.dispose()
    pending = cli("db", "revision", "--check", db=durable_url)
    assert (pending.exit_code, pending.stdout.splitlines()[:2]) == (1, [f"stored: {RELEASE_REVISION}",
                                                                         f"head:   {HEAD_REVISION}"])
    upgraded = cli("db", "upgrade", db=durable_url)
    assert upgraded.exit_code == 0, upgraded.stderr
    assert f"upgraded the schema from {RELEASE_REVISION} to {HEAD_REVISION}" in upgraded.stdout
    again = cli("db", "upgrade", db=durable_url)
    assert f"is at {HEAD_REVISION} (head); nothing to do" in again.stdout
    assert cli("db", "revision", "--check", db=durable_url).exit_code == 0


@pytest.mark.parametrize("db, message", [
    ("memory://", "memory:// keeps nothing between commands and has no schema"),
    ("{tmp}/absent.db", "no database at {tmp}/absent.db"),
])
def test_db_commands_refuse_what_has_no_schema_in_one_line(tmp_path: Path, db: str, message: str, cli) -> None:
    for command_ in ("upgrade", "revision"):
        refused = cli("db", command_, db=db.format(tmp=tmp_path))
        assert refused.exit_code == 2
        assert len(refused.stderr.strip().splitlines()) == 1
        assert message.format(tmp=tmp_path) in refused.stderr
    assert not (tmp_path / "absent.db").exists()


# -- the release database -----------------------------------------------------------------------------


def contract(doc: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``show --json`` that DESIGN.md makes a contract, with the step records' histories."""
    steps = [{k: s[k] for k in ("step_id", "type", "agent", "status", "attempt", "started_at", "ended_at", "output",
                                 "error")} | {"gates": [{k: g[k] for k in ("gate", "passed", "score", "reason")}
                                                        for g in s["gates"]]} for s in doc["steps"]]
    attempts = [{k: a[k] for k in ("record_id", "step_id", "attempt", "status", "origin", "error")}
                for a in doc["attempts"]]
    return {"run_id": doc["run_id"], "workflow": doc["workflow"], "status": doc["status"], "output": doc["output"],
            "steps": steps, "attempts": attempts, "reviews": doc["reviews"], "outcomes": doc["outcomes"]}


def release_keys(new: Any, old: Any) -> Any:
    """``new`` reduced to the keys ``old`` has, recursively: ``show --json`` may add keys, never rename them."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: release_keys(new[k], old[k]) if k in new else "<missing>" for k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [release_keys(n, o) for n, o in zip(new, old, strict=True)]
    return new


def same_as_release(doc: dict[str, Any], release: dict[str, Any]) -> bool:
    return release_keys(contract(doc), contract(release)) == contract(release)


def show(cli, run_id: str, db: str) -> dict[str, Any]:
    shown = cli("show", run_id, "--json", db=db)
    assert shown.exit_code == 0, shown.stderr
    return json.loads(shown.stdout)


def revision_of(cli, db: str) -> dict[str, Any]:
    said = cli("db", "revision", "--json", db=db)
    assert said.exit_code == 0, said.stderr
    return json.loads(said.stdout)


def check_release_content_upgrades(cli, db: str) -> None:
    """What both backends must show: the release's records intact, the paused run continuing to success."""
    succeeded, paused = MANIFEST["succeeded_run"], MANIFEST["paused_run"]
    assert revision_of(cli, db)["stored"] is None  # written before migrations existed

    assert same_as_release(show(cli, paused, db), MANIFEST["documents"][paused])
    assert revision_of(cli, db) == {"database": revision_of(cli, db)["database"], "stored": HEAD_REVISION,
                               "head": HEAD_REVISION, "current": True, "newer": False}
    # paused before review deadlines existed: due at once, so a worker looks at its pause once
    assert open_store(db).due_reviews(time.time()) == [(paused, 0.0)]

    approved = cli("approve", paused, "--comment", "upgraded", db=db)
    assert approved.exit_code == 0, approved.stdout + approved.stderr
    after = show(cli, paused, db)
    assert after["status"] == "succeeded"
    assert after["output"] == {"names": ["vendors-0", "vendors-1", "vendors-2"], "count": 3}
    assert [r["decision"] for r in after["reviews"]] == ["approve"]
    before = contract(MANIFEST["documents"][paused])["attempts"]
    assert release_keys(contract(after)["attempts"][:len(before)], before) == before

    assert same_as_release(show(cli, succeeded, db), MANIFEST["documents"][succeeded])
    assert [o["source"] for o in show(cli, succeeded, db)["outcomes"]] == ["evaluator", "human"]


@pytest.mark.slow
def test_the_release_sqlite_database_upgrades_and_its_paused_run_continues(tmp_path: Path, cli) -> None:
    db = tmp_path / "release.db"
    shutil.copy(RELEASE_DB / "release.db", db)
    check_release_content_upgrades(cli, str(db))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM attributions").fetchone() == (1,)  # the label's backward trace
        assert conn.execute("SELECT count(*) FROM workflows").fetchone() == (1,)


def copy_release_rows(source: Path, target: sa.Connection) -> None:
    """Every row of the release fixture into ``target`` (same ids), booleans as booleans, sequences moved on."""
    tables = sa.MetaData()
    tables.reflect(target)
    with sqlite3.connect(source) as src:
        src.row_factory = sqlite3.Row
        for name in TABLE_ORDER:
            table = tables.tables[name]
            flags = {c.name for c in table.columns if isinstance(c.type, sa.Boolean)}
            rows = [{k: (bool(r[k]) if k in flags and r[k] is not None else r[k]) for k in r.keys()}
                    for r in src.execute(f"SELECT * FROM {name}")]
            if rows:
                target.execute(table.insert(), rows)
            target.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                                   f"(SELECT coalesce(max(id), 0) + 1 FROM {name}), false)"))
    target.commit()


@pytest.mark.slow
def test_the_release_content_upgrades_on_postgresql(postgres_url: str, cli) -> None:
    """A PostgreSQL database as the release left it: the 0001 schema (which equals the release's
    ``tables.py``), no ``alembic_version``, and the fixture's rows."""
    engine = sa.create_engine(normalize_url(postgres_url))
    with engine.connect() as conn:
        upgrade_to(conn, RELEASE_REVISION)
        conn.execute(sa.text("DROP TABLE alembic_version"))
        conn.commit()
        copy_release_rows(RELEASE_DB / "release.db", conn)
    check_release_content_upgrades(cli, postgres_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM attributions")).scalar() == 1
        assert schema_differences(conn) == []
    engine.dispose()
