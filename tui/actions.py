"""The review app's writes: each is one call of the function the CLI calls for the same verb.

``orchestrator approve`` and the ``a`` key both end in :func:`orchestrator.service.review.approve`, so a
decision is the same whichever face made it. No Textual here; the app runs these in thread
workers and reports what they return or raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.engine.run_state import RunResult
    from orchestrator.service.labels import LabelResult
    from orchestrator.service.reject_effects import RejectEffect
    from orchestrator.service.review import Decision
    from orchestrator.spec.events import EventHook
    from orchestrator.spec.records import StepRecordView
    from orchestrator.store import Lease, Store

DECISION_VERBS = {"approve": "approved", "edit": "edited", "retry": "sent back for a retry", "reject": "rejected"}


def decide(store: Store, run_id: str, decision: str, *, step: str | None = None, reviewer: str | None = None,
           comment: str | None = None, output: Any = None, rerun_side_effects: bool = False,
           force: bool = False, checked: object = None) -> Decision:
    """Apply ``approve``/``retry``/``reject``/``edit`` to the paused step, or ``edit``/``retry`` to a
    completed step (a fix at the pause's cause); raises ReviewError when it does not apply.
    ``force``: store an edit its gates refuse (EditRefusedError otherwise), recorded as forced; ``checked``, the
    refusal's ``checked``, spares evaluating the gates again.

    A decision that continues the run claims the run's lease in its own transaction, as the CLI's
    does; :func:`continue_after_decision` continues under ``decision.lease``.
    """
    from orchestrator.engine.executor import new_lease
    from orchestrator.service import review

    if decision == "reject":
        return review.reject(store, run_id, step=step, reviewer=reviewer, comment=comment)
    lease = new_lease(run_id)
    if decision == "edit":
        return review.edit(store, run_id, output, step=step, reviewer=reviewer, comment=comment,
                           force=force, rerun_side_effects=rerun_side_effects, lease=lease, checked=checked)
    if decision == "retry":
        return review.retry(store, run_id, step=step, reviewer=reviewer, comment=comment,
                            rerun_side_effects=rerun_side_effects, lease=lease)
    return review.approve(store, run_id, step=step, reviewer=reviewer, comment=comment, lease=lease)


def reject_effect(store: Store, run_id: str, step: str | None) -> RejectEffect:
    """What rejecting the pause will do: the confirmation's title and body (ReviewError: no such pause)."""
    from orchestrator.service.reject_effects import reject_effect as effect

    return effect(store, run_id, step)


def _located(store: Store, run_id: str, step: str | None) -> tuple[str, str | None]:
    """The run holding ``step`` and the unit there (a path ``research > retrieve`` names a child run's unit)."""
    from orchestrator.service.review_tree import locate

    target = locate(store, run_id, step)
    return target.run_id, target.step


def is_fix(store: Store, run_id: str, step: str | None) -> bool:
    """Whether an edit or retry of ``step`` is a fix of a completed step rather than a decision on a pause."""
    from orchestrator.service import review

    run_id, step = _located(store, run_id, step)
    return review.is_tree_fix(store, run_id, step) or review.is_fix(store, run_id, step)


def fix_side_effects(store: Store, run_id: str, step: str, decision: str) -> list[str]:
    """Steps with side effects that fixing ``step`` would run again (ReviewError when it cannot be fixed)."""
    from orchestrator.service import review

    located, unit = _located(store, run_id, step)
    assert unit is not None
    if review.is_tree_fix(store, located, unit):
        return review.plan_tree_fix(store, located, unit, rerun_step=decision == "retry").side_effects
    workflow, _ = review.continuable(store, located)
    return review.plan_fix(store, located, unit, workflow, rerun_step=decision == "retry").side_effects


def editable_record(store: Store, run_id: str, step: str | None) -> tuple[StepRecordView, list[str]]:
    """The record an edit would replace (the paused one, or a completed step's live one), and the
    labels of the gates the new output must pass."""
    from orchestrator.service import review
    from orchestrator.spec.model import WorkflowSpec

    run_id, step = _located(store, run_id, step)
    if step is not None and review.is_tree_fix(store, run_id, step):
        rec = review.plan_tree_fix(store, run_id, step, rerun_step=False).bottom.record
    elif step is not None and review.is_fix(store, run_id, step):
        workflow, _ = review.continuable(store, run_id)
        rec = review.plan_fix(store, run_id, step, workflow, rerun_step=False).record
    else:
        rec = review.paused_record(store, run_id, step)
    spec = WorkflowSpec.model_validate(store.workflow_definition(store.get_run(run_id).workflow_id)[0])
    return rec, [gate.label for gate in spec.step(rec.step_id).gates]


def label(store: Store, run_id: str, *, correct: bool, reason: str | None, reviewer: str | None) -> LabelResult:
    """Record a human outcome through the CLI's ``label_run``; the single place the app labels a run."""
    from orchestrator.service.labels import label_run

    return label_run(store, run_id, correct=correct, reason=reason or None, reviewer=reviewer)


def continue_after_decision(store: Store, run_id: str, on_event: EventHook, lease: Lease | None = None) -> RunResult:
    """Resume the run in this thread, as ``orchestrator resume --stream`` would, reporting step events and
    every LLM step's answer piece by piece (``Token``; the records are the same as without); under ``lease``
    when the decision claimed it."""
    from orchestrator.service.runner import continue_run

    return continue_run(store, run_id, on_event=on_event, lease=lease, stream_tokens=True)
