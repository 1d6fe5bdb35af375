"""The review app lists runs whose names and reasons look like markup exactly as written, and shows
an ``interrupted`` run like any other."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.orchestrator.test_hostile_names import HOSTILE, NAME, interrupted_run
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.widgets.run_table import RunTable

pytestmark = pytest.mark.anyio


@pytest.fixture
def hostile_runs(store: Store, db_url: str, tmp_path: Path) -> tuple[str, str, str]:
    """A paused, a failed and an interrupted run of the workflow named ``report[/]v2 etl [daily]``."""
    workflow = load_workflow(HOSTILE)
    return (start_run(store, workflow, {"x": 1}).run_id, start_run(store, workflow, {"x": 0}).run_id,
            interrupted_run(db_url, tmp_path))


@pytest.mark.slow
async def test_the_runs_screen_shows_hostile_names_and_every_status(store: Store,
                                                                     hostile_runs: tuple[str, str, str]) -> None:
    app = make_app(store, reviewer="[bold]ann[/]", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=(160, 24)) as pilot:
        table = app.screen.query_one(RunTable)
        await wait_for(pilot, lambda: len(table.rows) == 3)
        await settle(pilot)
        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
    for run_id in hostile_runs:
        assert run_id in screen
    assert screen.count(NAME) == 3 and "interrupted" in screen
    assert "field '[/]score' = 0.1 is below min 0.5" in screen  # the highlighted paused run's gate reason
