"""Two workflows measured against each other on one store, in alternation, so that a machine's load falls on
both alike: the protocol of ``bench_loops.py`` and ``bench_children.py``.

Each round runs ``runs`` executions of one workflow then of the other (which goes first alternates by round)
and keeps the median of each; a value is the execution's wall time divided by ``units`` (iterations, steps,
child runs: whatever the benchmark compares), in µs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from orchestrator.bind.binding import BoundWorkflow  # noqa: E402
from orchestrator.engine.executor import Executor  # noqa: E402
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


def compare_main(headline: str, labels: tuple[str, str], a: Callable[[], BoundWorkflow],
                 b: Callable[[], BoundWorkflow], *, units: int, description: str) -> None:
    """A benchmark's command line: ``--rounds`` and ``--runs``, then the pair measured on a fresh SQLite file
    (WAL, ``synchronous=NORMAL``) and on ``memory://``, one table row each: both medians in µs per unit, what
    ``a`` adds, their ratio, and each round's ratio."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"SQLite (NORMAL)": f"sqlite:///{Path(tmp) / 'bench.db'}", "memory://": "memory://"}
        print(f"{headline}; {args.rounds} interleaved rounds, median of {args.runs} runs each")
        print(f"{'store':<16} {labels[0] + ' µs':>13} {labels[1] + ' µs':>13} {'extra µs':>9} {'ratio':>7}  per round")
        for name, url in stores.items():
            pairs = measure_pair(url, a(), b(), units=units, rounds=args.rounds, runs=args.runs)
            ratios = [x / y for x, y in pairs]
            print(f"{name:<16} {statistics.median(x for x, _ in pairs):>13.1f} "
                  f"{statistics.median(y for _, y in pairs):>13.1f} {statistics.median(x - y for x, y in pairs):>9.1f} "
                  f"{statistics.median(ratios):>6.2f}x  " + " ".join(f"{r:.2f}x" for r in ratios))
