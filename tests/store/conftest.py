"""The backend switch: every test that takes ``store`` runs once per store implementation.

``sqlite`` (a file in the test's temp dir), ``memory`` (``memory://``) and ``postgresql`` (a
fresh schema per test on the server named by ``ORCHESTRATOR_TEST_PG_URL``; skipped when it is
unset). Another test package reuses the switch by importing the fixtures into its conftest::

    from tests.store.conftest import backend, store  # noqa: F401

``backend.connect()`` opens another handle on the same database, as a second worker or
reviewer process would (for ``memory://`` that is the one store: memory is per process).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from orchestrator.store import Store, open_store

BACKENDS = ("sqlite", "memory", "postgresql")
PG_ENV = "ORCHESTRATOR_TEST_PG_URL"


@dataclass
class Backend:
    """One database for one test, and every store handle opened on it."""

    name: str
    url: str
    handles: list[Store] = field(default_factory=list)
    shared: Store | None = None
    """The memory backend's only store: a second ``open_store("memory://")`` is another database."""

    def connect(self) -> Store:
        """A store on this database (a new connection for the SQL backends); closed at teardown."""
        if self.name == "memory":
            if self.shared is None:
                self.shared = open_store(self.url)
                self.handles.append(self.shared)
            return self.shared
        handle = open_store(self.url)
        self.handles.append(handle)
        return handle

    def close(self) -> None:
        for handle in reversed(self.handles):
            handle.close()
        self.handles.clear()


def postgres_schema_url(base_url: str, schema: str) -> str:
    """``base_url`` with every connection's search_path set to ``schema`` (libpq ``options``)."""
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL whose connections see only a brand-new, empty schema; the schema is dropped afterwards."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set; set it to a PostgreSQL URL (e.g. "
                    "postgresql://postgres@127.0.0.1:5432/test) to run the store contract on PostgreSQL")
    import sqlalchemy as sa

    from orchestrator.store import normalize_url

    schema = f"store_contract_{secrets.token_hex(4)}"
    admin = sa.create_engine(normalize_url(base))
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield postgres_schema_url(base, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The database of one test on one backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/t.db"
    elif request.param == "memory":
        url = "memory://"
    else:
        url = request.getfixturevalue("postgres_url")
    b = Backend(request.param, url)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    """The store under test (on sqlite, memory and postgresql in turn)."""
    return backend.connect()
