"""The evidence a backward trace weighs: every signal a run recorded against each step.

Every attempt of every step counts, not only the latest record. A reviewer's approval or edit adds
a record after the paused attempt, and an approval's record carries no gate results: reading only
the latest record would turn "failed its gate, approved anyway" into a plain success. So a
failing gate or critic that a reviewer approved or edited stays the strongest signal for its step,
whatever came after it.

A critic's failing verdict is evidence against two steps: the critic itself (its verdict was
overridden, or it stopped the run) and the verified step it implicates. That is the step the
verdict names in ``details.implicates`` (a step id or a list of them), else the earliest of the
steps it ``verifies``: when a critic finds step N inconsistent with step N+2, N+2 most likely
processed N's output faithfully (a propagated error).

Pure functions of stored views; ``trace.backward_trace`` ranks what this module collects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.spec import graph
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import GateView, ReviewView, StepRecordView

STRONG, WARNING, RECOVERED = 3, 2, 1
"""Signal tiers, strongest first (see ``trace.TIERS``)."""


@dataclass
class Signal:
    """One piece of recorded evidence against a step."""

    kind: str
    tier: int
    detail: str
    record_id: int | None = None
    attempt: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "tier": self.tier, "detail": self.detail, "record_id": self.record_id,
                "attempt": self.attempt}


def gate_text(rec: StepRecordView, *, include_critic: bool = False) -> str:
    """``gate: reason; ...`` of the record's failed verdicts (a critic's own verdict only if asked)."""
    failed = [g for g in rec.failed_gates if include_critic or g.gate != "critic"]
    return "; ".join(f"{g.gate}: {g.reason}" for g in failed)


def critic_verdict(rec: StepRecordView) -> GateView | None:
    """The failing ``critic`` verdict of a record, if it has one."""
    return next((g for g in rec.gates if g.gate == "critic" and not g.passed), None)


def implicated_step(spec: WorkflowSpec, critic_id: str, verdict: GateView) -> str | None:
    """The verified step a failing critic verdict blames: the earliest it names, else the earliest it verifies."""
    verifies = list(spec.step(critic_id).verifies)
    named = verdict.details.get("implicates")
    names = [named] if isinstance(named, str) else [str(n) for n in named] if isinstance(named, list) else []
    chosen = [sid for sid in names if sid in verifies] or verifies
    if not chosen:
        return None
    position = {sid: i for i, sid in enumerate(graph.topological_order(spec))}
    return min(chosen, key=lambda sid: position.get(sid, len(position)))


def _by(review: ReviewView) -> str:
    return review.reviewer + (f" ({review.comment})" if review.comment else "")


def attempt_signal(rec: StepRecordView, review: ReviewView | None, failed: str, *, is_latest: bool) -> Signal | None:
    """The signal one attempt with these failed verdicts gives its own step, or None without any."""
    def sig(kind: str, tier: int, detail: str) -> Signal:
        return Signal(kind, tier, detail, rec.id, rec.attempt)

    if rec.status == "gate_failed" and failed:
        if review is None:
            return sig("gate_failed", STRONG, f"failed {failed}; waiting for review")
        if review.decision == "approve":
            return sig("approved_despite_failing", STRONG, f"failed {failed}; approved by {_by(review)}")
        if review.decision == "reject":
            return sig("rejected", STRONG, f"failed {failed}; rejected by {review.reviewer}")
        if review.decision == "edit" and review.forced:
            return sig("forced_edit", STRONG, f"failed {failed}; replaced by {review.reviewer} with an output that "
                                              "fails its gates too")
        if review.decision == "edit":
            return sig("edited", RECOVERED, f"failed {failed}; output replaced by {review.reviewer}")
        return sig("retried", RECOVERED, f"failed {failed}; retried by {review.reviewer}")
    if rec.status == "failed":
        what = failed if rec.error_type == "GateFailed" and failed else (rec.error or "failed")
        if is_latest:
            kind = "gate_failed" if rec.error_type == "GateFailed" else "error"
            return sig(kind, STRONG, f"{what}; the run failed here")
        return sig("retried", RECOVERED, f"attempt {rec.attempt}: {what}")
    if rec.status == "succeeded" and failed:
        return sig("gate_warning", WARNING, f"failed {failed} (recorded as a warning)")
    return None


def critic_signal(rec: StepRecordView, review: ReviewView | None, critic_id: str, verdict: GateView,
                  target: str, *, is_latest: bool) -> Signal:
    """What a failing critic verdict says against the verified step it implicates.

    The verified step's output was not changed by any decision on the critic: approving, editing
    (the verdict, not the verified output) or rejecting the critic leaves the evidence standing.
    Only a retry of the critic, or a failed attempt the critic's own retry policy replaced, weakens it.
    """
    head = f"critic {critic_id!r} found {target!r} inconsistent: {verdict.reason}"
    if rec.status == "gate_failed" and review is not None:
        if review.decision == "approve":
            return Signal("critic_overridden", STRONG, f"{head}; approved by {_by(review)} despite it",
                          rec.id, rec.attempt)
        if review.decision == "edit":
            return Signal("critic_overridden", STRONG, f"{head}; the verdict was replaced by {_by(review)}",
                          rec.id, rec.attempt)
        if review.decision == "retry":
            return Signal("critic_retried", RECOVERED, f"{head}; retried by {review.reviewer}", rec.id, rec.attempt)
        return Signal("critic_failed", STRONG, f"{head}; rejected by {review.reviewer}", rec.id, rec.attempt)
    if rec.status == "failed" and not is_latest:
        return Signal("critic_retried", RECOVERED, f"{head} (attempt {rec.attempt}, retried)", rec.id, rec.attempt)
    waiting = "; waiting for review" if rec.status == "gate_failed" else ""
    return Signal("critic_failed", STRONG, head + waiting, rec.id, rec.attempt)


def _superseded(signal: Signal) -> Signal:
    """A signal of an attempt a fix upstream superseded: it judged an input that no longer exists."""
    return Signal(signal.kind, min(signal.tier, RECOVERED), f"{signal.detail} (superseded by a fix upstream)",
                  signal.record_id, signal.attempt)


def collect_signals(spec: WorkflowSpec, records: list[StepRecordView],
                    reviews: list[ReviewView]) -> dict[str, list[Signal]]:
    """Every step's signals, from all its attempts, the reviews of those attempts and the critics."""
    by_record = {r.record_id: r for r in reviews}
    per_step: dict[str, list[StepRecordView]] = {}
    for rec in records:  # by unit: each instance (``summarize[7]``) and iteration (``improve#2``) on its own
        per_step.setdefault(rec.unit, []).append(rec)
    signals: dict[str, list[Signal]] = {sid: [] for sid in spec.step_ids}
    known = set(signals)
    signals.update({unit: [] for unit, recs in per_step.items()
                    if (recs[0].index is not None or recs[0].iteration is not None) and recs[0].step_id in known})
    critic_ids = {s.id for s in spec.steps if s.type == "critic"}

    def add(sid: str, signal: Signal, rec: StepRecordView) -> None:
        signals[sid].append(_superseded(signal) if rec.superseded else signal)

    for sid, recs in per_step.items():
        if sid not in signals:
            continue
        is_critic = recs[0].step_id in critic_ids
        for rec in recs:
            is_latest = rec is recs[-1]
            review = by_record.get(rec.id)
            verdict = critic_verdict(rec) if is_critic else None
            target = implicated_step(spec, rec.step_id, verdict) if verdict is not None else None
            own = attempt_signal(rec, review, gate_text(rec, include_critic=is_critic), is_latest=is_latest)
            if own is not None:
                if target is not None:
                    own.detail += f"; its verdict implicates {target!r}"
                add(sid, own, rec)
            if verdict is not None and target is not None and target in signals:
                add(target, critic_signal(rec, review, sid, verdict, target, is_latest=is_latest), rec)
    return signals
