"""The experiments screen (`X` on the runs screen): the experiments listed, and a comparison that shows the
flips first with the changed step each is put down to, then the outcome rates and gate pass rates side by side.

The store holds two runs of a workflow whose `answer` step upper-cases the question, a dataset made of them,
and two experiments: `lower` (the answer step lower-cases) and `upper-again` (the same workflow again). The
evaluator scores an answer equal to the reference; the references are ``abc`` and ``XYZ``, so against the
baseline `lower` fixes the example ``abc`` and breaks ``xyz``, both put down to the changed step `answer`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from orchestrator.api import Orchestrator
from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.orchestrator.test_experiments import STEPS, workflow_text
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.comparison import ComparisonScreen
from tui.screens.experiments import ExperimentsScreen
from tui.screens.runs import RunsScreen

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


@pytest.fixture
def experiments(tmp_path: Path, step_log: Path, db_url: str) -> list[str]:
    """Baseline runs, dataset ``ds`` from them, then experiments ``lower`` and ``upper-again``, in that order."""
    (tmp_path / "exp_steps.py").write_text(STEPS)
    (tmp_path / "upper.yaml").write_text(workflow_text())
    (tmp_path / "lower.yaml").write_text(workflow_text(answer="lower"))
    with Orchestrator(db_url) as orch:
        upper = load_workflow(tmp_path / "upper.yaml")
        for q, reference in (("abc", "abc"), ("xyz", "XYZ")):
            start_run(orch.store, upper, {"q": q}, reference=reference)
        orch.dataset("ds", from_runs=True, workflow="demo")
        orch.experiment(tmp_path / "lower.yaml", "ds", name="lower", parallel=1)
        orch.experiment(tmp_path / "upper.yaml", "ds", name="upper-again", parallel=1)
    return ["lower", "upper-again"]


@pytest.fixture
def app(store: Store, experiments: list[str]) -> ReviewApp:
    return make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)


def cells(table: DataTable) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def open_experiments(pilot) -> ExperimentsScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.page is not None)
    await pilot.press("X")
    await wait_for(pilot, lambda: isinstance(app.screen, ExperimentsScreen) and app.screen.loaded)
    return app.screen


async def open_comparison(pilot, *keys: str) -> ComparisonScreen:
    app = pilot.app
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(app.screen, ComparisonScreen) and app.screen.document is not None)
    await settle(pilot)
    return app.screen


async def test_x_lists_every_experiment_newest_first(app: ReviewApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_experiments(pilot)
        rows = cells(screen.query_one("#experiments", DataTable))
        assert [r[1:] for r in rows] == [
            ["upper-again", "ds@1", "demo", "finished", "2", "50%"],
            ["lower", "ds@1", "demo", "finished", "2", "50%"],
        ]
        assert "2 experiments" in str(screen.query_one("#exp-summary", Static).render())
        await pilot.press("q")
        assert isinstance(app.screen, RunsScreen)


async def test_enter_compares_with_the_baseline_flips_first_with_the_changed_step(app: ReviewApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await open_experiments(pilot)
        await pilot.press("down")  # `lower`
        screen = await open_comparison(pilot, "enter")
        assert (screen.a, screen.b) == ("baseline", "lower")
        headline = str(screen.query_one("#cmp-headline", Static).render())
        assert "flips: 1 fixed, 1 broken" in headline
        assert "answer: 1 fixed, 1 broken (100% of flips)" in headline
        examples = cells(screen.query_one("#cmp-examples", DataTable))
        assert [(r[1], r[2], r[3]) for r in examples] == [("fixed", "answer", '{"q": "abc"}'),
                                                          ("broken", "answer", '{"q": "xyz"}')]
        assert examples[0][4].startswith("incorrect") and examples[0][5].startswith("correct")
        aggregates = cells(screen.query_one("#cmp-aggregates", DataTable))
        assert aggregates[0][0] == "outcome rate (95% CI)"
        assert aggregates[0][1].startswith("50% [") and aggregates[0][2].startswith("50% [")


async def test_space_marks_two_experiments_and_c_compares_them(app: ReviewApp, notes_factory) -> None:
    notes = notes_factory(app)
    async with app.run_test(size=SIZE) as pilot:
        await open_experiments(pilot)
        await pilot.press("space", "c")  # one marked is not a comparison
        assert isinstance(app.screen, ExperimentsScreen) and "mark two experiments" in notes[-1]
        await pilot.press("down", "space")  # `upper-again` first (side A), then `lower`
        assert app.screen.marked == ["upper-again", "lower"]
        screen = await open_comparison(pilot, "c")
        assert (screen.a, screen.b) == ("upper-again", "lower")
        examples = cells(screen.query_one("#cmp-examples", DataTable))
        assert [(r[1], r[2], r[3]) for r in examples] == [("fixed", "answer", '{"q": "abc"}'),
                                                          ("broken", "answer", '{"q": "xyz"}')]
        await pilot.press("q")
        assert isinstance(app.screen, ExperimentsScreen)
