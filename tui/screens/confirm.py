"""Ask before a decision that cannot be undone, and for the comment stored with it."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class ConfirmScreen(ModalScreen[str | None]):
    """Dismisses with the comment ("" when none was typed) on confirm, or None on cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without deciding"),
    ]

    def __init__(self, title: str, body: str, *, confirm_label: str = "Confirm",
                 placeholder: str = "comment (stored with the decision)", ask_comment: bool = True,
                 cursor_blink: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm_label = confirm_label
        self.placeholder = placeholder
        self.ask_comment = ask_comment
        self.cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.body, id="dialog-body")
            if self.ask_comment:
                comment = Input(placeholder=self.placeholder, compact=True, id="comment")
                comment.cursor_blink = self.cursor_blink
                yield comment
            with Horizontal(id="dialog-buttons"):
                yield Button(self.confirm_label, variant="error", compact=True, id="confirm")
                yield Button("Cancel", compact=True, id="cancel")

    @on(Input.Submitted, "#comment")
    @on(Button.Pressed, "#confirm")
    def confirm(self) -> None:
        comments = self.query("#comment").results(Input)
        self.dismiss(next((c.value.strip() for c in comments), ""))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
