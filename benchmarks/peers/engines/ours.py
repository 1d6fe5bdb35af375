"""Our orchestrator, through its public Python API (``Workflow`` -> ``start_run``).

All imports of the orchestrator live in the block below. Sync step functions run on a worker
thread, async ones on the loop, so both are measured as separate engines.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engines.base import SLEEP, Engine, Level, Unsupported, database_bytes, inc

# -- the orchestrator's public API ---------------------------------------------------------------
from orchestrator import Workflow, start_run
from orchestrator import open_store as _open_store

# ---------------------------------------------------------------------------------------------


async def ainc(value: int) -> int:
    """The async twin of :func:`inc`: no worker-thread hop."""
    return value + 1


async def nap(value: int) -> int:
    """A fan-out step: waits like an I/O-bound call."""
    await asyncio.sleep(SLEEP)
    return value


async def gather(**values: int) -> int:
    """The fan-out's join step."""
    return len(values)


async def items(n: int) -> list[int]:
    """The map's list, known only at run time: ``0 .. n-1``."""
    return list(range(n))


async def same(value: int) -> int:
    """One no-op item: its value back."""
    return value


async def count(values: list[int]) -> int:
    """The map's collecting step: how many outputs it got."""
    return len(values)


def _runnable(wf: Workflow) -> Any:
    """What ``start_run`` takes: the bound workflow."""
    return wf.bind()


def chain_workflow(n: int, fn: Callable[..., Any], name: str, **options: Any) -> Any:
    """``s0 .. s{n-1}``, each feeding the next; the output is the last step's."""
    wf = Workflow(name, inputs={"x": "integer"}, output=f"s{n - 1}")
    wf.step(id="s0", inputs={"value": "$inputs.x"}, **options)(fn)
    for i in range(1, n):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"}, **options)(fn)
    return _runnable(wf)


def fanout_workflow(width: int) -> Any:
    """``root`` -> ``width`` sleeping steps -> ``join``."""
    wf = Workflow("peers-fanout", inputs={"x": "integer"}, output="join")
    wf.step(id="root", inputs={"value": "$inputs.x"})(ainc)
    for i in range(width):
        wf.step(id=f"nap{i}", inputs={"value": "root"})(nap)
    wf.step(id="join", inputs={f"v{i}": f"nap{i}" for i in range(width)})(gather)
    return _runnable(wf)


def map_workflow(n: int) -> Any:
    """``items`` -> ``same`` once per item (``for_each``) -> ``count`` of the collected list."""
    wf = Workflow(f"peers-map-{n}", inputs={"x": "integer"}, output="count")
    wf.step(id="items", inputs={"n": "$inputs.x"})(items)
    wf.step(id="same", for_each="items", inputs={"value": "$item"})(same)
    wf.step(id="count", inputs={"values": "same"})(count)
    return _runnable(wf)


def static_fanout_workflow(n: int) -> Any:
    """The same work written out: ``items`` -> ``n`` steps, each with its item as a literal -> ``count``."""
    wf = Workflow(f"peers-static-{n}", inputs={"x": "integer"}, output="count")
    wf.step(id="items", inputs={"n": "$inputs.x"})(items)
    for i in range(n):
        wf.step(id=f"same{i}", params={"value": i}, after=["items"])(same)
    wf.step(id="count", inputs={f"v{i}": f"same{i}" for i in range(n)})(gather)
    return _runnable(wf)


class Ours(Engine):
    """The orchestrator on its SQLite store (``?synchronous=...``) or its ``memory://`` store."""

    distribution = "orchestrator"
    stock = "journal=WAL, synchronous=NORMAL (default; ?synchronous=full for FULL)"

    def __init__(self, variant: str) -> None:
        self.variant = variant
        self.fn: Callable[..., Any] = ainc if variant == "async" else inc
        self.options: dict[str, Any] = {"inline": True} if variant == "inline sync" else {}
        self.name = f"ours ({variant} steps)"  # type: ignore[misc]
        self.store: Any = None
        self.path: Path | None = None
        self.runs = itertools.count()

    def setup(self, tmpdir: Path, level: Level) -> str:
        if level == "none":
            try:
                self.store = _open_store("memory://")
            except Exception as exc:  # the memory store may not exist on every revision
                raise Unsupported(f"memory store pending ({type(exc).__name__})") from exc
            return "none (memory:// store)"
        self.path = tmpdir / "ours.db"
        self.store = _open_store(f"sqlite:///{self.path}?synchronous={level}")
        return self._describe(level)

    def _describe(self, level: str) -> str:
        """Read the pragmas back from the store's connection when it exposes one."""
        try:
            con = self.store.connection  # the SQLite store's own sqlite3 connection
            journal = con.execute("PRAGMA journal_mode").fetchone()[0]
            sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[con.execute("PRAGMA synchronous").fetchone()[0]]
            return f"journal={journal.upper()}, synchronous={sync}"
        except Exception:
            return f"journal=WAL, synchronous={level.upper()} (from the store URL)"

    def teardown(self) -> None:
        if self.store is not None:
            close = getattr(self.store, "close", None)
            if close is not None:
                close()
            self.store = None

    def _run(self, workflow: Any, x: int, **kwargs: Any) -> Any:
        result = start_run(self.store, workflow, {"x": x}, **kwargs)
        if result.status != "succeeded":
            raise RuntimeError(f"run ended {result.status}: {result.error}")
        return result

    def chain_us_per_step(self, n: int) -> float:
        workflow = chain_workflow(n, self.fn, f"peers-chain-{n}-{self.variant}", **self.options)
        gc.collect()
        t = time.perf_counter()
        result = self._run(workflow, next(self.runs))
        elapsed = time.perf_counter() - t
        if n > 1 and not isinstance(result.output, int):
            raise RuntimeError(f"unexpected chain output {result.output!r}")
        return elapsed / n * 1e6

    def fanout_seconds(self, width: int) -> float:
        workflow = fanout_workflow(width)
        gc.collect()
        t = time.perf_counter()
        self._run(workflow, 0)  # the default concurrency: what a user gets with no flag
        return time.perf_counter() - t

    def map_us_per_item(self, n: int) -> float:
        return self._per_item(map_workflow(n), n)

    def static_fanout_us_per_item(self, n: int) -> float:
        return self._per_item(static_fanout_workflow(n), n)

    def _per_item(self, workflow: Any, n: int) -> float:
        """One run of a workflow whose ``count`` step sees ``n`` outputs, at the default concurrency."""
        gc.collect()
        t = time.perf_counter()
        result = self._run(workflow, n)
        elapsed = time.perf_counter() - t
        if result.output != n:
            raise RuntimeError(f"the collecting step saw {result.output!r} outputs, not {n}")
        return elapsed / n * 1e6

    def bytes_per_step(self, n: int) -> float:
        if self.path is None:
            raise Unsupported("no database file")
        workflow = chain_workflow(n, self.fn, f"peers-bytes-{n}-{self.variant}", **self.options)
        self._run(workflow, -1)  # the workflow row is stored once, not per run
        before = database_bytes(self.path)
        self._run(workflow, next(self.runs))
        return (database_bytes(self.path) - before) / n

    def runs_per_second(self, seconds: float) -> float:
        workflow = chain_workflow(5, self.fn, f"peers-five-{self.variant}", **self.options)
        self._run(workflow, -1)  # registered, code paths warm
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            self._run(workflow, count)
            count += 1
        return count / (time.perf_counter() - t)


def make(variant: str = "sync") -> Engine:
    """The adapter for ``variant`` ``sync``, ``inline sync`` (``inline: true``) or ``async`` step functions."""
    return Ours(variant)
