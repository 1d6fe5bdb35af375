"""The dashboard (`d` on the runs screen): per step, the gate pass-rate trend, the share of incorrect
outcomes blamed on it, and the alert of a step whose pass rate dropped."""

from __future__ import annotations

import pytest
from textual.widgets import Select, Sparkline

from orchestrator.bind.loader import load_workflow
from orchestrator.service.labels import label_run
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.flow.conftest import FLOW
from tests.tui.seed import NOW, seed_demo
from tests.tui.seed_history import WORKFLOW, History, seed_history
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.messages import StoreChanged
from tui.screens.dashboard import DashboardScreen
from tui.screens.runs import RunsScreen
from tui.widgets.dashboard_rows import BlameRow, StepTrend, TrendHeader

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


@pytest.fixture
def history(store: Store) -> History:
    return seed_history(store)


@pytest.fixture
def demo_and_history(store: Store) -> History:
    """The review-demo and triage-demo runs of seed.py (r0001..r0004), then the history (r0005..)."""
    seed_demo(store)
    return seed_history(store, first_id=5)


@pytest.fixture
def with_a_child_run(store: Store, demo_and_history: History) -> str:
    """The demo and history, then a tree-parent run whose research step ran tree-research as a child run."""
    return start_run(store, load_workflow(FLOW / "tree_parent.yaml"), {}).run_id


@pytest.fixture
def history_app(store: Store, history: History) -> ReviewApp:
    return make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)


async def open_dashboard(pilot) -> DashboardScreen:
    """`d` on the runs screen, once its rows are there; wait until the report is shown."""
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.rows)
    await pilot.press("d")
    await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.query(StepTrend))
    await settle(pilot)
    return app.screen


def rows(screen: DashboardScreen) -> dict[str, StepTrend]:
    return {row.step.step_id: row for row in screen.query(StepTrend)}


def cells(row) -> list[str]:
    """The text of a row's labels, left to right (the sparkline is not a label)."""
    return [str(label.render()).strip() for label in row.query("Label")]


