"""What happens when a run has finished: its outcome is scored, and an incorrect one traced.

The executor only executes; the runner calls :func:`score_outcome` after an execution ends
in ``succeeded``, and replays store their scores through :func:`record_score` (a replay is
never traced: it is not an outcome to explain). An evaluator that raises (or returns no score
in [0, 1]), or an attribution that breaks, never loses the finished run: both are reported as
events, and an evaluator error is stored as the run's ``error``.
"""

from __future__ import annotations

from orchestrator.binding import BoundWorkflow
from orchestrator.evaluation import EvaluatorScoreError, Score, as_score, call_evaluator
from orchestrator.events import AttributionFailed, EventHook, OutcomeFailed, OutcomeScored
from orchestrator.runstate import RunResult
from orchestrator.store import NewOutcome, Store

__all__ = ["EvaluatorScoreError", "evaluator_score", "record_score", "rescore_run", "score_outcome"]


def score_outcome(store: Store, workflow: BoundWorkflow, result: RunResult, on_event: EventHook | None = None) -> None:
    """Score a succeeded run's final output with the workflow's evaluator, if it has one.

    The evaluator gets the run's ``inputs`` and ``reference`` too when it declares them (see
    :mod:`orchestrator.evaluation`). An evaluator that raises, returns something that is not a
    number, NaN, or a score outside [0, 1] stores no outcome: the run stays succeeded and its
    ``error`` says ``evaluator error: ...``.
    """
    evaluator = workflow.outcome
    if evaluator is None or result.status != "succeeded":
        return
    run = store.get_run(result.run_id)
    try:
        score = call_evaluator(evaluator, result.output, inputs=run.inputs, reference=run.reference)
    except Exception as exc:  # an evaluator bug must not lose the finished run
        detail = str(exc) if isinstance(exc, EvaluatorScoreError) else f"raised {type(exc).__name__}: {exc}"
        error = f"evaluator error: {workflow.spec.outcome} {detail}"
        try:
            store.set_run_status(result.run_id, "succeeded", error=error, expect=["succeeded"])
        finally:
            if on_event is not None:
                on_event(OutcomeFailed(run_id=result.run_id, error=error))
        return
    value = score.score
    outcome_id = record_score(store, workflow, result.run_id, value, score.reason)
    correct = value >= workflow.spec.outcome_threshold
    if on_event is not None:
        on_event(OutcomeScored(run_id=result.run_id, value=value, correct=correct))
    if correct:
        return
    from orchestrator.attribution.auto import trace_outcome  # only an incorrect outcome is traced

    try:  # an incorrect outcome gets its backward trace at once
        trace_outcome(store, result.run_id, outcome_id, spec=workflow.spec)
    except Exception as exc:  # attribution must never lose the finished run
        if on_event is not None:
            on_event(AttributionFailed(run_id=result.run_id, error=f"{type(exc).__name__}: {exc}"))


def evaluator_score(returned: object) -> float:
    """An evaluator's return value as a score; EvaluatorScoreError unless its score is in [0, 1]."""
    return as_score(returned).score


def record_score(store: Store, workflow: BoundWorkflow, run_id: str, value: float,
                 evaluator_reason: str | None = None) -> int:
    """Store an evaluator score (and the reason it gave) as the run's outcome; correct at or above the
    workflow's threshold."""
    return store.add_outcome(NewOutcome(run_id, value=value, correct=value >= workflow.spec.outcome_threshold,
                                        source="evaluator", termination="goal_achieved",
                                        reason=f"evaluator {workflow.spec.outcome}",
                                        evaluator_reason=evaluator_reason))


def rescore_run(store: Store, workflow: BoundWorkflow, run_id: str) -> tuple[int, Score] | None:
    """Score a succeeded run's final output again (its reference changed) and store a new evaluator
    outcome; an incorrect one is traced like a first score. None when there is nothing to score.

    Unlike :func:`score_outcome`, an evaluator error propagates: the caller asked for this score.
    """
    run = store.get_run(run_id)
    if workflow.outcome is None or run.status != "succeeded":
        return None
    score = call_evaluator(workflow.outcome, run.output, inputs=run.inputs, reference=run.reference)
    outcome_id = record_score(store, workflow, run_id, score.score, score.reason)
    if score.score < workflow.spec.outcome_threshold:
        from orchestrator.attribution.auto import trace_outcome

        trace_outcome(store, run_id, outcome_id, spec=workflow.spec)
    return outcome_id, score
