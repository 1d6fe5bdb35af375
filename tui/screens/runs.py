"""The first screen: every run, paused ones first, refreshed on its own.

The store filters and counts: the header counts every run and every paused run in the database, the
filter finds any run, and the list reads :data:`~tui.queries.PAGE_SIZE` more runs each time the cursor
reaches its end (or ``m`` is pressed), so no run is out of reach however many there are."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, Input, Select, Static

from orchestrator.service.waiting_list import first_and_count
from tui.bindings import DECISION_BINDINGS
from tui.messages import LoadFailed, RunsLoaded, RunsWanted, StoreChanged
from tui.queries import PAGE_SIZE, RunRow, RunsPage, filter_runs, load_runs
from tui.reloads import SingleFlight
from tui.widgets.filter_bar import FilterBar
from tui.widgets.live_status import LiveStatus
from tui.widgets.run_table import RunTable

if TYPE_CHECKING:
    from tui.app import ReviewApp


class RunsScreen(Screen[None]):
    """Run id, workflow, status, the paused step and age; ``enter`` opens a run."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        *DECISION_BINDINGS,
        Binding("l", "label", "Label", tooltip="Mark a finished run's output correct or incorrect"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="Filter by status and workflow"),
        Binding("d", "dashboard", "Dashboard", tooltip="Gate pass rates, failure attribution and alerts per step"),
        Binding("X", "experiments", "Experiments", show=False,
                tooltip="Experiments on datasets, and the comparison of two (flips first)"),
        Binding("q", "app.quit_app", "Quit", tooltip="Leave; runs continuing here stay resumable"),
        Binding("m", "more", "More runs", show=False, tooltip="Read the next runs the filter keeps"),
        Binding("escape", "close_filter", "Close filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[RunRow] = []
        self.page: RunsPage | None = None
        self.limit = PAGE_SIZE
        """How many runs to read: the first page, plus one more each time the list's end is reached."""
        self._loads = SingleFlight()
        self._filtered: tuple[str | None, str] = (None, "")
        """The filter the rows were last asked for with."""
        self._last_error: str | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        yield FilterBar(cursor_blink=self.app.cursor_blink, id="filter-bar")
        yield Static(id="runs-summary", markup=False)  # names and reasons print as written
        yield RunTable(id="runs")
        yield LiveStatus("paused runs first · refreshes on its own · a e r x act on the paused step",
                         id="live-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunTable).focus()
        self.reload()
        self._timer = self.set_interval(self.app.refresh_interval, self.reload)

    def on_resize(self) -> None:
        self.query_one(Footer).compact = self.size.width < 90  # all nine keys fit in 80 columns only so

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()  # a run screen is on top; it refreshes what it shows itself

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
        if self.page is not None:  # back from another screen; on first showing, on_mount's read is under way
            self.reload()

    def on_store_changed(self, message: StoreChanged) -> None:
        if message.progress is None:  # a step event changes no row: the continuation's end re-reads
            self.reload()

    def reload(self) -> None:
        """Read the runs again, unless a read is in flight: then once more after it (:class:`SingleFlight`)."""
        if self._loads.ask():
            self._load(self._wanted())

    def _wanted(self) -> RunsWanted:
        bar = self.query_one(FilterBar)
        return RunsWanted(bar.status, bar.workflow.strip(), self.limit)

    def _read_done(self) -> None:
        if self._loads.finished():
            self._load(self._wanted())

    @work(thread=True, group="runs-load", exit_on_error=False)
    def _load(self, wanted: RunsWanted) -> None:
        try:
            page = load_runs(self.app.store, status=wanted.status, workflow=wanted.workflow, limit=wanted.limit)
        except Exception as exc:  # a locked or unreachable database: say so, keep the last rows
            self.post_message(LoadFailed(f"cannot read runs: {type(exc).__name__}: {exc}"))
            return
        self.post_message(RunsLoaded(page, wanted))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if message.query == self._wanted():  # else the filter changed meanwhile: the read after it shows
            self.page, self.rows = message.page, message.page.rows
            self._last_error = None
            self._show()
        self._read_done()

    def on_load_failed(self, message: LoadFailed) -> None:
        self._read_done()
        if message.error != self._last_error:  # the refresh timer would repeat it every interval
            self._last_error = message.error
            self.notify(message.error, severity="error", timeout=10, markup=False)

    def _show(self) -> None:
        bar = self.query_one(FilterBar)
        # the rows read match the filter once its read is back; until then the rows read are narrowed here
        shown = filter_runs(self.rows, status=bar.status, workflow=bar.workflow)
        table = self.query_one(RunTable)
        table.show(shown, now=self.app.clock())
        page = self.page
        if page is None:
            summary = "reading runs…"
        elif not page.total:
            summary = "No runs yet: start one with `orchestrator run FILE`."
        else:
            summary = f"{page.paused:,} paused · {page.total:,} runs"
            if bar.active:
                summary += f" · {page.matching:,} match the filter"
            if page.more:
                summary += f" · {len(page.rows):,} listed, more below"
            summary += self._why(self.highlighted)
        self.query_one("#runs-summary", Static).update(summary)
        self.refresh_bindings()

    @staticmethod
    def _why(row: RunRow | None) -> str:
        """What the table has no room for, about the highlighted run: why it paused, whom its outcome blames."""
        if row is None:
            return ""
        parts = []
        if row.waiting and row.gate_reason:
            parts.append(f"{row.run_id} at {row.waiting[0]}: {row.gate_reason}")
        if row.blamed:
            parts.append(f"{row.run_id} blames {row.blamed}")
        return "".join(f" · {p}" for p in parts)

    # -- filter ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one("#filter-workflow", Input).focus()

    def action_close_filter(self) -> None:
        """Escape leaves the filter bar; a second escape clears the filter and hides the bar."""
        bar = self.query_one(FilterBar)
        table = self.query_one(RunTable)
        if bar.active and table.has_focus:
            bar.clear()
        if not bar.active:
            self.remove_class("-filtering")
        table.focus()

    @on(Select.Changed, "#filter-status")
    @on(Input.Changed, "#filter-workflow")
    def filter_changed(self) -> None:
        bar = self.query_one(FilterBar)
        if (bar.status, bar.workflow.strip()) == self._filtered:
            return  # the widgets announce their first values on mount, and a space typed changes nothing
        self._filtered = (bar.status, bar.workflow.strip())
        self.limit = PAGE_SIZE
        self._show()  # narrowed at once among the rows read; the store's answer follows
        self.reload()

    def action_more(self) -> None:
        """Read the next :data:`PAGE_SIZE` runs the filter keeps, if there are any."""
        if self.page is not None and self.page.more and self.limit <= len(self.page.rows):
            self.limit += PAGE_SIZE
            self.reload()

    @on(Input.Submitted, "#filter-workflow")
    def filter_done(self) -> None:
        self.query_one(RunTable).focus()

    # -- actions on the highlighted run ----------------------------------------------------------

    @property
    def highlighted(self) -> RunRow | None:
        run_id = self.query_one(RunTable).highlighted_run
        return next((r for r in self.rows if r.run_id == run_id), None)

    @on(DataTable.RowHighlighted, "#runs")
    def row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show()  # the summary line explains the highlighted run; the bindings follow it
        if event.cursor_row == event.data_table.row_count - 1:
            self.action_more()  # the end of the list reads the next runs

    @on(DataTable.RowSelected, "#runs")
    def open_run(self, event: DataTable.RowSelected) -> None:
        from tui.screens.run_detail import RunDetailScreen

        self.app.push_screen(RunDetailScreen(str(event.row_key.value)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:  # noqa: ARG002 (Textual hook)
        """Decisions show dimmed unless the highlighted run is paused; labels unless it is finished."""
        if action in ("decide", "edit", "label"):
            row = self.highlighted
            if row is None:
                return None
            if action == "label":
                return True if row.finished else None
            return True if row.paused else None
        return True

    def _paused_target(self) -> RunRow | None:
        row = self.highlighted
        if row is None or not row.paused:
            return None
        if len(row.waiting) > 1:
            self.notify(f"run {row.run_id} has {len(row.waiting)} steps waiting "
                        f"({first_and_count(row.waiting, shown=3)}): open it with enter and select one",
                        severity="warning")
            return None
        return row

    def action_decide(self, decision: str) -> None:
        row = self._paused_target()
        if row is not None:
            self.app.request_decision(row.run_id, decision, step=row.waiting[0] if row.waiting else None)

    def action_edit(self) -> None:
        row = self._paused_target()
        if row is not None:
            self.app.open_editor(row.run_id, row.waiting[0] if row.waiting else None)

    def action_label(self) -> None:
        row = self.highlighted
        if row is not None and row.finished:
            self.app.request_label(row.run_id)

    def action_dashboard(self) -> None:
        from tui.screens.dashboard import DashboardScreen

        row = self.highlighted
        self.app.push_screen(DashboardScreen(row.workflow if row is not None else None))

    def action_experiments(self) -> None:
        from tui.screens.experiments import ExperimentsScreen

        self.app.push_screen(ExperimentsScreen())
