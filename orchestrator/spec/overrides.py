"""Which failed verdicts a reviewer's decision let through, for every face that shows a step.

Approve and edit add a new record (origin ``approved`` or ``edited``) after the paused attempt.
An approval's record carries no gate results, so a face that shows only the latest record would
show a plain success and lose the failed gate's name. This module pairs each accepted record with
the attempt the decision answered, so ``show``, ``show --json`` and the review screens keep
"approved despite: GATE: reason" in sight. Pure functions of stored views: no store, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.spec.records import GateView, ReviewView, StepRecordView

PHRASES = {"approve": "approved despite", "edit": "edited after"}
"""How a decision that overrode failing verdicts reads in front of them."""


@dataclass(frozen=True)
class Override:
    """A reviewer's decision that accepted a step's output although some of its verdicts failed."""

    step_id: str
    attempt: StepRecordView
    """The attempt the decision answered: the one whose gates failed."""
    review: ReviewView

    @property
    def failed(self) -> list[GateView]:
        """The attempt's failing verdicts, blocking and warnings alike."""
        return self.attempt.failed_gates

    @property
    def phrase(self) -> str:
        return PHRASES.get(self.review.decision, f"{self.review.decision} after")

    def text(self) -> str:
        """``approved despite: range: 0.3 < 0.5; critic: ...``"""
        return f"{self.phrase}: " + "; ".join(f"{g.gate}: {g.reason}" for g in self.failed)

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.review.decision, "phrase": self.phrase, "record_id": self.attempt.id,
                "attempt": self.attempt.attempt, "review": self.review.to_json()}


def overrides(records: Iterable[StepRecordView], reviews: Iterable[ReviewView]) -> dict[str, Override]:
    """Per step, the override behind its latest record, when that record is an approval or edit of an
    attempt with failing verdicts. A step executed again after the decision (a retry, a fix upstream)
    has no override: its latest record stands on its own verdicts.
    """
    by_id: dict[int, StepRecordView] = {}
    latest: dict[str, StepRecordView] = {}
    for rec in records:
        by_id[rec.id] = rec
        latest[rec.unit] = rec
    found: dict[str, Override] = {}
    for review in reviews:  # in decision order: a later decision on the same step wins
        attempt = by_id.get(review.record_id)
        current = latest.get(review.step_id)
        if attempt is None or current is None or review.decision not in PHRASES:
            continue
        if current.origin == {"approve": "approved", "edit": "edited"}[review.decision] \
                and current.id > attempt.id and attempt.failed_gates:
            found[review.step_id] = Override(review.step_id, attempt, review)
    return found


def step_json(rec: StepRecordView, override: Override | None) -> dict[str, Any]:
    """A ``show --json`` step entry: the record's keys, plus ``overridden_gates`` and ``override``.

    An approval keeps its output as it was, so the paused attempt's verdicts are its verdicts:
    its ``gates`` are those (an approval's own record carries none). An edit keeps the verdicts of
    the edited output in ``gates``; both list the failed verdicts the decision overrode in
    ``overridden_gates``, and the decision in ``override`` (None and ``[]`` for other steps).
    """
    doc = rec.to_json()
    if override is not None and not rec.gates and override.review.decision == "approve":
        doc["gates"] = [g.to_json() for g in override.attempt.gates]
    doc["overridden_gates"] = [g.to_json() for g in override.failed] if override is not None else []
    doc["override"] = override.to_json() if override is not None else None
    return doc


def override_note(step: Mapping[str, Any]) -> str | None:
    """The ``show`` table's note for a ``step_json`` entry: ``approved despite: GATE: reason``, else None."""
    override = step.get("override")
    failed = step.get("overridden_gates") or []
    if not override or not failed:
        return None
    return f"{override.get('phrase')}: " + "; ".join(f"{g.get('gate')}: {g.get('reason')}" for g in failed)


def warned(rec: StepRecordView | None) -> list[GateView]:
    """Failed verdicts of a succeeded record: warn-severity gates, or any gate under ``on_gate_fail: warn``."""
    if rec is None or rec.status != "succeeded":
        return []
    return rec.failed_gates
