"""The step dashboard: per workflow, each step's gate pass rate over time, the share of incorrect
outcomes blamed on it, and the steps whose pass rate dropped.

It renders :func:`orchestrator.attribution.stats.compute_stats`, the report ``orchestrator stats``
prints, read in a thread worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Label, Select, Static
from textual.worker import get_current_worker

from tui.messages import LoadFailed, StoreChanged
from tui.widgets.dashboard_rows import UNATTRIBUTED, BlameRow, StepTrend, TrendHeader
from tui.widgets.live_status import LiveStatus

if TYPE_CHECKING:
    from orchestrator.attribution.stats import StatsReport
    from tui.app import ReviewApp

PERIODS = ("week", "day")


@dataclass
class DashboardLoaded(Message):
    """The workflows that have runs, the one shown, and its report (None when no workflow has runs)."""

    workflows: list[str]
    workflow: str | None
    report: StatsReport | None


class DashboardScreen(Screen[None]):
    """Opens on ``workflow`` (the runs screen passes the highlighted run's); ``w`` picks another."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "pick_workflow", "Workflow", tooltip="Show another workflow's steps"),
        Binding("p", "toggle_period", "Week/day", tooltip="Trend by week or by day"),
        Binding("q", "back", "Back", tooltip="Back to the runs"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, workflow: str | None = None) -> None:
        super().__init__()
        self.workflow = workflow
        self.period = "week"
        self.report: StatsReport | None = None
        self._shown: object = None
        self.workflows: list[str] = []
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Horizontal(id="dash-bar"):
            yield Label("workflow", classes="filter-label")
            yield Select([], prompt="…", allow_blank=True, compact=True, id="dash-workflow")
        yield Static("loading…", id="dash-summary", markup=False)
        with VerticalScroll(id="dash-body"):
            yield Static(id="dash-message")
            yield Vertical(id="dash-alerts")
            yield Static("Failure attribution: share of incorrect outcomes blamed on each step",
                         classes="section-title dash-section", id="dash-blame-title")
            yield Vertical(id="dash-blame")
            yield Static("Gate pass rate per step", classes="section-title dash-section", id="dash-steps-title")
            yield Vertical(id="dash-steps")
        yield LiveStatus("↑↓ scroll · alert: a gate pass rate 5+ points below the period before",
                         id="live-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#dash-body").focus()
        self.reload()
        # Labels and runs arrive from other processes too; the report is cheap to recompute now and then.
        self._timer = self.set_interval(max(5.0, self.app.refresh_interval * 5), self.reload)

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()

    def on_store_changed(self, _message: StoreChanged) -> None:
        self.reload()

    @work(thread=True, exclusive=True, group="dashboard-load", exit_on_error=False)
    def reload(self) -> None:
        from orchestrator.attribution.stats import compute_stats
        from tui.queries import dashboard_workflows

        store, workflow, period = self.app.store, self.workflow, self.period
        try:
            workflows = dashboard_workflows(store)  # the newest run's first
            if workflow not in workflows:
                workflow = workflows[0] if workflows else None
            report = None if workflow is None else compute_stats(store, workflow, period=period,
                                                                 now=self.app.clock())
        except Exception as exc:  # a locked or unreachable database: say so, keep what is shown
            self.post_message(LoadFailed(f"cannot compute the dashboard: {type(exc).__name__}: {exc}"))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(DashboardLoaded(sorted(workflows), workflow, report))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, severity="error", timeout=10, markup=False)

    async def on_dashboard_loaded(self, message: DashboardLoaded) -> None:
        select = self.query_one("#dash-workflow", Select)
        if message.workflows != self.workflows:
            self.workflows = message.workflows
            with select.prevent(Select.Changed):
                select.set_options([(w, w) for w in message.workflows])
        if message.workflow is not None and select.value != message.workflow:
            with select.prevent(Select.Changed):
                select.value = message.workflow
        self.workflow = message.workflow
        self.report = report = message.report
        key = None if report is None else (report.period, report.to_json() | {"generated_at": None})
        if key == self._shown and key is not None:
            return  # nothing changed: keep the rows and the scroll position
        self._shown = key
        await self._show(report)

    async def _show(self, report: StatsReport | None) -> None:
        message = self.query_one("#dash-message", Static)
        alerts, blame, steps = (self.query_one(f"#dash-{n}", Vertical) for n in ("alerts", "blame", "steps"))
        for container in (alerts, blame, steps):
            await container.remove_children()
        self.set_class(report is None, "-empty")
        if report is None:
            self.query_one("#dash-summary", Static).update("")
            message.update("No runs yet: start one with `orchestrator run FILE`; the dashboard fills in as runs "
                           "finish, pass or fail their gates, and get labelled.")
            return
        self.query_one("#dash-summary", Static).update(self._summary(report))
        message.update("")
        await alerts.mount_all([Static(f"▲ alert  {a.message}", classes="dash-alert", markup=False)
                                for a in report.alerts])
        total = report.incorrect_outcomes
        if total:
            counts = {s.step_id: s.blamed for s in report.steps} | {UNATTRIBUTED: report.unattributed}
            shares = sorted(report.blamed_distribution.items(), key=lambda kv: (kv[0] == UNATTRIBUTED, -kv[1]))
            await blame.mount_all([BlameRow(name, share, counts.get(name, 0), total) for name, share in shares])
        else:
            await blame.mount(Static("No incorrect outcomes yet. Label finished runs (l on the runs screen) or "
                                     "give the workflow an evaluator (`outcome:`); each incorrect one is traced "
                                     "back to the step that caused it.", classes="dash-note"))
        alerted = {a.step_id for a in report.alerts}
        rows: list[TrendHeader | StepTrend] = [TrendHeader(report.period)]
        rows += [StepTrend(s, alert=s.step_id in alerted, id=f"trend-{s.step_id}") for s in report.steps]
        await steps.mount_all(rows)

    def _summary(self, report: StatsReport) -> str:
        periods = sorted({p.period for s in report.steps for p in s.trend})
        span = f"{periods[0]} … {periods[-1]}" if len(periods) > 1 else (periods[0] if periods else "no periods")
        incorrect = f"{report.incorrect_outcomes} incorrect outcome{'s' if report.incorrect_outcomes != 1 else ''}"
        if report.unattributed:
            incorrect += f" ({report.unattributed} unattributed)"
        alerts = f" · {len(report.alerts)} alert{'s' if len(report.alerts) != 1 else ''}" if report.alerts else ""
        from orchestrator.attribution.stats import blame_source

        source = blame_source(report)
        summary = f"{report.runs} runs · {incorrect}{alerts} · by {report.period}, {span}"
        return f"{summary}\n{source}" if source else summary

    # -- actions ---------------------------------------------------------------------------------

    @on(Select.Changed, "#dash-workflow")
    def workflow_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.workflow:
            self.workflow = event.value
            self.query_one("#dash-summary", Static).update(f"loading {event.value}…")
            self.reload()
            self.query_one("#dash-body").focus()

    def action_pick_workflow(self) -> None:
        select = self.query_one("#dash-workflow", Select)
        select.focus()
        select.action_show_overlay()

    def action_toggle_period(self) -> None:
        self.period = PERIODS[(PERIODS.index(self.period) + 1) % len(PERIODS)]
        self.query_one("#dash-summary", Static).update(f"loading by {self.period}…")
        self.reload()

    def action_back(self) -> None:
        self.dismiss()
