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

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.interleaved import compare_main  # noqa: E402
from orchestrator.bind.binding import BoundWorkflow  # noqa: E402
from orchestrator.bind.python_workflow import Workflow  # noqa: E402

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
    compare_main(f"{LENGTH} iterations of a no-op async step against a {LENGTH}-step chain of it",
                 ("iteration", "step"), loop_workflow, chain_workflow, units=LENGTH,
                 description=__doc__.splitlines()[0])

if __name__ == "__main__":
    main()
