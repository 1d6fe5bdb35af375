"""The runs table: one row per run, paused ones first."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from orchestrator.service.waiting_list import first_and_count
from tui.format import STATUS_STYLE, format_age, truncate
from tui.queries import RunRow

WAITING_WIDTH = 24
"""The "paused at" cell: the first waiting unit (or path into a child run) and how many more wait."""


class RunTable(DataTable[str | Text]):
    """Runs keyed by run id; refreshing keeps the cursor on the same run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", tooltip="Open the highlighted run"),
    ]

    COLUMNS = (("run", "run"), ("workflow", "workflow"), ("status", "status"), ("paused at", "paused"),
               ("outcome", "outcome"), ("age", "age"))
    """What fits in 100 columns of what ``orchestrator runs`` shows (gate reasons are on the run screen)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: tuple[tuple[str, str, str, str, str, str], ...] = ()

    def on_mount(self) -> None:
        for label, key in self.COLUMNS:
            self.add_column(label, key=key)

    @property
    def highlighted_run(self) -> str | None:
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def show(self, rows: list[RunRow], now: float) -> None:
        """Replace the rows (only when something visible changed), keeping the cursor's run."""
        cells = tuple((r.run_id, r.workflow, r.status, first_and_count(r.waiting, width=WAITING_WIDTH), r.outcome,
                       format_age(now - r.created_at)) for r in rows)
        if cells == self._shown:
            return
        self._shown = cells
        keep = self.highlighted_run
        self.clear()
        for run_id, workflow, status, waiting, outcome, age in cells:
            verdict = "red" if outcome.endswith("incorrect") else ("green" if outcome else "")
            self.add_row(run_id, Text(truncate(workflow, 24)), Text(status, style=STATUS_STYLE.get(status, "")),
                         Text(waiting, style="yellow"), Text(outcome, style=verdict),
                         Text(age, justify="right"), key=run_id)
        ids = [c[0] for c in cells]
        if keep in ids:
            self.move_cursor(row=ids.index(keep), scroll=False)
