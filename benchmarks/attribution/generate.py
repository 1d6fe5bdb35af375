"""Controlled bifurcation tasks: generated workflows with a fault injected at a known step.

A task is a workflow of ``n`` steps (a chain with random skip connections, or three parallel
agent lanes merged by a writer), one fault of a given type at a known step, and gates on all,
half or none of the steps (``range`` checks of value and quality, in ``warn`` mode so every run
finishes and every verdict is recorded). Every step declares its fault-free twin as
``baseline``, so replay methods have a reference for each step.

Failure types (seed 000):

- ``propagated``: step k corrupts its value; every later step faithfully processes it.
- ``missed``: step k is right but unhelpful for what follows (quality 0.6 downstream).
- ``compensated``: step k corrupts its value; step k+2 patches it by luck (quality 0.7).
- ``confusion``: three agents work in parallel lanes; one lane's step is wrong and the writer
  merging the lanes cannot tell which.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import COMPENSATE, CORRUPT, UNHELPFUL

from orchestrator.bind.binding import BoundWorkflow, bind
from orchestrator.spec.model import WorkflowSpec

HERE = Path(__file__).parent
FAILURES = ("propagated", "missed", "compensated", "confusion")
COVERAGES = ("all", "half", "none")
BLOCK_AGENTS = ("retriever", "analyst", "pricer", "writer")
LANE_AGENTS = ("retriever", "analyst", "pricer")
X = 3


@dataclass
class Task:
    name: str
    n: int
    failure: str
    gates: str
    seed: int
    workflow: BoundWorkflow
    faulty: str
    faulty_agent: str
    compensator: str | None
    expected: int


def chain_parents(n: int, rng: random.Random) -> list[list[int]]:
    parents: list[list[int]] = [[]]
    for i in range(1, n):
        ps = [i - 1]
        if i >= 2 and rng.random() < 0.3:
            ps.append(rng.randrange(0, i - 1))
        parents.append(ps)
    return parents


def _lane_parents(n: int) -> tuple[list[list[int]], list[int]]:
    """Three chains from the input, merged by the last step; returns parents and each step's lane."""
    body = n - 1
    sizes = [body // 3 + (1 if i < body % 3 else 0) for i in range(3)]
    parents: list[list[int]] = []
    lanes: list[int] = []
    ends = []
    for lane, size in enumerate(sizes):
        for j in range(size):
            parents.append([] if j == 0 else [len(parents) - 1])
            lanes.append(lane)
        ends.append(len(parents) - 1)
    parents.append(ends)
    lanes.append(3)
    return parents, lanes


def expected_value(parents: list[list[int]], deltas: list[int]) -> int:
    values: list[int] = []
    for i, ps in enumerate(parents):
        base = max(values[p] for p in ps) if ps else X
        values.append(base + deltas[i])
    return values[-1]


def generate(n: int, failure: str, gates: str, seed: int, *, baselines: bool = True) -> Task:
    """One task; the same arguments always give the same workflow and fault.

    Without ``baselines`` no step declares one, so replay methods compare each step with a fresh
    re-execution of itself.
    """
    if n < 5:
        raise ValueError("tasks have at least 5 steps")
    rng = random.Random(f"{n}/{failure}/{gates}/{seed}")
    deltas = [rng.randint(1, 3) for _ in range(n)]
    compensator = None
    if failure == "confusion":
        parents, lanes = _lane_parents(n)
        agents = [LANE_AGENTS[lane] if lane < 3 else "writer" for lane in lanes]
        k = rng.randrange(0, n - 1)
        faults = {k: CORRUPT}
    else:
        parents = chain_parents(n, rng)
        agents = [BLOCK_AGENTS[i * len(BLOCK_AGENTS) // n] for i in range(n)]
        if failure == "compensated":
            k = rng.randrange(0, n - 2)
            j = k + 2
            # the patch must sit on every path from the fault to the output
            parents = [[p for p in ps if not (k <= p < j < i)] for i, ps in enumerate(parents)]
            faults = {k: CORRUPT, j: COMPENSATE}
            compensator = f"s{j:03d}"
        else:
            k = rng.randrange(0, n - 1)
            faults = {k: CORRUPT if failure == "propagated" else UNHELPFUL}
    expected = expected_value(parents, deltas)
    bound = X + 3 * n + 10
    steps: list[dict[str, Any]] = []
    for i in range(n):
        inputs: dict[str, Any] = {"delta": deltas[i]}
        if parents[i]:
            inputs.update({f"p{m}": f"s{p:03d}" for m, p in enumerate(parents[i])})
        else:
            inputs["x"] = "$inputs.x"
        if i in faults:
            inputs["fault"] = faults[i]
        if i == n - 1:
            inputs["expected"] = expected
        step: dict[str, Any] = {"id": f"s{i:03d}", "agent": agents[i], "run": "tasks:step", "inputs": inputs}
        if baselines:
            step["baseline"] = "tasks:step_ref"
        if gates == "all" or (gates == "half" and i % 2 == 0):
            step["gates"] = [{"gate": "range", "field": "value", "max": bound},
                             {"gate": "range", "field": "quality", "min": 0.9}]
            step["on_gate_fail"] = "warn"
        steps.append(step)
    name = f"bench-{failure}-{gates}-{n}-{seed}" + ("" if baselines else "-nobaseline")
    spec = WorkflowSpec.model_validate({"name": name, "inputs": {"x": {"type": "integer", "default": X}},
                                        "steps": steps, "outcome": "tasks:score", "outcome_threshold": 0.9,
                                        "output": f"s{n - 1:03d}"})
    workflow = bind(spec, source=str(HERE / f"{name}.yaml"))
    return Task(name, n, failure, gates, seed, workflow, f"s{k:03d}", agents[k], compensator, expected)
