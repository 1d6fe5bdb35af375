"""How the step list and the step detail mark a step that passed only on a reviewer's word or a warning.

A plain ✓ says "its gates passed". A step a reviewer approved despite failing verdicts, edited after
they failed, or whose warn-severity gates failed did not earn that: it gets its own glyph and a
line naming the verdicts, from the same pairing of records and reviews ``orchestrator show`` uses
(:mod:`orchestrator.spec.overrides`).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.spec.overrides import overrides, warned
from tui.format import STATUS_STYLE, STEP_ICON
from tui.queries import StepItem

APPROVED_DESPITE, EDITED_AFTER, WARNED = "‽", "✎", "⚠"
"""Single-cell glyphs, like ``tui.format.STEP_ICON``."""


@dataclass(frozen=True)
class StepMark:
    icon: str
    style: str
    note: str | None = None
    """``approved despite: GATE: reason``, ``edited after: ...`` or ``warning: ...``; None for a plain status."""


def step_mark(item: StepItem) -> StepMark:
    """The glyph, its style and the explaining line of a step, from its latest record and its history."""
    override = overrides(item.attempts, item.reviews).get(item.unit) if item.record is not None else None
    if override is not None and item.status == "succeeded":
        icon = APPROVED_DESPITE if override.review.decision == "approve" else EDITED_AFTER
        return StepMark(icon, "bold yellow", override.text())
    failed = warned(item.record)
    if failed:
        return StepMark(WARNED, "yellow", "warning: " + "; ".join(f"{g.gate}: {g.reason}" for g in failed))
    style = STATUS_STYLE.get(item.status, "")
    if item.status == "gate_failed" and not item.waiting:
        style = "yellow"
    return StepMark(STEP_ICON.get(item.status, "?"), style)
