"""A new SQLite database's schema at head as plain SQL, so creating one costs no SQLAlchemy or Alembic.

The quick start's first ``orchestrator run`` opens a database that does not exist yet. Creating
its schema through SQLAlchemy's metadata and stamping it with Alembic cost ~0.8 s of imports and
DDL rendering, more than the run itself. ``sqlite_schema.sql`` holds the statements that path
produces, exactly as SQLite stores them; ``tests/store/test_sqlite_ddl.py`` creates a database both
ways and compares them, so the file cannot drift from the migrations. A database at an older
revision is still upgraded by Alembic (:mod:`orchestrator.store.migrate`).

After adding a migration, regenerate the file::

    python -m orchestrator.store.sqlite_ddl > orchestrator/store/sqlite_schema.sql
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.store.migrate import HEAD_REVISION

SCHEMA_FILE = Path(__file__).with_name("sqlite_schema.sql")
SEPARATOR = "\n;\n"
"""Ends every statement in the file: SQLite keeps each statement's text exactly (trailing newlines
included), and no stored CREATE statement contains a line holding only a semicolon."""


def head_statements() -> list[str]:
    """The CREATE statements of the head schema: tables first, then indexes, each by name."""
    return SCHEMA_FILE.read_text(encoding="utf-8").split(SEPARATOR)[:-1]


def create_if_empty(conn: sqlite3.Connection) -> bool:
    """Create the head schema in a database that has no tables, stamped at :data:`HEAD_REVISION`.

    Under the database's write lock (``BEGIN IMMEDIATE``, waited for on the busy timeout), and in
    one transaction: of two processes creating one new file, the second finds the tables there and
    returns False, as it does for any database that already has tables (the migrations decide
    what such a database needs). ``conn`` is in autocommit mode (``isolation_level=None``).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            conn.execute("ROLLBACK")
            return False
        for statement in head_statements():
            conn.execute(statement)
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return True


def dump_head_schema() -> str:
    """The head schema as the migrations create it (SQLAlchemy and Alembic), in the file's format."""
    import tempfile

    from orchestrator.store.sqlite_sql import ensure_schema

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "schema.db"
        ensure_schema(f"sqlite:///{path}", "normal")
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                                "ORDER BY type <> 'table', name").fetchall()  # create_all's index order varies
        finally:
            conn.close()
    return SEPARATOR.join(sql for (sql,) in rows) + SEPARATOR


if __name__ == "__main__":
    print(dump_head_schema(), end="")
