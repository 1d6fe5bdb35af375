"""Human outcome labels on finished runs: the single entry point the CLI and TUI share.

An incorrect label triggers a backward trace at once: its attribution record is stored, linked
to the label's outcome, and the blamed step comes back on the :class:`LabelResult`.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import InputError
from orchestrator.model import WorkflowSpec
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
    from orchestrator.review import default_reviewer

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
    return result
