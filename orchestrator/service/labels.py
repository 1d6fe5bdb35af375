"""Human outcome labels on finished runs: the single entry point the CLI and TUI share.

An incorrect label triggers a backward trace at once: its attribution record is stored, linked
to the label's outcome, and the blamed step comes back on the :class:`LabelResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.core.errors import InputError
from orchestrator.service.names import check_names
from orchestrator.spec.model import WorkflowSpec
from orchestrator.store import NewOutcome, Store


@dataclass
class LabelResult:
    """What a label stored, and (for an incorrect one) which step the backward trace blamed."""

    run_id: str
    outcome_id: int
    value: float
    correct: bool
    blamed_step: str | None = None
    attribution_id: int | None = None
    confidence: float | None = None
    """How far the trace's blame can be trusted (0..1); None when nothing was traced."""
    explanation: str | None = None
    """Why the trace blamed that step (or why it blamed none)."""


def label_run(store: Store, run_id: str, *, correct: bool | None = None, reward: float | None = None,
              reason: str | None = None, reviewer: str | None = None) -> LabelResult:
    """Store a human outcome (source ``human``) for a run's final output.

    ``correct`` alone gives reward 1.0 or 0.0; ``reward`` alone is judged correct at the workflow's
    ``outcome_threshold`` (0.5 unless the workflow says otherwise), like an evaluator score.
    """
    check_names(reviewer=reviewer)
    from orchestrator.service.review import default_reviewer

    if correct is None and reward is None:
        raise InputError("say --correct, --incorrect or --reward X")
    if reward is not None and not 0.0 <= reward <= 1.0:
        raise InputError(f"--reward must be between 0 and 1; got {reward}")
    run = store.get_run(run_id)
    if run.status not in ("succeeded", "failed", "rejected"):
        raise InputError(f"run {run_id} is {run.status}; only a finished run can be labelled")
    value = reward if reward is not None else (1.0 if correct else 0.0)
    if correct is not None:
        is_correct = correct
    else:
        spec = WorkflowSpec.model_validate(store.workflow_definition(run.workflow_id)[0])
        is_correct = value >= spec.outcome_threshold
    termination = {"succeeded": "goal_achieved", "failed": "critical_failure", "rejected": "rejected"}[run.status]
    outcome_id = store.add_outcome(NewOutcome(run_id, value=value, correct=is_correct, source="human",
                                              termination=termination, reason=reason,
                                              reviewer=reviewer or default_reviewer()))
    result = LabelResult(run_id, outcome_id, value, is_correct)
    if not is_correct:
        from orchestrator.attribution.auto import trace_outcome

        traced = trace_outcome(store, run_id, outcome_id)
        if traced is not None:
            result.blamed_step = traced.blamed_step
            result.attribution_id = traced.attribution_id
            result.confidence = traced.confidence
            result.explanation = traced.evidence.get("explanation")
    export_label(run.trace_id, result, reviewer or default_reviewer(), reason)
    return result


def export_label(trace_id: str | None, result: LabelResult, reviewer: str, reason: str | None) -> None:
    """Put the label (and the attribution it triggered) in the run's trace, when tracing is configured:
    a ``review label`` span with an ``outcome`` event, so a backend shows the human verdict and the
    blamed step beside the run's spans."""
    from orchestrator.telemetry import get_tracer

    tracer = get_tracer()
    if tracer.enabled:
        tracer.decision_event(result.run_id, trace_id, "label", result.blamed_step, reviewer, source="human",
                              value=result.value, correct=result.correct, reason=reason,
                              blamed_step=result.blamed_step, confidence=result.confidence,
                              attribution_id=result.attribution_id)
        tracer.force_flush()


@dataclass
class ReferenceResult:
    """What storing a run's reference answer did: the evaluator's new score, when there is one."""

    run_id: str
    outcome_id: int | None = None
    """The new evaluator outcome; None when the run has no score to redo (no evaluator, or not succeeded)."""
    value: float | None = None
    correct: bool | None = None
    evaluator_reason: str | None = None
    why_not: str | None = None
    """Why nothing was re-scored."""


def set_reference(store: Store, run_id: str, reference: Any) -> ReferenceResult:
    """Store ``reference`` as the run's reference answer and, for a succeeded run whose workflow has an
    evaluator, score its final output again: the new score is a new evaluator outcome (the earlier
    ones stay), traced like any score below the workflow's threshold.

    An evaluator that raises, or returns no score in [0, 1], is an InputError naming it; the
    reference stays stored (a later ``label --reference`` replaces it).
    """
    from orchestrator.bind.evaluation import EvaluatorScoreError
    from orchestrator.engine.outcomes import rescore_run
    from orchestrator.engine.stored_workflow import load_run_workflow

    if reference is None:
        raise InputError("the reference answer is null; give a JSON value to score against")
    run = store.get_run(run_id)
    store.set_reference(run_id, reference)
    workflow = load_run_workflow(store, run_id)[0]
    if workflow.outcome is None:
        return ReferenceResult(run_id, why_not=f"workflow {workflow.name!r} has no outcome evaluator")
    if run.status != "succeeded":
        return ReferenceResult(run_id, why_not=f"run {run_id} is {run.status}; it is scored once it succeeds")
    try:
        scored = rescore_run(store, workflow, run_id)
    except EvaluatorScoreError as exc:
        raise InputError(f"evaluator {workflow.spec.outcome} {exc}") from None
    except Exception as exc:  # the user's evaluator: its error is the answer, not a crash
        raise InputError(f"evaluator {workflow.spec.outcome} raised {type(exc).__name__}: {exc}") from None
    assert scored is not None, "the run succeeded and has an evaluator"
    outcome_id, score = scored
    return ReferenceResult(run_id, outcome_id, score.score, score.score >= workflow.spec.outcome_threshold,
                           score.reason)
