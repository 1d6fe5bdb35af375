"""The review app's writes: each is one call of the function the CLI calls for the same verb.

``orchestrator approve`` and the ``a`` key both end in :func:`orchestrator.review.approve`, so a
decision is the same whichever face made it. No Textual here; the app runs these in thread
workers and reports what they return or raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.events import EventHook
    from orchestrator.labels import LabelResult
    from orchestrator.records import StepRecordView
    from orchestrator.review import Decision
    from orchestrator.runstate import RunResult
    from orchestrator.store import Store

DECISION_VERBS = {"approve": "approved", "edit": "edited", "retry": "sent back for a retry", "reject": "rejected"}


def decide(store: Store, run_id: str, decision: str, *, step: str | None = None, reviewer: str | None = None,
           comment: str | None = None, output: Any = None) -> Decision:
    """Apply ``approve``/``retry``/``reject``/``edit`` to the paused step; raises ReviewError when it does not apply."""
    from orchestrator import review

    if decision == "edit":
        return review.edit(store, run_id, output, step=step, reviewer=reviewer, comment=comment)
    fn = {"approve": review.approve, "retry": review.retry, "reject": review.reject}[decision]
    return fn(store, run_id, step=step, reviewer=reviewer, comment=comment)


def editable_record(store: Store, run_id: str, step: str | None) -> tuple[StepRecordView, list[str]]:
    """The paused record an edit would replace, and the labels of the gates the new output must pass."""
    from orchestrator import review
    from orchestrator.model import WorkflowSpec

    rec = review.paused_record(store, run_id, step)
    spec = WorkflowSpec.model_validate(store.workflow_definition(store.get_run(run_id).workflow_id)[0])
    return rec, [gate.label for gate in spec.step(rec.step_id).gates]


def label(store: Store, run_id: str, *, correct: bool, reason: str | None, reviewer: str | None) -> LabelResult:
    """Record a human outcome through the CLI's ``label_run``; the single place the app labels a run."""
    from orchestrator.labels import label_run

    return label_run(store, run_id, correct=correct, reason=reason or None, reviewer=reviewer)


def continue_after_decision(store: Store, run_id: str, on_event: EventHook) -> RunResult:
    """Resume the run in this thread, as ``orchestrator resume`` would, reporting step events."""
    from orchestrator.runner import continue_run

    return continue_run(store, run_id, on_event=on_event)
