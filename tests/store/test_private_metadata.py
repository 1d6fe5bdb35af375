"""The schema lives on the store's own MetaData, never on SQLModel's process-wide one.

Run in a fresh interpreter: SQLModel's metadata is global to a process, which is the point.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

APPLICATION = """
import sys
from sqlmodel import Field, SQLModel, create_engine

class Run(SQLModel, table=True):          # the application's own `runs` table
    __tablename__ = "runs"
    id: int | None = Field(default=None, primary_key=True)
    note: str

from orchestrator.store import open_store  # importing the store after it must work
from orchestrator.store.tables import metadata

store = open_store(sys.argv[1])            # and the store must still create its own schema
store.close()
SQLModel.metadata.create_all(create_engine(f"sqlite:///{sys.argv[2]}"))
print(sorted(SQLModel.metadata.tables), "runs" in metadata.tables)
"""


def test_an_application_with_its_own_sqlmodel_runs_table_can_use_the_store(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "orchestrator.db", tmp_path / "app.db"
    done = subprocess.run([sys.executable, "-c", APPLICATION, str(ours), str(theirs)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['runs']", "True"]
    with sqlite3.connect(theirs) as conn:  # the application's create_all made its table alone
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"runs"}
    with sqlite3.connect(ours) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    assert "lease_token" in columns
