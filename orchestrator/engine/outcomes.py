"""What happens when a run has finished: its outcome is scored, and an incorrect one traced.

The executor scores a run that succeeded with :func:`score_run` while it still holds the run's
lease, and stores the outcome with the run's end; the runner then traces an incorrect one
(:func:`trace_incorrect_outcome`). Replays store their scores through :func:`record_score` (a
replay is never traced: it is not an outcome to explain). An evaluator that raises (or returns no score
in [0, 1]), or an attribution that breaks, never loses the finished run: both are reported as
events, and an evaluator error is stored as the run's ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.evaluation import EvaluatorScoreError, Score, as_score, call_evaluator
from orchestrator.engine.run_state import RunResult
from orchestrator.spec.events import AttributionFailed, EventHook, OutcomeFailed, OutcomeScored, shielded
from orchestrator.store import NewOutcome, Store

__all__ = ["EvaluatorScoreError", "Scoring", "evaluator_outcome", "evaluator_score", "record_score", "rescore_run",
           "score_run", "scoring_event", "trace_incorrect_outcome"]


@dataclass(frozen=True, slots=True)
class Scoring:
    """What the evaluator made of a finished run's output: the outcome to store with the run's end,
    or, when the evaluator failed, the error the run keeps instead (it stays succeeded)."""

    outcome: NewOutcome | None
    error: str | None = None


def score_run(workflow: BoundWorkflow, run_id: str, output: Any, *, inputs: Mapping[str, Any] | None,
              reference: Any) -> Scoring:
    """Call the workflow's evaluator on a succeeded run's final output (it must have one).

    The evaluator gets the run's ``inputs`` and ``reference`` too when it declares them (see
    :mod:`orchestrator.bind.evaluation`). An evaluator that raises, returns something that is not a
    number, NaN, or a score outside [0, 1] gives no outcome: the run stays succeeded and its
    ``error`` says ``evaluator error: ...``. The executor calls this before it writes the run's end,
    and stores the outcome in the same transaction (see :meth:`~orchestrator.store.Store.end_lease`).
    """
    evaluator = workflow.outcome
    assert evaluator is not None
    try:
        score = call_evaluator(evaluator, output, inputs=inputs, reference=reference)
    except Exception as exc:  # an evaluator bug must not lose the finished run
        detail = str(exc) if isinstance(exc, EvaluatorScoreError) else f"raised {type(exc).__name__}: {exc}"
        return Scoring(None, f"evaluator error: {workflow.spec.outcome} {detail}")
    return Scoring(evaluator_outcome(workflow, run_id, score.score, score.reason))


def scoring_event(run_id: str, scoring: Scoring) -> OutcomeScored | OutcomeFailed:
    """What listeners are told about a run's scoring, once its end (and outcome) is stored."""
    if scoring.outcome is None:
        return OutcomeFailed(run_id=run_id, error=scoring.error or "evaluator error")
    return OutcomeScored(run_id=run_id, value=scoring.outcome.value, correct=bool(scoring.outcome.correct))


def trace_incorrect_outcome(store: Store, workflow: BoundWorkflow, result: RunResult,
                            on_event: EventHook | None = None) -> None:
    """Give a run that its execution scored incorrect its backward trace at once.

    The trace comes after the run's end: a process that dies before it leaves a scored run, whose
    trace ``orchestrator trace`` computes on demand. An attribution that breaks never loses the
    finished run; it is reported as an event.
    """
    if result.correct is not False:
        return
    from orchestrator.attribution.auto import trace_outcome  # only an incorrect outcome is traced

    evaluator_ids = [o.id for o in store.outcomes(result.run_id) if o.source == "evaluator"]
    if not evaluator_ids:
        return
    try:
        trace_outcome(store, result.run_id, evaluator_ids[-1], spec=workflow.spec)
    except Exception as exc:  # attribution must never lose the finished run
        listener = shielded(on_event)  # a listener's error must not lose the finished run either
        if listener is not None:
            listener(AttributionFailed(run_id=result.run_id, error=f"{type(exc).__name__}: {exc}"))


def evaluator_score(returned: object) -> float:
    """An evaluator's return value as a score; EvaluatorScoreError unless its score is in [0, 1]."""
    return as_score(returned).score


def evaluator_outcome(workflow: BoundWorkflow, run_id: str, value: float,
                      evaluator_reason: str | None = None) -> NewOutcome:
    """An evaluator score (and the reason it gave) as the run's outcome; correct at or above the
    workflow's threshold."""
    return NewOutcome(run_id, value=value, correct=value >= workflow.spec.outcome_threshold, source="evaluator",
                      termination="goal_achieved", reason=f"evaluator {workflow.spec.outcome}",
                      evaluator_reason=evaluator_reason)


def record_score(store: Store, workflow: BoundWorkflow, run_id: str, value: float,
                 evaluator_reason: str | None = None) -> int:
    """Store an evaluator score as the run's outcome, on its own (replays, rescoring)."""
    return store.add_outcome(evaluator_outcome(workflow, run_id, value, evaluator_reason))


def rescore_run(store: Store, workflow: BoundWorkflow, run_id: str) -> tuple[int, Score] | None:
    """Score a succeeded run's final output again (its reference changed) and store a new evaluator
    outcome; an incorrect one is traced like a first score. None when there is nothing to score.

    Unlike :func:`score_run`, an evaluator error propagates: the caller asked for this score.
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
