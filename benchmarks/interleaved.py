"""Two workflows measured against each other on one store, in alternation, so that a machine's load falls on
both alike: the protocol of ``bench_loops.py`` and ``bench_children.py``.

Each round runs ``runs`` executions of one workflow then of the other (which goes first alternates by round)
and keeps the median of each; a value is the execution's wall time divided by ``units`` (iterations, steps,
child runs: whatever the benchmark compares), in µs.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from orchestrator.binding import BoundWorkflow  # noqa: E402
from orchestrator.executor import Executor  # noqa: E402
from orchestrator.store import Store, open_store  # noqa: E402


async def timed_runs(store: Store, workflow: BoundWorkflow, runs: int, units: int) -> list[float]:
    """µs per unit of each of ``runs`` executions of ``workflow``, each of which must succeed."""
    executor = Executor(store, workflow)
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        result = await executor.start({})
        elapsed = time.perf_counter() - began
        assert result.status == "succeeded", result
        out.append(elapsed / units * 1e6)
    return out


def measure_pair(url: str, a: BoundWorkflow, b: BoundWorkflow, *, units: int, rounds: int,
                 runs: int) -> list[tuple[float, float]]:
    """(a, b) µs per unit, one pair per round, after one warm-up execution of each (imports, statements,
    registered workflows)."""
    store = open_store(url)
    pairs = []
    try:
        anyio.run(timed_runs, store, a, 1, units)
        anyio.run(timed_runs, store, b, 1, units)
        for r in range(rounds):
            first, second = (a, b) if r % 2 == 0 else (b, a)
            x = statistics.median(anyio.run(timed_runs, store, first, runs, units))
            y = statistics.median(anyio.run(timed_runs, store, second, runs, units))
            pairs.append((x, y) if first is a else (y, x))
    finally:
        store.close()
    return pairs
