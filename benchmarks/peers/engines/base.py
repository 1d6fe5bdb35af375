"""The one interface every engine adapter implements, so engines are pluggable and comparable.

Each adapter is driven the same way by ``run.py``'s worker process: ``setup(tmpdir, level)``
once per durability level, then the workloads, then ``teardown()``. A workload an engine
cannot run as asked raises :class:`Unsupported` with the reason; the reason is printed in
the cell instead of a number, so a gap is never silently filled with an unequal setting.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from importlib import metadata
from pathlib import Path
from typing import ClassVar, Literal

Level = Literal["full", "normal", "none"]
"""``full``/``normal``: SQLite ``synchronous`` level (always with WAL); ``none``: no persistence."""

SLEEP = 0.05
"""Seconds each fan-out step awaits (``asyncio.sleep``)."""

SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class Unsupported(Exception):
    """The engine cannot run this workload at the requested setting; the message says why."""


def inc(value: int) -> int:
    """The trivial step every chain runs: ``x -> x + 1``."""
    return value + 1


def apply_pragmas(con: sqlite3.Connection, level: Level) -> None:
    """WAL plus the requested ``synchronous`` level: the floor's and every engine's setting."""
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={level.upper()}")


def describe(con: sqlite3.Connection) -> str:
    """The durability a live connection really has, read back rather than assumed."""
    journal = con.execute("PRAGMA journal_mode").fetchone()[0]
    sync = con.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal={str(journal).upper()}, synchronous={SYNCHRONOUS_NAMES.get(int(sync), sync)}"


class Engine(ABC):
    """One workflow engine under test.

    ``distribution`` is the PyPI name whose version is reported; ``stock`` says what the engine
    does when left alone, printed beside the setting the benchmark forces for equal durability.
    """

    name: ClassVar[str]
    distribution: ClassVar[str | None] = None
    stock: ClassVar[str] = ""

    def version(self) -> str:
        """The installed version of the engine's distribution."""
        if self.distribution is None:
            return sqlite3.sqlite_version
        return metadata.version(self.distribution)

    @abstractmethod
    def setup(self, tmpdir: Path, level: Level) -> str:
        """Prepare persistence in ``tmpdir`` at ``level``; return the durability actually in force."""

    def teardown(self) -> None:  # noqa: B027 (optional hook: most engines have nothing to release)
        """Release connections, threads and engine-global state opened by :meth:`setup`."""
        return None

    def caveat(self, workload: str) -> str:
        """What differs from the requested setting for ``workload`` (printed beside its number)."""
        return ""

    @abstractmethod
    def chain_us_per_step(self, n: int) -> float:
        """Run one ``n``-step chain of :func:`inc`, persisting after every step; µs per step."""

    @abstractmethod
    def fanout_seconds(self, width: int) -> float:
        """Run ``width`` parallel steps awaiting ``asyncio.sleep(SLEEP)`` then one join; wall seconds."""

    @abstractmethod
    def runs_per_second(self, seconds: float) -> float:
        """Start sequential 5-step runs, each with a new run id, for about ``seconds``; runs per second."""

    def map_us_per_item(self, n: int) -> float:
        """Run one map of ``n`` no-op items, persisting each item's result: a step returns the list
        ``0 .. n-1``, one instance per item returns its item, one step collects the list; µs per item."""
        raise Unsupported("no map measured for this engine")

    def static_fanout_us_per_item(self, n: int) -> float:
        """The same work with the ``n`` items known when the workflow is written: ``n`` steps of the
        workflow, each returning its own item, joined by one step; µs per item."""
        raise Unsupported("no static fan-out measured for this engine")

    def bytes_per_step(self, n: int) -> float:
        """Bytes the database grows by per persisted step of an ``n``-step chain (checkpointed file size)."""
        raise Unsupported("not measured for this engine")


def database_bytes(path: Path) -> int:
    """A SQLite database's size with its write-ahead log folded in, so growth is comparable across engines."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * size)
    finally:
        con.close()
