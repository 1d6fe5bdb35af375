"""DBOS Transact on its SQLite system database: one ``@DBOS.workflow`` calling ``@DBOS.step``s.

DBOS records each step's output in the system database before the workflow goes on, one
transaction per step. On SQLite it sets ``busy_timeout``, ``foreign_keys`` and IMMEDIATE
transactions but no journal or ``synchronous`` pragma (stock: journal=DELETE,
synchronous=FULL). The benchmark hands DBOS its own SQLAlchemy engine
(``system_database_engine``) with DBOS's settings plus WAL and the requested level. DBOS
cannot run without its database, so it has no no-persistence row. The fan-out is an async
workflow gathering async steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

from engines.base import SLEEP, Engine, Level, Unsupported, inc


@DBOS.step()
def step(value: int) -> int:
    """One chain step: ``x -> x + 1``, its output recorded by DBOS."""
    return inc(value)


@DBOS.workflow()
def chain(n: int, x: int) -> int:
    """``n`` steps, each fed the previous one's output."""
    for _ in range(n):
        x = step(x)
    return x


@DBOS.step()
async def nap(value: int) -> int:
    """One fan-out branch."""
    await asyncio.sleep(SLEEP)
    return value


@DBOS.step()
async def join(values: list[int]) -> int:
    """The fan-out's join, a step of its own as in the other engines."""
    return len(values)


@DBOS.workflow()
async def fanout(width: int) -> int:
    """``width`` concurrent branches, then the join."""
    values = await asyncio.gather(*(nap(i) for i in range(width)))
    return await join(list(values))


def sqlite_engine(path: Path, level: Level) -> sa.Engine:
    """DBOS's own SQLite connection settings, plus WAL and ``synchronous=level``."""
    engine = sa.create_engine(f"sqlite:///{path}")

    @sa.event.listens_for(engine, "connect")
    def configure(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute(f"PRAGMA synchronous={level.upper()}")

    return engine


class Dbos(Engine):
    """DBOS launched on a fresh SQLite file per level, destroyed after."""

    name = "DBOS"
    distribution = "dbos"
    stock = "SQLite system DB: journal=DELETE, synchronous=FULL (no pragma set)"

    def __init__(self) -> None:
        self.engine: sa.Engine | None = None

    def setup(self, tmpdir: Path, level: Level) -> str:
        if level == "none":
            raise Unsupported("DBOS always persists to its system database")
        logging.getLogger("dbos").setLevel(logging.WARNING)
        path = tmpdir / "dbos.sqlite"
        self.engine = sqlite_engine(path, level)
        DBOS(
            config={
                "name": "peers-bench",
                "system_database_url": f"sqlite:///{path}",
                "system_database_engine": self.engine,
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        with self.engine.connect() as con:
            journal = con.exec_driver_sql("PRAGMA journal_mode").scalar()
            sync = con.exec_driver_sql("PRAGMA synchronous").scalar()
        return f"journal={str(journal).upper()}, synchronous={ {1: 'NORMAL', 2: 'FULL'}.get(sync, sync) }"

    def teardown(self) -> None:
        DBOS.destroy(destroy_registry=False)  # the decorated functions stay registered for the next launch
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None

    def chain_us_per_step(self, n: int) -> float:
        t = time.perf_counter()
        with SetWorkflowID(uuid.uuid4().hex):
            out = chain(n, 0)
        elapsed = time.perf_counter() - t
        if out != n:
            raise RuntimeError(f"chain ended at {out}, not {n}")
        return elapsed / n * 1e6

    def fanout_seconds(self, width: int) -> float:
        async def main() -> float:
            t = time.perf_counter()
            out = await fanout(width)
            elapsed = time.perf_counter() - t
            if out != width:
                raise RuntimeError(f"join saw {out} branches, not {width}")
            return elapsed

        return asyncio.run(main())

    def runs_per_second(self, seconds: float) -> float:
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            chain(5, count)  # a new workflow id (uuid4) per call
            count += 1
        return count / (time.perf_counter() - t)


def make() -> Engine:
    """The DBOS adapter."""
    return Dbos()
