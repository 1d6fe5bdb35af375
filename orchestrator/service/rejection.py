"""How far a rejection reaches: the mapped instance that holds the rejected pause, or the whole tree.

A rejected pause ends the smallest unit that holds it and can end on its own: an instance of a mapped step.
A pause of an instance (``summarize[3]``, or an iteration of an instance that loops, ``summarize[3]#2``), or
anywhere inside an instance's child run (``per_ticket[2] > confirm``, and deeper), ends that instance
``rejected``: a record of the instance says so and why, its consumers read null from it (as from a skipped
instance), and the map goes on with the other instances. Any other pause ends its run, and a child run that
ends rejected ends the run above it in turn, up to an instance (which ends, its map going on) or to the root
(the whole tree ends). Rejecting a run as a whole (``reject RUN`` without ``--step``) ends that run.

Whatever ends, every open pause below it is closed in the same transaction (each gets the rejection as its
decision; a run that waits only through its child runs ends with them): no pause is ever left open under a
run that ended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from orchestrator.engine.tree import is_child, path_from_root, waiting_of
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import (
    CHILD_KIND,
    RunView,
    StepRecordView,
    join_path,
    live_records,
    parse_unit,
    path_head,
    split_path,
    unit_name,
)
from orchestrator.store import NewDecision, NewReview, NewStepRecord, Store

REJECTED = "Rejected"
"""``error_type`` of the records a rejection writes: an instance it ended, steps of an ended run that never ran."""


ENDED = ("succeeded", "rejected")
"""States of a run that nothing below it changes any more."""


@dataclass
class RejectionPlan:
    """What one rejection changes, worked out before anything is stored; stored by ``decide_all`` at once."""

    decisions: list[NewDecision]
    continues: str | None = None
    """The run that goes on (its instance ended), or None when the tree ended."""
    instance: str = ""
    """The instance ended, as named in ``continues`` (``per_ticket[2]``)."""
    ended: list[str] = field(default_factory=list)
    """Runs that end rejected, innermost first (those whose pauses were closed included)."""
    closed: list[str] = field(default_factory=list)
    """Other pauses closed with them, by path from the tree's root."""

    @property
    def going_on(self) -> NewDecision | None:
        """The decision of the run that goes on: it claims the continuation's lease."""
        return self.decisions[-1] if self.continues is not None else None


def instance_of(unit: str) -> str | None:
    """The instance a unit belongs to (``summarize[3]`` for ``summarize[3]`` and ``summarize[3]#2``), or None."""
    step_id, index, _ = parse_unit(path_head(unit))
    return None if index is None else unit_name(step_id, index)


def ended_instance_on(path: str) -> str | None:
    """The instance a rejection of the pause at ``path`` (named from the run asked) ends: the innermost instance
    on the path (``per_ticket[2]`` of ``per_ticket[2] > confirm``), or None when it ends the run."""
    units = split_path(path)
    for depth in range(len(units) - 1, -1, -1):
        instance = instance_of(units[depth])
        if instance is not None:
            return join_path(*units[:depth], instance)
    return None


def plan_pause_rejection(store: Store, rec: StepRecordView, review: NewReview) -> RejectionPlan:
    """Rejecting the waiting record ``rec`` (``review`` is the decision on it)."""
    instance = instance_of(rec.unit)
    why = _why(store, rec.run_id, rec.unit, review.comment)
    run = store.get_run(rec.run_id)
    if instance is not None:
        ended = _ended_instance(store, run, instance, why, attempt=rec.attempt)
        return RejectionPlan([NewDecision(review, [ended])], continues=run.run_id, instance=instance)
    plan = RejectionPlan([])
    _end_run(store, plan, run, why, review.reviewer, primary=review)
    return _upward(store, plan, run, why, review.reviewer)


def plan_run_rejection(store: Store, run_id: str, reviewer: str, comment: str | None) -> RejectionPlan:
    """Rejecting run ``run_id`` as a whole: its own pauses, and those of its child runs, are decided by it."""
    run = store.get_run(run_id)
    why = f"rejected as a whole at run {run_id}" + (f": {comment}" if comment else "")
    plan = RejectionPlan([])
    waiting = waiting_of(store, run_id)
    primary = _closing(waiting[0], reviewer, comment) if waiting else None
    _end_run(store, plan, run, why, reviewer, primary=primary)
    return _upward(store, plan, run, why, reviewer)


