"""LangGraph: a ``StateGraph`` with one node per step, checkpointed by ``SqliteSaver``.

``SqliteSaver`` sets ``journal_mode=WAL`` and leaves ``synchronous`` at sqlite3's default
(FULL); the benchmark hands it a connection with WAL and the requested level. Runs use
``durability="sync"``: the checkpoint of a step is committed before the next step starts,
which is what "persisted after every step" means for us (LangGraph's default, ``"async"``,
writes it concurrently with the next step). The fan-out and the map run on ``AsyncSqliteSaver``
(aiosqlite) because the sync saver has no async methods; no persistence is ``InMemorySaver``.
The map is LangGraph's map-reduce: a conditional edge returns one ``Send("same", {"item": i})``
per item, each ``same`` task's write is checkpointed (``durability="sync"``), and a reducer
(``operator.add``) collects the outputs for the ``count`` node.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import aiosqlite
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from engines.base import SLEEP, Engine, Level, apply_pragmas, describe, inc


class ChainState(TypedDict):
    """The chain's whole state: the running value."""

    x: int


class FanState(TypedDict):
    """The fan-out's state: the root value, each branch's result (appended), the join's count."""

    x: int
    done: Annotated[list[int], operator.add]
    total: int


class MapState(TypedDict):
    """The map's state: how many items, the list, the collected outputs (appended), their count."""

    x: int
    items: list[int]
    outputs: Annotated[list[int], operator.add]
    count: int


class ItemState(TypedDict):
    """What one ``Send`` hands its task: the item."""

    item: int


def step(state: ChainState) -> dict[str, int]:
    """One chain node: ``x -> x + 1``."""
    return {"x": inc(state["x"])}


async def nap(state: FanState) -> dict[str, list[int]]:
    """One fan-out branch."""
    await asyncio.sleep(SLEEP)
    return {"done": [state["x"]]}


def join(state: FanState) -> dict[str, int]:
    """The fan-out's join: runs once every branch has written."""
    return {"total": len(state["done"])}


def items(state: MapState) -> dict[str, list[int]]:
    """The map's list, known only at run time: ``0 .. x-1``."""
    return {"items": list(range(state["x"]))}


def send_each(state: MapState) -> list[Send]:
    """One ``same`` task per item."""
    return [Send("same", {"item": i}) for i in state["items"]]


async def same(state: ItemState) -> dict[str, list[int]]:
    """One no-op item: its value, appended to the outputs."""
    return {"outputs": [state["item"]]}


def count(state: MapState) -> dict[str, int]:
    """The collecting node: how many outputs it got."""
    return {"count": len(state["outputs"])}


def map_graph(checkpointer: Any) -> Any:
    """``items`` -> ``Send`` per item to ``same`` -> ``count``."""
    g = StateGraph(MapState)
    g.add_node("items", items)
    g.add_node("same", same)
    g.add_node("count", count)
    g.add_edge(START, "items")
    g.add_conditional_edges("items", send_each, ["same"])
    g.add_edge("same", "count")
    g.add_edge("count", END)
    return g.compile(checkpointer=checkpointer)


def chain_graph(n: int, checkpointer: Any) -> Any:
    """``s0 -> ... -> s{n-1}``, compiled with ``checkpointer``."""
    g = StateGraph(ChainState)
    for i in range(n):
        g.add_node(f"s{i}", step)
    g.add_edge(START, "s0")
    for i in range(1, n):
        g.add_edge(f"s{i - 1}", f"s{i}")
    g.add_edge(f"s{n - 1}", END)
    return g.compile(checkpointer=checkpointer)


def fanout_graph(width: int, checkpointer: Any) -> Any:
    """``root`` -> ``width`` sleeping branches -> ``join`` (a multi-source edge waits for all)."""
    g = StateGraph(FanState)
    g.add_node("root", lambda state: {"x": inc(state["x"])})
    names = [f"nap{i}" for i in range(width)]
    for name in names:
        g.add_node(name, nap)
        g.add_edge("root", name)
    g.add_node("join", join)
    g.add_edge(START, "root")
    g.add_edge(names, "join")
    g.add_edge("join", END)
    return g.compile(checkpointer=checkpointer)


class LangGraph(Engine):
    """LangGraph with its SQLite checkpointer (or the in-memory one)."""

    name = "LangGraph"
    distribution = "langgraph"
    stock = "SqliteSaver: journal=WAL, synchronous=FULL (sqlite3 default); durability='async'"

    def __init__(self) -> None:
        self.con: sqlite3.Connection | None = None
        self.saver: Any = None
        self.path: Path | None = None
        self.level: Level = "full"

    def setup(self, tmpdir: Path, level: Level) -> str:
        self.level = level
        if level == "none":
            self.saver, self.path = InMemorySaver(), None
            return "none (InMemorySaver), durability='sync'"
        self.path = tmpdir / "langgraph.db"
        self.con = sqlite3.connect(self.path, check_same_thread=False)
        apply_pragmas(self.con, level)
        self.saver = SqliteSaver(self.con)
        self.saver.setup()
        return describe(self.con) + ", durability='sync'"

    def teardown(self) -> None:
        if self.con is not None:
            self.con.close()
        self.con, self.saver = None, None

    def _config(self, n: int) -> dict[str, Any]:
        return {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": n + 10}

    def chain_us_per_step(self, n: int) -> float:
        graph = chain_graph(n, self.saver)
        config = self._config(n)
        t = time.perf_counter()
        out = graph.invoke({"x": 0}, config, durability="sync")
        elapsed = time.perf_counter() - t
        if out["x"] != n:
            raise RuntimeError(f"chain ended at {out['x']}, not {n}")
        return elapsed / n * 1e6

    @asynccontextmanager
    async def async_saver(self) -> AsyncIterator[Any]:
        """The async checkpointer at this level: ``AsyncSqliteSaver`` on WAL and the level's
        ``synchronous``, or ``InMemorySaver`` with no persistence."""
        if self.path is None:
            yield InMemorySaver()
            return
        async with aiosqlite.connect(self.path) as con:
            await con.execute("PRAGMA journal_mode=WAL")
            await con.execute(f"PRAGMA synchronous={self.level.upper()}")
            saver = AsyncSqliteSaver(con)
            await saver.setup()
            yield saver

    def fanout_seconds(self, width: int) -> float:
        async def main() -> float:
            async with self.async_saver() as saver:
                graph = fanout_graph(width, saver)
                t = time.perf_counter()
                out = await graph.ainvoke({"x": 0, "done": []}, self._config(5), durability="sync")
                elapsed = time.perf_counter() - t
            if out["total"] != width:
                raise RuntimeError(f"join saw {out['total']} branches, not {width}")
            return elapsed

        return asyncio.run(main())

    def map_us_per_item(self, n: int) -> float:
        async def main() -> float:
            async with self.async_saver() as saver:
                graph = map_graph(saver)
                t = time.perf_counter()
                out = await graph.ainvoke({"x": n, "outputs": []}, self._config(5), durability="sync")
                elapsed = time.perf_counter() - t
            if out["count"] != n:
                raise RuntimeError(f"count saw {out['count']} outputs, not {n}")
            return elapsed / n * 1e6

        return asyncio.run(main())

    def runs_per_second(self, seconds: float) -> float:
        graph = chain_graph(5, self.saver)
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            graph.invoke({"x": count}, self._config(5), durability="sync")
            count += 1
        return count / (time.perf_counter() - t)


def make() -> Engine:
    """The LangGraph adapter."""
    return LangGraph()
