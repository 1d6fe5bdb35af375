"""Ask before storing an edit the step's gates refuse: the reviewer's word overrides them, and the
review records that it did (``forced``), as ``orchestrator edit --force`` does."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ForceEditScreen(ModalScreen[bool]):
    """The failing verdicts and "Store anyway, recorded as forced? [y/N]"; dismisses True only on a yes.

    No is the default (the focused button, escape and ``n``), so a reflexive enter stores nothing."""

    DEFAULT_CSS = """
    ForceEditScreen {
        align: center middle;
    }
    ForceEditScreen #force-verdicts {
        height: auto;
        max-height: 8;
        margin: 0 0 1 0;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "force", "Store anyway", tooltip="Store the edit, recorded as forced"),
        Binding("n,escape", "cancel", "Cancel", tooltip="Store nothing; the step stays as it is"),
    ]

    def __init__(self, unit: str, failing: list[str]) -> None:
        super().__init__()
        self.unit = unit
        self.failing = failing

    def compose(self) -> ComposeResult:
        verdicts = Text()
        for i, line in enumerate(self.failing):
            verdicts.append(("\n" if i else "") + f"✗ {line}", style="red")
        with Vertical(id="dialog"):
            yield Label(f"The edited output of step {self.unit} fails its checks", id="dialog-title")
            yield Static(verdicts, id="force-verdicts")
            yield Static("Store anyway, recorded as forced? [y/N]", id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Store anyway (forced)", variant="error", compact=True, id="force")
                yield Button("Cancel", compact=True, id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#force")
    def action_force(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)
