"""Pauses held inside child runs, as a fix upstream of them sees them.

A run that waits at ``node_2 > subgraph_node_2`` has no waiting record of its own: its unit ``node_2`` waits
inside the child run it started. A fix of a completed step upstream of ``node_2`` (``edit RUN --step node_1``)
answers that pause exactly as it answers a plain one: every unit downstream runs again, ``node_2`` included,
in a new child run. So the fix, in its transaction, writes the parent's record of the unit's wait (``gate_failed``,
superseded at once by the fix: the history a plain pause's record would have been), and ends the child run
(and the paused runs below it) ``failed``, saying which fix superseded it: its open pause is closed, and the
parent's next execution starts a new child for the unit rather than continuing the old one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.engine.children import CHILD_WAIT
from orchestrator.engine.tree import OpenPause, child_pauses, children
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import (
    CHILD_KIND,
    RunView,
    StepRecordView,
    join_path,
    live_records,
    parse_unit,
    path_head,
)
from orchestrator.store import NewDecision, NewStepRecord, Store


@dataclass
class HeldPause:
    """A unit of a run waiting inside its child run: the child, and the pauses it holds (paths from the run)."""

    unit: str
    child: RunView
    pauses: list[OpenPause]

    @property
    def first(self) -> StepRecordView:
        """The waiting record a fix that answers this wait is bound to (its review is the referee)."""
        return self.pauses[0].record


def held_pauses(store: Store, run_id: str, live: dict[str, StepRecordView]) -> list[HeldPause]:
    """The run's units waiting inside their child runs, in the order their pauses are listed."""
    found: dict[str, HeldPause] = {}
    latest = children(store, run_id)
    for pause in child_pauses(store, run_id, live):
        unit = path_head(pause.path)
        if unit not in found:
            found[unit] = HeldPause(unit, latest[unit], [])
        found[unit].pauses.append(pause)
    return list(found.values())


def downstream_held(held: list[HeldPause], affected: Callable[[str], bool]) -> list[HeldPause]:
    """Those whose unit a fix affects (``affected(unit)``: the unit is downstream of the fixed step)."""
    return [h for h in held if affected(h.unit)]


def wait_record(store: Store, run: RunView, held: HeldPause, attempt: int) -> NewStepRecord:
    """The parent's record of the unit's wait at its child's pauses, written superseded by the fix."""
    step_id, index, iteration = parse_unit(held.unit)
    spec = WorkflowSpec.model_validate(store.workflow_definition(run.workflow_id)[0]).step(step_id)
    waited_at = ", ".join(repr(p.path) for p in held.pauses)
    return NewStepRecord(run_id=run.run_id, workflow_id=run.workflow_id, step_id=step_id, step_type=spec.type,
                         agent=spec.agent_name, attempt=attempt, status="gate_failed",
                         started_at=held.child.created_at, ended_at=time.time(), error_type=CHILD_WAIT,
                         error_message=f"child run {held.child.run_id} waited at {waited_at}",
                         item_index=index, iteration=iteration)


def end_children(store: Store, held: HeldPause, fixed: str, run_id: str) -> list[NewDecision]:
    """Decisions ending the unit's child run, and the paused runs below it, as superseded by the fix of
    ``fixed`` in run ``run_id``."""
    reason = (f"superseded: the fix of step {fixed!r} of run {run_id} runs step {held.unit!r} again in a new child "
              "run; its pauses were closed")
    decisions = []
    pending = [held.child]
    while pending:
        run = pending.pop(0)
        decisions.append(NewDecision(None, run_status="failed", from_statuses=("paused",), run_id=run.run_id,
                                     error=reason))
        pending += [c for c in store.child_runs(run.run_id) if c.kind == CHILD_KIND and c.status == "paused"]
    return decisions


def side_effects_inside(store: Store, held: HeldPause) -> list[str]:
    """Steps with side effects that already ran in the unit's child run (by path from the parent): the new child
    runs them again."""
    spec = WorkflowSpec.model_validate(store.workflow_definition(held.child.workflow_id)[0])
    return [join_path(held.unit, r.unit) for r in live_records(store.step_records(held.child.run_id)).values()
            if r.status in ("succeeded", "gate_failed") and spec.step(r.step_id).side_effects]
