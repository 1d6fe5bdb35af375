"""Task families beyond the bifurcation grid: each is a generated workflow plus how its run reaches
an outcome (reviews included), with the faulty step known.

A family is a :class:`Family` in :data:`FAMILIES`: ``make(n, seed)`` returns a :class:`FamilyTask`,
whose ``drive`` runs the workflow into a store and returns the run id once the run has an outcome.
``run.py`` evaluates every registered family with every method and reports top-1 / top-3 per
family; adding a family is adding an entry here (and, if it needs them, step functions in tasks.py).

- ``critic-approved``: step k corrupts its value, a critic that verifies k against k+2 (or k-2
  against k) flags it and pauses the run before the last step, a reviewer approves the critic
  anyway, and the outcome is wrong. No other step has gates: the critic's overridden verdict is
  the only recorded signal.
- ``side-effecting-output``: step k corrupts its value and the output step has side effects (it
  files the answer) with a ``simulate`` dry run. Every replay reaches the output step with
  changed inputs, so attribution works only through ``simulate``; without it, every replay is
  blocked by the output step.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generate import HERE, Task, X, chain_parents, expected_value
from tasks import CORRUPT

from orchestrator.bind.binding import bind
from orchestrator.service import review
from orchestrator.service.runner import continue_run, start_run
from orchestrator.spec.model import WorkflowSpec
from orchestrator.store import Store

AGENTS = ("retriever", "analyst", "pricer", "writer")


@dataclass
class FamilyTask:
    task: Task
    drive: Callable[[Store, Task], str]
    """Run the task's workflow to an outcome (reviews included); returns the run id."""


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    make: Callable[[int, int], FamilyTask]
    """``(n, seed) -> FamilyTask``; the same arguments always give the same task."""


def approve_until_done(store: Store, task: Task) -> str:
    """Start the run; approve every pause (a reviewer who waves everything through) until it finishes."""
    run = start_run(store, task.workflow, {})
    while run.status == "paused":
        for waiting in [r.step_id for r in review.waiting_records(store, run.run_id)]:
            review.approve(store, run.run_id, step=waiting, reviewer="bench", comment="looks fine")
        run = continue_run(store, run.run_id)
    return run.run_id


def critic_approved(n: int, seed: int) -> FamilyTask:
    """Step k corrupts its value; a critic verifies (k, k+2) or (k-2, k) against the step before them."""
    if n < 7:
        raise ValueError("critic-approved tasks have at least 7 steps")
    rng = random.Random(f"critic-approved/{n}/{seed}")
    deltas = [rng.randint(1, 3) for _ in range(n)]
    parents = chain_parents(n, rng)
    agents = [AGENTS[i * len(AGENTS) // n] for i in range(n)]
    k = rng.randrange(2, n - 3)
    first, second = (k, k + 2) if rng.random() < 0.5 else (k - 2, k)
    expected = expected_value(parents, deltas)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        inputs: dict[str, Any] = {"delta": deltas[i]}
        if parents[i]:
            inputs.update({f"p{m}": f"s{p:03d}" for m, p in enumerate(parents[i])})
        else:
            inputs["x"] = "$inputs.x"
        if i == k:
            inputs["fault"] = CORRUPT
        if i == n - 1:
            inputs["expected"] = expected
        step: dict[str, Any] = {"id": f"s{i:03d}", "agent": agents[i], "run": "tasks:step", "inputs": inputs,
                                "baseline": "tasks:step_ref"}
        if i == n - 1:
            step["after"] = ["critic"]  # the last step acts only once the critic has passed (or been approved)
        steps.append(step)
    critic_inputs: dict[str, Any] = {"a": f"s{first:03d}", "b": f"s{second:03d}", "ia": first, "ib": second,
                                     "iu": first - 1}
    critic_inputs.update({"u": f"s{first - 1:03d}"} if first > 0 else {"x": "$inputs.x"})
    steps.append({"id": "critic", "type": "critic", "agent": "critic", "run": "tasks:consistent",
                  "verifies": [f"s{first:03d}", f"s{second:03d}"], "inputs": critic_inputs})
    name = f"bench-critic-approved-{n}-{seed}"
    spec = WorkflowSpec.model_validate({"name": name, "inputs": {"x": {"type": "integer", "default": X}},
                                        "steps": steps, "outcome": "tasks:score", "outcome_threshold": 0.9,
                                        "output": f"s{n - 1:03d}"})
    workflow = bind(spec, source=str(HERE / f"{name}.yaml"))
    task = Task(name, n, "critic-approved", "critic only", seed, workflow, f"s{k:03d}", agents[k], None, expected)
    return FamilyTask(task, approve_until_done)


def run_to_outcome(store: Store, task: Task) -> str:
    """Start the run (no gates: it finishes, confidently wrong) and return its id."""
    return start_run(store, task.workflow, {}).run_id


def side_effecting_output(n: int, seed: int) -> FamilyTask:
    """Step k corrupts its value; the output step files the answer (side effects) and declares a dry run."""
    rng = random.Random(f"side-effecting-output/{n}/{seed}")
    deltas = [rng.randint(1, 3) for _ in range(n)]
    parents = chain_parents(n, rng)
    agents = [AGENTS[i * len(AGENTS) // n] for i in range(n)]
    k = rng.randrange(0, n - 1)
    expected = expected_value(parents, deltas)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        inputs: dict[str, Any] = {"delta": deltas[i]}
        if parents[i]:
            inputs.update({f"p{m}": f"s{p:03d}" for m, p in enumerate(parents[i])})
        else:
            inputs["x"] = "$inputs.x"
        if i == k:
            inputs["fault"] = CORRUPT
        step: dict[str, Any] = {"id": f"s{i:03d}", "agent": agents[i], "run": "tasks:step", "inputs": inputs,
                                "baseline": "tasks:step_ref"}
        if i == n - 1:
            inputs["expected"] = expected
            step.update({"type": "action", "run": "tasks:deliver", "side_effects": True,
                         "simulate": "tasks:deliver_dry_run"})
            del step["baseline"]  # the output step is judged by re-running its dry run, as replays do
        steps.append(step)
    name = f"bench-side-effecting-output-{n}-{seed}"
    spec = WorkflowSpec.model_validate({"name": name, "inputs": {"x": {"type": "integer", "default": X}},
                                        "steps": steps, "outcome": "tasks:score", "outcome_threshold": 0.9,
                                        "output": f"s{n - 1:03d}"})
    workflow = bind(spec, source=str(HERE / f"{name}.yaml"))
    task = Task(name, n, "side-effecting-output", "none", seed, workflow, f"s{k:03d}", agents[k], None, expected)
    return FamilyTask(task, run_to_outcome)


FAMILIES: dict[str, Family] = {
    "critic-approved": Family("critic-approved", "a critic flagged the faulty step, a reviewer approved it "
                              "anyway, the outcome is wrong; no other gates", critic_approved),
    "side-effecting-output": Family("side-effecting-output", "a step corrupts its value and the output step has "
                                    "side effects with a `simulate` dry run; no gates", side_effecting_output),
}
