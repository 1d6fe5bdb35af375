"""Hamilton: a DAG of functions, persisted through its cache (``.with_cache()``).

Hamilton has no checkpointer; its durable record of each node is the cache:
``SQLiteMetadataStore`` commits one metadata row per node and ``FileResultStore`` writes the
node's pickled result to a file (``write_bytes``, no fsync). Stock, the metadata connection has
no pragma set (journal=DELETE, synchronous=FULL); the benchmark sets WAL and the requested
level on it. The result files are never fsynced, so Hamilton's FULL is FULL for metadata only.
Each run gets new inputs, so every node misses the cache and is computed and written.
Hamilton's nodes are functions named after their outputs, so the chain's module is generated
into the temp dir (real source, which the cache's code fingerprint needs). The async driver
cannot take the cache adapter (two adapters would both implement
``do_node_execute``), so the fan-out runs without persistence, said beside its number.

The map is Hamilton's ``Parallelizable``/``Collect`` (dynamic execution): ``item`` yields each
element of ``items``, ``same`` runs once per item, ``count`` collects them. Its nodes are plain
functions (the async driver has no dynamic execution), run one after another on this thread by
the synchronous executor: with Hamilton's default multithreading executor for the parallel block,
its thread-local metadata connections contend for the SQLite write lock and a map of 600 items
or more fails with "database is locked".
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from hamilton import async_driver, driver
from hamilton.caching.stores.file import FileResultStore
from hamilton.caching.stores.sqlite import SQLiteMetadataStore
from hamilton.execution import executors

from engines.base import SLEEP, Engine, Level, apply_pragmas, describe


def _module(tmpdir: Path, name: str, source: str) -> ModuleType:
    """Write ``source`` to ``tmpdir/name.py`` and import it (Hamilton reads functions' source)."""
    path = tmpdir / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def chain_source(n: int) -> str:
    """``s0(x)``, ``s1(s0)``, ...: each node depends on the previous one by parameter name."""
    lines = ["def s0(x: int) -> int:\n    return x + 1\n"]
    lines += [f"def s{i}(s{i - 1}: int) -> int:\n    return s{i - 1} + 1\n" for i in range(1, n)]
    return "\n".join(lines)


def fanout_source(width: int) -> str:
    """``root(x)``, ``nap{i}(root)`` awaiting a sleep, ``join(nap0, ...)``."""
    lines = ["import asyncio\n", "def root(x: int) -> int:\n    return x + 1\n"]
    lines += [
        f"async def nap{i}(root: int) -> int:\n    await asyncio.sleep({SLEEP})\n    return root\n"
        for i in range(width)
    ]
    params = ", ".join(f"nap{i}: int" for i in range(width))
    lines.append(f"def join({params}) -> int:\n    return {width}\n")
    return "\n".join(lines)


MAP_SOURCE = """\
from hamilton.htypes import Collect, Parallelizable


def items(x: int) -> list[int]:
    return list(range(x))


def item(items: list[int]) -> Parallelizable[int]:
    yield from items


def same(item: int) -> int:
    return item


def count(same: Collect[int]) -> int:
    return len(list(same))
"""
"""The map: ``items`` -> ``same`` per item (``Parallelizable``) -> ``count`` (``Collect``)."""


class Hamilton(Engine):
    """Hamilton's sync driver with its SQLite-metadata cache (or without a cache)."""

    name = "Hamilton"
    distribution = "apache-hamilton"
    stock = "cache: SQLiteMetadataStore journal=DELETE, synchronous=FULL; result files not fsynced"

    def __init__(self) -> None:
        self.tmpdir = Path(".")
        self.level: Level = "full"
        self.metadata: SQLiteMetadataStore | None = None
        self.modules = 0

    def setup(self, tmpdir: Path, level: Level) -> str:
        self.tmpdir, self.level = tmpdir, level
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # node execution recurses per dependency
        if level == "none":
            self.metadata = None
            return "none (no cache)"
        self.metadata = SQLiteMetadataStore(path=str(tmpdir / "cache"))
        apply_pragmas(self.metadata.connection, level)  # the driver runs nodes on this (main) thread
        return describe(self.metadata.connection) + " (metadata); result files: no fsync"

    def teardown(self) -> None:
        if self.metadata is not None:
            self.metadata.connection.close()  # the store object, and its thread-local, are dropped next
        self.metadata = None

    def _driver(self, n: int) -> Any:
        self.modules += 1
        module = _module(self.tmpdir, f"hamilton_chain_{n}_{self.modules}", chain_source(n))
        return self._cached(driver.Builder().with_modules(module)).build()

    def _cached(self, builder: Any) -> Any:
        """``builder`` with the cache at this level (none with no persistence)."""
        if self.metadata is not None:
            builder = builder.with_cache(
                metadata_store=self.metadata, result_store=FileResultStore(path=str(self.tmpdir / "cache" / "results"))
            )
        return builder

    def chain_us_per_step(self, n: int) -> float:
        dr = self._driver(n)
        t = time.perf_counter()
        out = dr.execute([f"s{n - 1}"], inputs={"x": 0})
        elapsed = time.perf_counter() - t
        if out[f"s{n - 1}"] != n:
            raise RuntimeError(f"chain ended at {out[f's{n - 1}']}, not {n}")
        return elapsed / n * 1e6

    def caveat(self, workload: str) -> str:
        if workload == "fanout" and self.metadata is not None:
            return "not persisted: the async driver cannot take the cache adapter"
        if workload == "map":
            return "sync functions, run one by one: dynamic execution has no async driver"
        return ""

    def fanout_seconds(self, width: int) -> float:
        module = _module(self.tmpdir, f"hamilton_fan_{width}", fanout_source(width))

        async def main() -> float:
            dr = await async_driver.Builder().with_modules(module).build()
            t = time.perf_counter()
            out = await dr.execute(["join"], inputs={"x": 0})
            elapsed = time.perf_counter() - t
            if out["join"] != width:
                raise RuntimeError("join did not run")
            return elapsed

        return asyncio.run(main())

    def map_us_per_item(self, n: int) -> float:
        self.modules += 1
        module = _module(self.tmpdir, f"hamilton_map_{self.modules}", MAP_SOURCE)
        builder = (driver.Builder().with_modules(module).enable_dynamic_execution(allow_experimental_mode=True)
                   .with_local_executor(executors.SynchronousLocalTaskExecutor())
                   .with_remote_executor(executors.SynchronousLocalTaskExecutor()))
        dr = self._cached(builder).build()
        t = time.perf_counter()
        out = dr.execute(["count"], inputs={"x": n})
        elapsed = time.perf_counter() - t
        if out["count"] != n:
            raise RuntimeError(f"count saw {out['count']} outputs, not {n}")
        return elapsed / n * 1e6

    def runs_per_second(self, seconds: float) -> float:
        """One driver; each ``execute`` is a new cache run id, and new inputs miss the cache."""
        dr = self._driver(5)
        count, t = 0, time.perf_counter()
        while count < 20 or time.perf_counter() - t < seconds:
            dr.execute(["s4"], inputs={"x": count})
            count += 1
        return count / (time.perf_counter() - t)


def make() -> Engine:
    """The Hamilton adapter."""
    return Hamilton()
