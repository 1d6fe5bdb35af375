"""Burr: an ``Application`` with one action per step and ``SQLitePersister`` saving after each.

Burr's SQLite persisters open a plain ``sqlite3``/``aiosqlite`` connection and set no pragma,
so stock they run with a rollback journal (DELETE) and ``synchronous=FULL``; the benchmark
passes in a connection set to WAL and the requested level. The fan-out is a ``MapStates``
action whose async sub-applications inherit the (async, aiosqlite) persister, so each branch
is saved like a step. With no persistence, the application has no persister at all.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import aiosqlite
from burr.core import ApplicationBuilder, State, action
from burr.core.action import create_action
from burr.core.parallelism import MapStates
from burr.core.persistence import SQLitePersister
from burr.integrations.persisters.b_aiosqlite import AsyncSQLitePersister

from engines.base import SLEEP, Engine, Level, apply_pragmas, describe, inc


@action(reads=["x"], writes=["x"])
def step(state: State) -> State:
    """One chain action: ``x -> x + 1``."""
    return state.update(x=inc(state["x"]))


@action(reads=["x"], writes=["x"])
async def aroot(state: State) -> State:
    """The fan-out's first action."""
    return state.update(x=inc(state["x"]))


@action(reads=["x"], writes=["y"])
async def nap(state: State) -> State:
    """One fan-out branch, run as its own sub-application."""
    await asyncio.sleep(SLEEP)
    return state.update(y=state["x"])


@action(reads=["ys"], writes=["total"])
async def join(state: State) -> State:
    """The fan-out's join."""
    return state.update(total=len(state["ys"]))


class FanOut(MapStates):
    """``width`` copies of :func:`nap` over the same state, gathered with asyncio."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def action(self, state: State, inputs: dict[str, Any]) -> Any:
        return create_action(nap, "nap")

    def states(self, state: State, context: Any, inputs: dict[str, Any]) -> Any:
        for i in range(self.width):
            yield state.update(branch=i)

    async def reduce(self, state: State, states: AsyncGenerator[State, None]) -> State:  # type: ignore[override]
        ys = [sub["y"] async for sub in states]
        return state.update(ys=ys)

    def is_async(self) -> bool:
        return True

    @property
    def reads(self) -> list[str]:
        return ["x"]

    @property
    def writes(self) -> list[str]:
        return ["ys"]


class Burr(Engine):
    """Burr with its SQLite persister (WAL + requested level), or without a persister."""

    name = "Burr"
    distribution = "apache-burr"
    stock = "SQLitePersister: journal=DELETE, synchronous=FULL (no pragma set)"

    def __init__(self) -> None:
        self.persister: SQLitePersister | None = None
        self.path: Path | None = None
        self.level: Level = "full"

    def setup(self, tmpdir: Path, level: Level) -> str:
        self.level = level
        if level == "none":
            self.persister, self.path = None, None
            return "none (no persister)"
        self.path = tmpdir / "burr.db"
        con = sqlite3.connect(self.path, check_same_thread=False)
        apply_pragmas(con, level)
        self.persister = SQLitePersister(str(self.path), connection=con)
        self.persister.initialize()
        return describe(con)

    def teardown(self) -> None:
        if self.persister is not None:
            self.persister.connection.close()
        self.persister = None

    def _chain_app(self, n: int, x: int) -> Any:
        builder = (
            ApplicationBuilder()
            .with_actions(**{f"s{i}": step for i in range(n)})
            .with_transitions(*[(f"s{i - 1}", f"s{i}") for i in range(1, n)])
            .with_state(x=x)
            .with_entrypoint("s0")
            .with_identifiers(app_id=uuid.uuid4().hex)
        )
        if self.persister is not None:
            builder = builder.with_state_persister(self.persister)
        return builder.build()

    def chain_us_per_step(self, n: int) -> float:
        app = self._chain_app(n, 0)
        t = time.perf_counter()
        _, _, state = app.run(halt_after=[f"s{n - 1}"])
        elapsed = time.perf_counter() - t
        if state["x"] != n:
            raise RuntimeError(f"chain ended at {state['x']}, not {n}")
        return elapsed / n * 1e6

    def fanout_seconds(self, width: int) -> float:
        async def main() -> float:
            builder = (
                ApplicationBuilder()
                .with_actions(root=aroot, fan=FanOut(width), join=join)
                .with_transitions(("root", "fan"), ("fan", "join"))
                .with_state(x=0)
                .with_entrypoint("root")
                .with_identifiers(app_id=uuid.uuid4().hex)
            )
            persister = None
            if self.path is not None:
                con = await aiosqlite.connect(self.path)
                await con.execute("PRAGMA journal_mode=WAL")
                await con.execute(f"PRAGMA synchronous={self.level.upper()}")
                persister = AsyncSQLitePersister(con)
                await persister.initialize()
                builder = builder.with_state_persister(persister)
            try:
                app = await builder.abuild()
                t = time.perf_counter()
                _, _, state = await app.arun(halt_after=["join"])
                elapsed = time.perf_counter() - t
            finally:
                if persister is not None:
                    await persister.connection.close()
            if state["total"] != width:
                raise RuntimeError(f"join saw {state['total']} branches, not {width}")
            return elapsed

        return asyncio.run(main())

    def runs_per_second(self, seconds: float) -> float:
        """Burr runs one ``Application`` per run id, so building it is part of each run."""
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            self._chain_app(5, count).run(halt_after=["s4"])
            count += 1
        return count / (time.perf_counter() - t)


def make() -> Engine:
    """The Burr adapter."""
    return Burr()
