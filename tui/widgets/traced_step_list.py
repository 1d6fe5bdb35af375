"""The run screen's step list, able to highlight the step an open backward trace blames."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style

from tui.widgets.step_list import StepList


class TracedStepList(StepList):
    """While a trace is shown, the blamed step's row takes the ``steplist--blamed`` style (app.tcss).

    The widget has the class ``-tracing`` while a trace is shown; the row's colours come from the
    component class, never from inline styles.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = StepList.COMPONENT_CLASSES | {"steplist--blamed"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.traced: str | None = None
        """The step the shown trace blames (None: no trace shown, or it blames no step)."""

    def show_trace(self, blamed: str | None, *, tracing: bool = True) -> None:
        """Highlight ``blamed`` (None: nothing); ``tracing=False`` when the trace is closed."""
        self.traced = blamed if tracing else None
        self.set_class(tracing, "-tracing")
        self.notify_style_update()  # drops the table's cached rows
        self.refresh()

    def row_is_blamed(self, row_index: int) -> bool:
        if self.traced is None or not 0 <= row_index < self.row_count:
            return False
        return self.ordered_rows[row_index].key.value == self.traced

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        # DataTable's hook for per-row styles (zebra stripes use it); the blamed row adds its component style.
        # Private, and Textual has no public per-row hook: tests/tui/test_textual_pins.py pins it.
        style = super()._get_row_style(row_index, base_style)
        if self.row_is_blamed(row_index):
            style += self.get_component_rich_style("steplist--blamed", partial=True)
        return style
