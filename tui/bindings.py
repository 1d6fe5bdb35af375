"""Key bindings shared by the screens that can decide on a paused step (runs and run)."""

from __future__ import annotations

from textual.binding import Binding

DECISION_BINDINGS: list[Binding] = [
    Binding("a", "decide('approve')", "Approve", tooltip="Accept the paused step's output as it is"),
    Binding("e", "edit", "Edit", tooltip="Replace the paused step's output"),
    Binding("r", "decide('retry')", "Retry", tooltip="Run the paused step again"),
    Binding("x", "decide('reject')", "Reject", tooltip="Reject the waiting step (the dialog says what that does)"),
]
"""The same four keys mean the same four decisions wherever a paused step can be decided."""
