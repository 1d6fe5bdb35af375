"""What a child run (a ``workflow:`` step) costs against the same steps written inline, at equal persistence.

Run it as ``.venv/bin/python benchmarks/bench_children.py [--rounds 5] [--runs 5]``. Each round runs, in
alternation, a parent of 20 ``workflow:`` steps in a chain, each running a child workflow of 2 no-op async steps,
and a flat workflow of the same 40 no-op steps in the same order, ``--runs`` times each, on a fresh SQLite file
(WAL, ``synchronous=NORMAL``, the store's own setting) and on ``memory://`` (no persistence: the engine's own
cost). A round's value is the median of its runs; the table prints µs per child for the parent, µs per 2 steps
for the flat workflow, and their difference: what one child run adds (its run row, its lease, its executor, the
parent's record of the step). The target is at most 1 ms more per child at NORMAL.

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

CHILDREN = 20
"""``workflow:`` steps of the parent, in a chain."""
CHILD_STEPS = 2
"""No-op steps of each child (and the flat workflow has CHILDREN * CHILD_STEPS of them)."""


async def _first(value: Any = None) -> dict[str, Any]:
    return {"n": 1}


async def _next(value: Any = None) -> dict[str, Any]:
    return {"n": 2}


def child_workflow() -> Workflow:
    wf = Workflow("bench-child", inputs={"value": {"type": "integer", "default": 0}})
    wf.step(id="c0", inputs={"value": "$inputs.value"})(_first)
    for i in range(1, CHILD_STEPS):
        wf.step(id=f"c{i}", inputs={"value": f"c{i - 1}"})(_next)
    return wf


def parent_workflow() -> BoundWorkflow:
    child = child_workflow()
    wf = Workflow("bench-parent", output=f"w{CHILDREN - 1}")
    for i in range(CHILDREN):
        wf.workflow_step(id=f"w{i}", workflow=child, inputs={"value": f"w{i - 1}.n" if i else 0})
    return wf.bind()


def flat_workflow() -> BoundWorkflow:
    wf = Workflow("bench-flat")
    previous: str | None = None
    for i in range(CHILDREN):
        for j in range(CHILD_STEPS):
            sid = f"w{i}_c{j}"
            wf.step(id=sid, inputs={"value": previous} if previous else {})(_first if j == 0 else _next)
            previous = sid
    return wf.bind()


def main() -> None:
    compare_main(f"{CHILDREN} child runs of {CHILD_STEPS} no-op async steps against the same "
                 f"{CHILDREN * CHILD_STEPS} steps inline", ("child", "inline"), parent_workflow, flat_workflow,
                 units=CHILDREN, description=__doc__.splitlines()[0])

if __name__ == "__main__":
    main()
