"""What happens when a run has finished: its outcome is scored, and an incorrect one traced.

The executor only executes; the runner calls :func:`score_outcome` after an execution ends
in ``succeeded``, and replays store their scores through :func:`record_score` (a replay is
never traced: it is not an outcome to explain). An evaluator that raises, or an attribution
that breaks, never loses the finished run: both are reported as events.
"""

from __future__ import annotations

from orchestrator.attribution.auto import trace_outcome
from orchestrator.binding import BoundWorkflow
from orchestrator.events import AttributionFailed, EventHook, OutcomeFailed, OutcomeScored
from orchestrator.runstate import RunResult
from orchestrator.store import NewOutcome, Store


def score_outcome(store: Store, workflow: BoundWorkflow, result: RunResult, on_event: EventHook | None = None) -> None:
    """Score a succeeded run's final output with the workflow's evaluator, if it has one."""
    evaluator = workflow.outcome
    if evaluator is None or result.status != "succeeded":
        return
    try:
        value = float(evaluator(result.output))
    except Exception as exc:  # an evaluator bug must not lose the finished run
        if on_event is not None:
            on_event(OutcomeFailed(run_id=result.run_id, error=f"{type(exc).__name__}: {exc}"))
        return
    outcome_id = record_score(store, workflow, result.run_id, value)
    correct = value >= workflow.spec.outcome_threshold
    if on_event is not None:
        on_event(OutcomeScored(run_id=result.run_id, value=value, correct=correct))
    if correct:
        return
    try:  # an incorrect outcome gets its backward trace at once
        trace_outcome(store, result.run_id, outcome_id, spec=workflow.spec)
    except Exception as exc:  # attribution must never lose the finished run
        if on_event is not None:
            on_event(AttributionFailed(run_id=result.run_id, error=f"{type(exc).__name__}: {exc}"))


def record_score(store: Store, workflow: BoundWorkflow, run_id: str, value: float) -> int:
    """Store an evaluator score as the run's outcome; correct at or above the workflow's threshold."""
    return store.add_outcome(NewOutcome(run_id, value=value, correct=value >= workflow.spec.outcome_threshold,
                                        source="evaluator", termination="goal_achieved",
                                        reason=f"evaluator {workflow.spec.outcome}"))
