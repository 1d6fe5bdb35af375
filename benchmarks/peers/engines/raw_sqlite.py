"""The floor: raw ``sqlite3``, one INSERT + COMMIT per step, with the same pragmas as every engine.

No engine that persists after every step on this SQLite build can beat it; the ratios of the
others to ours are read beside it. With no persistence the floor is a plain Python loop.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import time
from pathlib import Path

from engines.base import SLEEP, Engine, Level, Unsupported, apply_pragmas, database_bytes, describe, inc

_DDL = "CREATE TABLE steps (id INTEGER PRIMARY KEY, run TEXT NOT NULL, step TEXT NOT NULL, value TEXT)"
_INSERT = "INSERT INTO steps (run, step, value) VALUES (?, ?, ?)"


class RawSqlite(Engine):
    """A small table and a commit per step: what durable persistence costs at a minimum."""

    name = "raw sqlite3"
    stock = "python sqlite3 default: journal=DELETE, synchronous=FULL"

    def __init__(self) -> None:
        self.con: sqlite3.Connection | None = None
        self.path: Path | None = None
        self.runs = 0

    def setup(self, tmpdir: Path, level: Level) -> str:
        if level == "none":
            self.con = None
            return "none (plain Python loop)"
        self.path = tmpdir / "raw.db"
        self.con = sqlite3.connect(self.path, check_same_thread=False)
        apply_pragmas(self.con, level)
        self.con.execute(_DDL)
        self.con.commit()
        return describe(self.con)

    def teardown(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def chain_us_per_step(self, n: int) -> float:
        gc.collect()
        con, run = self.con, f"r{self.runs}"
        self.runs += 1
        t = time.perf_counter()
        value = 0
        for i in range(n):
            value = inc(value)
            if con is not None:
                con.execute(_INSERT, (run, f"s{i}", str(value)))
                con.commit()
        return (time.perf_counter() - t) / n * 1e6

    def fanout_seconds(self, width: int) -> float:
        con = self.con

        async def one(i: int) -> int:
            await asyncio.sleep(SLEEP)
            if con is not None:
                con.execute(_INSERT, ("fan", f"nap{i}", "1"))
                con.commit()
            return i

        async def main() -> int:
            values = await asyncio.gather(*(one(i) for i in range(width)))
            if con is not None:
                con.execute(_INSERT, ("fan", "join", str(len(values))))
                con.commit()
            return len(values)

        gc.collect()
        t = time.perf_counter()
        asyncio.run(main())
        return time.perf_counter() - t

    def runs_per_second(self, seconds: float) -> float:
        """Per run: a run row, then five step rows, each committed (six commits); with no
        persistence, the five calls alone."""
        con = self.con
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            run = f"run{count}"
            if con is not None:
                con.execute(_INSERT, (run, "<run>", None))
                con.commit()
            value = count
            for i in range(5):
                value = inc(value)
                if con is not None:
                    con.execute(_INSERT, (run, f"s{i}", str(value)))
                    con.commit()
            count += 1
        return count / (time.perf_counter() - t)

    def bytes_per_step(self, n: int) -> float:
        """The floor's row: run id, step id and value, nothing else."""
        if self.path is None:
            raise Unsupported("no database file")
        before = database_bytes(self.path)
        self.chain_us_per_step(n)
        return (database_bytes(self.path) - before) / n


def make() -> Engine:
    """The raw sqlite3 floor."""
    return RawSqlite()
