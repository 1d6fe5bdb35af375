"""What an iteration of a ``repeat:`` loop costs against a step of a chain, at equal persistence.

Run it as ``.venv/bin/python benchmarks/bench_loops.py [--rounds 5] [--runs 5]``. Each round runs, in
alternation, a loop of 100 iterations of a no-op async step (``until: iteration >= 100``, ``max: 100``) and a
chain of 100 steps of the same no-op (each consuming the one before, as an iteration consumes ``$previous``),
``--runs`` times each, on a fresh SQLite file (WAL, ``synchronous=NORMAL``, the store's own setting) and on
``memory://`` (no persistence: the engine's own cost). A round's value is the median of its runs in µs per
iteration (per step for the chain); the table prints each round's ratio and the median ratio. An iteration
pays what a step attempt pays (its record, its commit) plus evaluating ``until`` and, once per loop, the
loop's own record.

Wall-clock numbers belong here, never in pytest.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.interleaved import measure_pair  # noqa: E402
from orchestrator.binding import BoundWorkflow  # noqa: E402
from orchestrator.pyapi import Workflow  # noqa: E402

LENGTH = 100
"""Iterations of the loop (its max is at most 100) and steps of the chain."""


async def _noop(previous: Any = None, iteration: int | None = None) -> dict[str, Any]:
    return {"n": iteration}


def loop_workflow() -> BoundWorkflow:
    wf = Workflow("bench-loop")
    wf.step(id="s", inputs={"previous": "$previous", "iteration": "$iteration"},
            repeat={"until": f"iteration >= {LENGTH}", "max": LENGTH})(_noop)
    return wf.bind()


def chain_workflow() -> BoundWorkflow:
    wf = Workflow("bench-chain")
    for i in range(LENGTH):
        async def step(previous: Any = None) -> dict[str, Any]:
            return {"n": 1}
        wf.step(id=f"s{i}", inputs={"previous": f"s{i - 1}"} if i else {})(step)
    return wf.bind()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"SQLite (NORMAL)": f"sqlite:///{Path(tmp) / 'bench.db'}", "memory://": "memory://"}
        print(f"{LENGTH} iterations of a no-op async step against a {LENGTH}-step chain of it; "
              f"{args.rounds} interleaved rounds, median of {args.runs} runs each")
        print(f"{'store':<16} {'iteration µs':>13} {'step µs':>9} {'ratio':>7}  per round")
        for name, url in stores.items():
            pairs = measure_pair(url, loop_workflow(), chain_workflow(), units=LENGTH, rounds=args.rounds,
                                 runs=args.runs)
            ratios = [a / b for a, b in pairs]
            print(f"{name:<16} {statistics.median(a for a, _ in pairs):>13.1f} "
                  f"{statistics.median(b for _, b in pairs):>9.1f} {statistics.median(ratios):>6.2f}x  "
                  + " ".join(f"{r:.2f}x" for r in ratios))


if __name__ == "__main__":
    main()
