"""The store: one interface (:class:`Store`), implementations chosen from the URL.

==========================  ===================================================================
``sqlite:///path/to/db``    :class:`~orchestrator.store.sqlite.SqliteStore`, the embedded default
                            (``?synchronous=full`` for an fsync per commit); a plain path
                            (``./runs.db``, no ``://``) means the same
``postgresql://...``        :class:`~orchestrator.store.sql.SqlStore` on psycopg 3; several
                            workers on several hosts may share it
``memory://``               the SQLite store on a private in-memory database: tests and
                            throwaway runs; nothing outlives the store
==========================  ===================================================================
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.store.base import Store
from orchestrator.store.rows import (
    UNCHANGED,
    GateRow,
    Lease,
    ModelCall,
    NewAttribution,
    NewDecision,
    NewNotification,
    NewOutcome,
    NewReview,
    NewRun,
    NewStepRecord,
    RunEnd,
    StepHistoryRow,
)

__all__ = ["Store", "open_store", "Lease", "default_url", "normalize_url", "GateRow", "ModelCall", "NewStepRecord",
           "NewRun", "NewReview", "NewDecision", "NewNotification", "NewOutcome", "NewAttribution", "RunEnd",
           "StepHistoryRow", "UNCHANGED", "DEFAULT_DB_DIR"]

DEFAULT_DB_DIR = ".orchestrator"


def default_url() -> str:
    """``ORCHESTRATOR_DB`` if set, else a SQLite file under ``./.orchestrator/``."""
    return os.environ.get("ORCHESTRATOR_DB") or f"sqlite:///{DEFAULT_DB_DIR}/orchestrator.db"


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs (selecting the psycopg 3 driver) and plain file paths.

    A value without ``://`` is a path to a SQLite database (``--db ./runs.db``, ``--db /tmp/x.db``):
    nobody should have to know SQLAlchemy's ``sqlite:///`` spelling to name a file.
    """
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """The store for ``url`` (default: :func:`default_url`), its schema created if needed.

    ``create=False`` is for readers: a SQLite path with no database, or an empty database, is an
    InputError ("no database at PATH") instead of a new schema. Another application's database
    (tables, none of ours) is an InputError either way, and nothing is written to it. An empty
    ``url`` is an InputError too.
    """
    if url is not None and not url.strip():
        from orchestrator.core.errors import InputError

        raise InputError("the database URL is empty; give one such as sqlite:///path/to/orchestrator.db")
    url = normalize_url(url or default_url())
    if url.startswith(("sqlite", "memory://")):
        from orchestrator.store.delegating import concrete
        from orchestrator.store.sqlite import SqliteStore

        return concrete(SqliteStore)(url, create=create)
    from orchestrator.store.sql import SqlStore

    return SqlStore(url, create=create)
