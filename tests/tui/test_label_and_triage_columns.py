"""The label dialog starts from the evaluator's verdict; the runs table shows outcomes and why a run paused."""

from __future__ import annotations

import pytest
from textual.widgets import RadioButton, Static

from orchestrator.store import NewOutcome, Store
from tests.tui.seed import Seeded
from tests.tui.test_runs_screen import SIZE, highlight
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp
from tui.screens.label import LabelScreen
from tui.widgets.run_table import RunTable

pytestmark = pytest.mark.anyio


def scored(store: Store, run_id: str, correct: bool, source: str = "evaluator") -> None:
    store.add_outcome(NewOutcome(run_id, 1.0 if correct else 0.2, correct, source, "goal_achieved"))


async def open_label_dialog(pilot, run_id: str) -> LabelScreen:
    await highlight(pilot, run_id)
    await pilot.press("l")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LabelScreen))
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, LabelScreen)
    return screen


def verdict(screen: LabelScreen) -> tuple[bool, bool]:
    return screen.query_one("#correct", RadioButton).value, screen.query_one("#incorrect", RadioButton).value


async def test_an_incorrect_evaluator_outcome_preselects_incorrect(app: ReviewApp, store: Store,
                                                                    seeded: Seeded) -> None:
    scored(store, seeded.succeeded, True)
    scored(store, seeded.succeeded, False)  # the latest evaluator outcome counts
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_label_dialog(pilot, seeded.succeeded)
        assert verdict(screen) == (False, True)
        screen.query_one("#reason").focus()
        await pilot.press(*"agreed", "enter")
        await wait_for(pilot, lambda: len(store.outcomes(seeded.succeeded)) == 3)
        await settle(pilot)
    human = store.outcomes(seeded.succeeded)[-1]
    assert (human.source, human.correct, human.reason) == ("human", False, "agreed")


async def test_without_an_incorrect_evaluator_outcome_correct_stays_preselected(app: ReviewApp, store: Store,
                                                                                 seeded: Seeded) -> None:
    scored(store, seeded.succeeded, False, source="human")  # only the evaluator's verdict is a suggestion
    scored(store, seeded.succeeded, True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_label_dialog(pilot, seeded.succeeded)
        assert verdict(screen) == (True, False)


async def test_the_runs_table_shows_the_outcome_and_the_summary_explains_the_highlighted_run(
        app: ReviewApp, store: Store, seeded: Seeded) -> None:
    scored(store, seeded.succeeded, False)
    async with app.run_test(size=SIZE) as pilot:
        await highlight(pilot, seeded.succeeded)
        table = app.screen.query_one(RunTable)
        await wait_for(pilot, lambda: "0.20 incorrect" in str(table.get_cell(seeded.succeeded, "outcome")))
        await highlight(pilot, seeded.paused_twice)
        summary = app.screen.query_one("#runs-summary", Static)
        await wait_for(pilot, lambda: f"{seeded.paused_twice} at " in str(summary.render()))
        await settle(pilot)