def text(screen: DashboardScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


class TestSteps:
    async def test_d_opens_the_highlighted_runs_workflow_with_a_row_per_step(self, history_app: ReviewApp) -> None:
        """One row per step in workflow order; the summary counts runs, incorrect outcomes and alerts."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            assert screen.workflow == WORKFLOW
            assert screen.query_one("#dash-workflow", Select).value == WORKFLOW
            assert list(rows(screen)) == ["fetch", "score", "report"]
            summary = text(screen, "#dash-summary")
            assert "11 runs · 4 incorrect outcomes (1 unattributed) · 1 alert" in summary
            assert "by week, 2025-W51 … 2026-W01" in summary
            await settle(pilot)

    async def test_latest_pass_rate_its_change_and_the_sparkline_over_weeks(self, history_app: ReviewApp) -> None:
        """fetch: 100%, 100%, 40% (-60 points); score: 100%, 33%, 100%; report has no gates."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            by_step = rows(screen)
            assert cells(screen.query_one(TrendHeader)) == ["step", "gate pass rate by week", "latest", "change",
                                                             "runs", "blamed"]
            assert cells(by_step["fetch"]) == ["fetch", "40%", "-60 pt", "11", "25%"]
            assert cells(by_step["score"]) == ["score", "100%", "+67 pt", "10", "50%"]
            assert cells(by_step["report"]) == ["report", "no gates", "", "", "10", ""]
            assert list(by_step["fetch"].query_one(Sparkline).data) == [1.0, 1.0, 0.4]
            assert list(by_step["score"].query_one(Sparkline).data) == [1.0, 0.3333, 1.0]
            assert not by_step["report"].query(Sparkline)
            await settle(pilot)

    async def test_p_switches_the_trend_to_days(self, history_app: ReviewApp) -> None:
        """By day, each week's runs fall on one day: three points still, labelled with dates."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            await pilot.press("p")
            await wait_for(pilot, lambda: screen.report is not None and screen.report.period == "day")
            await settle(pilot)
            assert cells(screen.query_one(TrendHeader))[1] == "gate pass rate by day"
            assert "by day, 2025-12-18 … 2026-01-01" in text(screen, "#dash-summary")
            assert list(rows(screen)["fetch"].query_one(Sparkline).data) == [1.0, 1.0, 0.4]
            await settle(pilot)


class TestFailureAttribution:
    async def test_bars_share_of_incorrect_outcomes_blamed_on_each_step(self, history_app: ReviewApp) -> None:
        """Of 4 incorrect outcomes, score is blamed for 2 (50%), fetch for 1; 1 has no blamed step."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            bars = [(b.step_id, b.share, b.count, b.total) for b in screen.query(BlameRow)]
            assert bars == [("score", 0.5, 2, 4), ("fetch", 0.25, 1, 4), ("(unattributed)", 0.25, 1, 4)]
            score = screen.query_one(BlameRow)
            assert cells(score) == ["score", "50%", "2 of 4"]
            assert rows(screen)["score"].has_class("-blamed") and not rows(screen)["report"].has_class("-blamed")
            await settle(pilot)

    async def test_a_workflow_without_incorrect_outcomes_says_how_to_get_them(self, store: Store,
                                                                             seeded) -> None:
        """review-demo has no labels yet: no bars, a note on labelling instead."""
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            assert screen.workflow == "review-demo"  # the highlighted run's
            assert screen.report.incorrect_outcomes == 0
            assert not screen.query(BlameRow)
            assert "No incorrect outcomes yet" in str(screen.query_one(".dash-note").render())
            await settle(pilot)


class TestAlerts:
    async def test_a_drop_of_five_points_or_more_is_highlighted(self, history_app: ReviewApp) -> None:
        """fetch fell from 100% (2025-W52) to 40% (2026-W01): an alert line and its row marked; score rose."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            (alert,) = screen.query(".dash-alert")
            assert "step 'fetch': gate pass rate fell from 100% (2025-W52) to 40% (2026-W01), 60 points" \
                in str(alert.render())
            by_step = rows(screen)
            assert by_step["fetch"].has_class("-alert")
            assert not by_step["score"].has_class("-alert") and not by_step["report"].has_class("-alert")
            await settle(pilot)


class TestNavigation:
    @pytest.mark.slow
    async def test_q_and_escape_go_back_to_the_runs(self, history_app: ReviewApp) -> None:
        async with history_app.run_test(size=SIZE) as pilot:
            await open_dashboard(pilot)
            await pilot.press("q")
            assert isinstance(history_app.screen, RunsScreen)
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(history_app.screen, DashboardScreen))
            await pilot.press("escape")
            assert isinstance(history_app.screen, RunsScreen)
            await settle(pilot)

    async def test_another_workflow_from_the_selector(self, store: Store, demo_and_history: History) -> None:
        """Every workflow with runs is offered; choosing triage-demo shows its one step."""
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            assert screen.workflow == WORKFLOW  # its paused run is the newest, so the highlighted one
            assert screen.workflows == ["dashboard-demo", "review-demo", "triage-demo"]
            await pilot.press("w")
            select = screen.query_one("#dash-workflow", Select)
            assert select.expanded
            await pilot.press("down", "down", "enter")  # past review-demo to triage-demo
            await wait_for(pilot, lambda: screen.report is not None and screen.report.workflow == "triage-demo")
            await settle(pilot)
            assert list(rows(screen)) == ["fetch"]
            assert screen.query_one("#dash-body").has_focus
            await settle(pilot)

    async def test_a_workflow_run_only_as_a_child_is_offered_too(self, store: Store, with_a_child_run: str) -> None:
        """tree-research has only ever run as the child run of tree-parent's research step: its steps have
        records and pass rates all the same, so the selector offers it beside the workflows started alone."""
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            assert "tree-research" in screen.workflows and "tree-parent" in screen.workflows
            await settle(pilot)

    async def test_a_new_label_shows_up(self, store: Store, history_app: ReviewApp, history: History) -> None:
        """Labelling the unlabelled run incorrect (elsewhere) and telling the screen: 5 incorrect outcomes,
        fetch now blamed for 2 of them."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_dashboard(pilot)
            label_run(store, history.unlabelled, correct=False, reviewer="dave")
            screen.post_message(StoreChanged(history.unlabelled))
            await wait_for(pilot, lambda: screen.report is not None and screen.report.incorrect_outcomes == 5)
            await settle(pilot)
            bars = {b.step_id: (b.count, b.total) for b in screen.query(BlameRow)}
            assert bars["fetch"] == (2, 5)
            await settle(pilot)

    async def test_an_empty_store_says_there_is_nothing_yet(self, store: Store) -> None:
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.has_class("-empty"))
            await settle(pilot)
            assert "No runs yet" in text(app.screen, "#dash-message")
            assert not app.screen.query(StepTrend)
            await settle(pilot)