def _why(store: Store, run_id: str, unit: str, comment: str | None) -> str:
    path = join_path(path_from_root(store, run_id), unit)
    return f"rejected at step {path!r}" + (f": {comment}" if comment else "")


def _upward(store: Store, plan: RejectionPlan, run: RunView, why: str, reviewer: str) -> RejectionPlan:
    """The ended ``run``'s parent ends the instance that started it and goes on; else it ends too, and so on up."""
    while is_child(run):
        assert run.parent_run_id is not None and run.parent_step is not None
        parent = store.get_run(run.parent_run_id)
        if parent.status in ENDED:  # a child left open under a run that ended (before this rule): it closes alone
            return plan
        instance = instance_of(run.parent_step)
        if instance is not None and parent.status == "failed":  # the instance ends; the run stays failed
            plan.decisions.append(NewDecision(None, [_ended_instance(store, parent, instance, why)],
                                              run_status="failed", from_statuses=("failed",), run_id=parent.run_id,
                                              error=parent.error))
            return plan
        if instance is not None:
            plan.decisions.append(NewDecision(None, [_ended_instance(store, parent, instance, why)],
                                              run_id=parent.run_id))
            plan.continues, plan.instance = parent.run_id, instance
            return plan
        _end_run(store, plan, parent, why, reviewer, primary=None, handled=run.run_id)
        run = parent
    return plan


def _end_run(store: Store, plan: RejectionPlan, run: RunView, why: str, reviewer: str, *,
             primary: NewReview | None, handled: str = "") -> None:
    """Decisions that end ``run`` rejected (under ``primary``, the decision that ends it, when it has one) and
    close every open pause of its own and of its paused child runs (``handled``: a child already ended)."""
    plan.decisions.append(NewDecision(primary, _never_ran(store, run, why), run_status="rejected",
                                      from_statuses=("paused", "failed"), run_id=run.run_id))
    plan.ended.append(run.run_id)
    prefix = path_from_root(store, run.run_id)
    for rec in waiting_of(store, run.run_id):
        if primary is not None and rec.id == primary.record_id:
            continue
        plan.decisions.append(NewDecision(_closing(rec, reviewer, f"closed: {why}"), run_status="rejected",
                                          from_statuses=("rejected",)))
        plan.closed.append(join_path(prefix, rec.unit))
    for child in store.child_runs(run.run_id):
        if child.kind == CHILD_KIND and child.status == "paused" and child.run_id != handled:
            _end_run(store, plan, child, why, reviewer, primary=None)


def _closing(rec: StepRecordView, reviewer: str, comment: str | None) -> NewReview:
    return NewReview(rec.run_id, rec.id, rec.unit, decision="reject", reviewer=reviewer, comment=comment,
                     output_before=rec.output)


def _spec(store: Store, run: RunView) -> WorkflowSpec:
    return WorkflowSpec.model_validate(store.workflow_definition(run.workflow_id)[0])


def _ended_instance(store: Store, run: RunView, instance: str, why: str, attempt: int = 1) -> NewStepRecord:
    """The record of an instance a rejection ended: skipped (its consumers read null), saying why."""
    step_id, index, _ = parse_unit(instance)
    step = _spec(store, run).step(step_id)
    now = time.time()
    return NewStepRecord(run_id=run.run_id, workflow_id=run.workflow_id, step_id=step_id, step_type=step.type,
                         agent=step.agent_name, attempt=attempt, status="skipped", started_at=now, ended_at=now,
                         error_type=REJECTED, error_message=f"instance {why}", item_index=index,
                         skip_reason=f"instance {why}")


def _never_ran(store: Store, run: RunView, why: str) -> list[NewStepRecord]:
    """Skipped records of an ended run's steps that have no live record (a superseded step has not run for the
    run's result)."""
    have = set(live_records(store.step_records(run.run_id)))
    now = time.time()
    return [NewStepRecord(run_id=run.run_id, workflow_id=run.workflow_id, step_id=s.id, step_type=s.type,
                          agent=s.agent_name, attempt=0, status="skipped", started_at=now, ended_at=now,
                          error_type=REJECTED, error_message=f"run {why}")
            for s in _spec(store, run).steps if s.id not in have]
