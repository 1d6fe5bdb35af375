"""Reading the review app's run screen in tests: its step rows, the selected step's title, and an app over a store."""

from __future__ import annotations

from orchestrator.store import Store
from tui.app import ReviewApp, make_app
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_detail import StepDetail
from tui.widgets.step_list import StepList


def rows(screen: RunDetailScreen) -> list[str]:
    """The keys of the step list's rows (units and paths), top to bottom."""
    return [str(key.value) for key in screen.query_one(StepList).rows]


def title(screen: RunDetailScreen) -> str:
    """The title of the step detail pane."""
    return str(screen.query_one(StepDetail).query_one("#step-title").render())


def app_over(store: Store) -> ReviewApp:
    """A review app on ``store`` that refreshes every second and does not blink (stable screens). Every reload
    re-renders the screen, most of a pilot test's time; what these tests wait for is the app's own doing, which
    reloads the screen when it lands (``StoreChanged``), so a shorter interval would only cost time."""
    return make_app(store, reviewer="tester", refresh_interval=1.0, cursor_blink=False)
