"""Filter the runs table by status and by workflow name."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Label, Select

from tui.queries import RUN_STATUSES


class FilterBar(Horizontal):
    """A status choice and a workflow-name search; the screen reacts to their Changed messages."""

    def __init__(self, *, cursor_blink: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._blink = cursor_blink

    def compose(self) -> ComposeResult:
        yield Label("status", classes="filter-label")
        yield Select([(s, s) for s in RUN_STATUSES], prompt="any", allow_blank=True, compact=True,
                     id="filter-status")
        yield Label("workflow", classes="filter-label")
        workflow = Input(placeholder="part of a workflow name", compact=True, id="filter-workflow")
        workflow.cursor_blink = self._blink
        yield workflow

    @property
    def status(self) -> str | None:
        value = self.query_one("#filter-status", Select).value
        return value if isinstance(value, str) else None

    @property
    def workflow(self) -> str:
        return self.query_one("#filter-workflow", Input).value

    def clear(self) -> None:
        self.query_one("#filter-status", Select).clear()
        self.query_one("#filter-workflow", Input).value = ""

    @property
    def active(self) -> bool:
        return self.status is not None or bool(self.workflow.strip())
