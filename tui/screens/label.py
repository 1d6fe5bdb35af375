"""Label a finished run's final output correct or incorrect, with a reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from tui.queries import evaluator_verdict

if TYPE_CHECKING:
    from tui.app import ReviewApp


@dataclass(frozen=True)
class LabelChoice:
    """What the reviewer said about the final output."""

    correct: bool
    reason: str


class LabelScreen(ModalScreen[LabelChoice | None]):
    """Dismisses with a :class:`LabelChoice`, or None on cancel.

    ``correct`` is preselected, or ``incorrect`` when the run's latest evaluator outcome says so.
    """

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without labelling"),
    ]

    def __init__(self, run_id: str, output_preview: str = "", *, cursor_blink: bool = True) -> None:
        super().__init__()
        self.run_id = run_id
        self.output_preview = output_preview
        self.cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Label the final output of run {self.run_id}", id="dialog-title")
            if self.output_preview:
                yield Static(self.output_preview, id="dialog-body")
            with RadioSet(id="verdict", compact=True):
                yield RadioButton("correct", value=True, compact=True, id="correct")
                yield RadioButton("incorrect", compact=True, id="incorrect")
            reason = Input(placeholder="reason (why is it right or wrong?)", compact=True, id="reason")
            reason.cursor_blink = self.cursor_blink
            yield reason
            with Horizontal(id="dialog-buttons"):
                yield Button("Save label", variant="primary", compact=True, id="save")
                yield Button("Cancel", compact=True, id="cancel")

    def on_mount(self) -> None:
        self.load_verdict()

    @work(thread=True, exit_on_error=False)
    def load_verdict(self) -> None:
        if evaluator_verdict(self.app.store, self.run_id) is False:
            self.app.call_from_thread(self.preselect_incorrect)

    def preselect_incorrect(self) -> None:
        """Start from the evaluator's verdict: the output was scored incorrect."""
        self.query_one("#incorrect", RadioButton).value = True

    @on(Input.Submitted, "#reason")
    @on(Button.Pressed, "#save")
    def save(self) -> None:
        correct = self.query_one("#correct", RadioButton).value
        self.dismiss(LabelChoice(correct=correct, reason=self.query_one("#reason", Input).value.strip()))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
