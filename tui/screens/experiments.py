"""The experiments screen (``X`` on the runs screen): every experiment, newest first; ``enter`` compares the
highlighted one with the dataset's source runs (``baseline``), ``space`` marks experiments and ``c`` compares
the two marked.

The list is what ``orchestrator experiment list`` shows, read in a thread worker like the other screens' reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.experiment_rows import BASELINE, ExperimentRow, load_experiments, rate
from tui.format import STATUS_STYLE, truncate
from tui.messages import LoadFailed, StoreChanged
from tui.widgets.live_status import LiveStatus

if TYPE_CHECKING:
    from tui.app import ReviewApp


@dataclass
class ExperimentsLoaded(Message):
    rows: list[ExperimentRow]


class ExperimentsScreen(Screen[None]):
    """A table of experiments; the comparison opens on top of it."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "compare_baseline", "Vs baseline", tooltip="Compare with the dataset's source runs"),
        Binding("space", "mark", "Mark", tooltip="Mark or unmark the highlighted experiment"),
        Binding("c", "compare_marked", "Compare marked", tooltip="Compare the two marked experiments"),
        Binding("q", "back", "Back", tooltip="Back to the runs"),
        Binding("escape", "back", "Back", show=False),
    ]

    COLUMNS = ("", "experiment", "dataset", "workflow", "status", "runs", "outcome rate")

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[ExperimentRow] = []
        self.marked: list[str] = []
        """Experiments marked with space, in the order they were marked (the first is side A)."""
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        yield Static("reading experiments…", id="exp-summary", markup=False)
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=True, id="experiments")
        yield table
        yield LiveStatus("enter: compare with baseline · space: mark two, c: compare them (first → second)",
                         id="live-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#experiments", DataTable)
        for column in self.COLUMNS:
            table.add_column(column, key=column or "mark")
        table.focus()
        self.reload()

    def on_screen_resume(self) -> None:
        if self.loaded:
            self.reload()

    def on_store_changed(self, _message: StoreChanged) -> None:
        self.reload()

    @work(thread=True, exclusive=True, group="experiments-load", exit_on_error=False)
    def reload(self) -> None:
        try:
            rows = load_experiments(self.app.store)
        except Exception as exc:  # a locked or unreachable database: say so, keep what is shown
            self.post_message(LoadFailed(f"cannot read experiments: {type(exc).__name__}: {exc}"))
            return
        self.post_message(ExperimentsLoaded(rows))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, severity="error", timeout=10, markup=False)

    def on_experiments_loaded(self, message: ExperimentsLoaded) -> None:
        self.rows, self.loaded = message.rows, True
        names = {r.name for r in self.rows}
        self.marked = [m for m in self.marked if m in names]
        self._show()

    def _show(self) -> None:
        table = self.query_one("#experiments", DataTable)
        keep = self.highlighted
        table.clear()
        for r in self.rows:
            mark = str(self.marked.index(r.name) + 1) if r.name in self.marked else ""
            table.add_row(Text(mark, style="bold"), Text(truncate(r.name, 28)),
                          Text(truncate(r.dataset_at_version, 20)), Text(truncate(r.workflow, 18)),
                          Text(r.status, style=STATUS_STYLE.get(r.status, "")),
                          Text("-" if r.runs is None else str(r.runs), justify="right"),
                          Text(rate(r.outcome_rate), justify="right"), key=r.name)
        names = [r.name for r in self.rows]
        if keep is not None and keep in names:
            table.move_cursor(row=names.index(keep), scroll=False)
        summary = (f"{len(self.rows)} experiment{'s' if len(self.rows) != 1 else ''}, newest first"
                   if self.rows else
                   "No experiments yet: run one with `orchestrator experiment run WORKFLOW --dataset NAME`.")
        if self.marked:
            summary += f" · marked: {' → '.join(self.marked)}"
        self.query_one("#exp-summary", Static).update(summary)

    @property
    def highlighted(self) -> str | None:
        table = self.query_one("#experiments", DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return None if row_key.value is None else str(row_key.value)

    # -- actions ---------------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#experiments")
    def row_selected(self) -> None:
        self.action_compare_baseline()

    def action_compare_baseline(self) -> None:
        name = self.highlighted
        if name is not None:
            self._open(BASELINE, name)

    def action_mark(self) -> None:
        name = self.highlighted
        if name is None:
            return
        if name in self.marked:
            self.marked.remove(name)
        else:
            self.marked = [*self.marked[-1:], name]  # two at most: marking a third drops the oldest mark
        self._show()

    def action_compare_marked(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two experiments with space first (the first marked is compared to the second)",
                        severity="warning", markup=False)
            return
        self._open(self.marked[0], self.marked[1])

    def _open(self, a: str, b: str) -> None:
        from tui.screens.comparison import ComparisonScreen

        self.app.push_screen(ComparisonScreen(a, b))

    def action_back(self) -> None:
        self.dismiss()
