"""What happens when a run has finished: its outcome is scored, and an incorrect one traced.

The executor only executes; the runner calls :func:`score_outcome` after an execution ends
in ``succeeded``, and replays store their scores through :func:`record_score` (a replay is
never traced: it is not an outcome to explain). An evaluator that raises (or returns no score
in [0, 1]), or an attribution that breaks, never loses the finished run: both are reported as
events, and an evaluator error is stored as the run's ``error``.
"""

from __future__ import annotations

import math

from orchestrator.attribution.auto import trace_outcome
from orchestrator.binding import BoundWorkflow
from orchestrator.events import AttributionFailed, EventHook, OutcomeFailed, OutcomeScored
from orchestrator.runstate import RunResult
from orchestrator.store import NewOutcome, Store


def score_outcome(store: Store, workflow: BoundWorkflow, result: RunResult, on_event: EventHook | None = None) -> None:
    """Score a succeeded run's final output with the workflow's evaluator, if it has one.

    An evaluator that raises, returns something that is not a number, NaN, or a score outside
    [0, 1] stores no outcome: the run stays succeeded and its ``error`` says ``evaluator error: ...``.
    """
    evaluator = workflow.outcome
    if evaluator is None or result.status != "succeeded":
        return
    try:
        value = evaluator_score(evaluator(result.output))
    except Exception as exc:  # an evaluator bug must not lose the finished run
        detail = str(exc) if isinstance(exc, EvaluatorScoreError) else f"raised {type(exc).__name__}: {exc}"
        error = f"evaluator error: {workflow.spec.outcome} {detail}"
        try:
            store.set_run_status(result.run_id, "succeeded", error=error, expect=["succeeded"])
        finally:
            if on_event is not None:
                on_event(OutcomeFailed(run_id=result.run_id, error=error))
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


class EvaluatorScoreError(ValueError):
    """An evaluator's return value is not a score in [0, 1]."""


def evaluator_score(returned: object) -> float:
    """An evaluator's return value as a score; EvaluatorScoreError unless it is a number in [0, 1]."""
    value: float | None = None
    if not isinstance(returned, (str, bytes)) and hasattr(returned, "__float__"):  # numbers, numpy scalars, bools
        try:
            value = float(returned)
        except (TypeError, ValueError):
            value = None
    if value is None or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise EvaluatorScoreError(f"returned {returned!r}; a score is a number in [0, 1] (or a bool)")
    return value


def record_score(store: Store, workflow: BoundWorkflow, run_id: str, value: float) -> int:
    """Store an evaluator score as the run's outcome; correct at or above the workflow's threshold."""
    return store.add_outcome(NewOutcome(run_id, value=value, correct=value >= workflow.spec.outcome_threshold,
                                        source="evaluator", termination="goal_achieved",
                                        reason=f"evaluator {workflow.spec.outcome}"))
