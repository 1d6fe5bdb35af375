"""The runs screen: listing, filtering, refreshing, opening, and deciding on the highlighted run."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.store import Store, open_store
from tests.tui.seed import DEMO, Seeded, start
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp
from tui.screens.label import LabelScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs import RunsScreen
from tui.widgets.run_table import RunTable

pytestmark = pytest.mark.anyio

SIZE = (100, 32)


def shown_runs(app: ReviewApp) -> list[str]:
    table = app.screen.query_one(RunTable)
    return [str(key.value) for key in table.rows]


async def highlight(pilot, run_id: str) -> None:
    table = pilot.app.screen.query_one(RunTable)
    await wait_for(pilot, lambda: run_id in shown_runs(pilot.app))
    table.move_cursor(row=shown_runs(pilot.app).index(run_id))
    await pilot.pause()


class TestListing:
    async def test_paused_runs_come_first_newest_first(self, app: ReviewApp, seeded: Seeded) -> None:
        """Paused runs head the table, newest first; finished runs follow."""
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(shown_runs(app)) == 4)
            assert shown_runs(app) == [seeded.paused_retryable, seeded.triage_paused, seeded.paused_twice,
                                       seeded.succeeded]
            await settle(pilot)

    async def test_filter_by_workflow_and_status(self, app: ReviewApp, seeded: Seeded) -> None:
        """`/` opens the filter; a workflow name part and a status narrow the table; escape twice clears it."""
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(shown_runs(app)) == 4)
            await pilot.press("slash")
            assert app.screen.has_class("-filtering")
            await pilot.press(*"triage")
            assert shown_runs(app) == [seeded.triage_paused]
            app.screen.query_one("#filter-workflow").value = ""
            app.screen.query_one("#filter-status").value = "succeeded"
            await pilot.pause()
            assert shown_runs(app) == [seeded.succeeded]
            await pilot.press("escape")  # back to the table, filter kept
            assert shown_runs(app) == [seeded.succeeded] and app.screen.query_one(RunTable).has_focus
            await pilot.press("escape")  # clears it
            await wait_for(pilot, lambda: len(shown_runs(app)) == 4)
            assert not app.screen.has_class("-filtering")
            await settle(pilot)

    async def test_refreshes_when_another_process_pauses_a_run(self, app: ReviewApp, store: Store,
                                                               db_url: str) -> None:
        """A run paused by another process (its own store connection) appears without a key press."""
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(shown_runs(app)) == 4)
            other = open_store(db_url)
            try:
                run_id = await anyio.to_thread.run_sync(start, other, DEMO, {"quality": 0.2})
            finally:
                other.close()
            await wait_for(pilot, lambda: shown_runs(app)[:1] == [run_id])  # paused, so first
            await settle(pilot)

    async def test_enter_opens_the_highlighted_run(self, app: ReviewApp, seeded: Seeded) -> None:
        """Enter on a row opens that run's screen."""
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.paused_twice)
            await pilot.press("enter")
            assert isinstance(app.screen, RunDetailScreen)
            assert app.screen.run_id == seeded.paused_twice
            await settle(pilot)


class TestDecisions:
    async def test_approve_stores_the_review_and_the_run_continues(self, app: ReviewApp, store: Store,
                                                                   seeded: Seeded) -> None:
        """`a` approves the paused step without asking, and the run finishes in the background."""
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.paused_retryable)
            await pilot.press("a")
            await wait_for(pilot, lambda: store.get_run(seeded.paused_retryable).status == "succeeded")
            await settle(pilot)
        reviews = store.reviews(seeded.paused_retryable)
        assert [(r.decision, r.step_id, r.reviewer) for r in reviews] == [("approve", "score", "tester")]
        assert store.get_run(seeded.paused_retryable).output["passed"] is False  # approved as it was

    async def test_decision_keys_do_nothing_on_a_finished_run(self, app: ReviewApp, store: Store,
                                                              seeded: Seeded) -> None:
        """On a succeeded run the decision keys are disabled: nothing is stored."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.succeeded)
            await pilot.press("a", "r", "x")
            assert isinstance(app.screen, RunsScreen)
            await settle(pilot)
        assert store.count_rows() == before

    async def test_label_a_finished_run_incorrect_with_a_reason(self, app: ReviewApp, store: Store,
                                                                seeded: Seeded) -> None:
        """`l` on a finished run asks correct/incorrect and a reason, and stores a human outcome."""
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.succeeded)
            await pilot.press("l")
            assert isinstance(app.screen, LabelScreen)
            app.screen.query_one("#incorrect").value = True
            app.screen.query_one("#reason").focus()
            await pilot.press(*"wrong topic", "enter")
            await wait_for(pilot, lambda: store.outcomes(seeded.succeeded))
            await settle(pilot)
        [outcome] = store.outcomes(seeded.succeeded)
        assert (outcome.correct, outcome.value, outcome.source, outcome.reason, outcome.reviewer) == \
            (False, 0.0, "human", "wrong topic", "tester")

    async def test_label_cancelled_stores_nothing(self, app: ReviewApp, store: Store, seeded: Seeded) -> None:
        """Escape closes the label dialog without an outcome."""
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.succeeded)
            await pilot.press("l", "escape")
            assert isinstance(app.screen, RunsScreen)
            await settle(pilot)
        assert store.outcomes(seeded.succeeded) == []

    async def test_label_of_an_unfinished_run_is_refused_with_a_message(self, app: ReviewApp, store: Store,
                                                                        seeded: Seeded, notes: list[str]) -> None:
        """label_run's InputError (the run finished? no: it is paused) is shown, and nothing is stored."""
        async with app.run_test(size=SIZE) as pilot:
            from tui.screens.label import LabelChoice

            app.label_run(seeded.paused_twice, LabelChoice(correct=True, reason=""))
            await wait_for(pilot, lambda: notes)
            await settle(pilot)
        assert "only a finished run can be labelled" in notes[-1]
        assert store.outcomes(seeded.paused_twice) == []


class TestMouse:
    async def test_clicking_a_run_opens_it(self, app: ReviewApp, seeded: Seeded) -> None:
        """A click highlights a row; a second click on it opens the run, as enter does."""
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(shown_runs(app)) == 4)
            await pilot.click(RunTable, offset=(3, 3))  # header row, then r0004, r0003, r0001
            assert app.screen.query_one(RunTable).highlighted_run == seeded.paused_twice
            await pilot.click(RunTable, offset=(3, 3))
            await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen))
            assert app.screen.run_id == seeded.paused_twice
            await settle(pilot)


class TestRepeatedKeys:
    async def test_a_pressed_twice_stores_one_decision_and_no_error(self, app: ReviewApp, store: Store,
                                                                     seeded: Seeded, notes: list[str]) -> None:
        """An impatient double `a` approves once; the second press is ignored rather than refused."""
        async with app.run_test(size=SIZE) as pilot:
            await highlight(pilot, seeded.paused_retryable)
            await pilot.press("a", "a")
            await wait_for(pilot, lambda: store.get_run(seeded.paused_retryable).status == "succeeded")
            await settle(pilot)
        assert [r.decision for r in store.reviews(seeded.paused_retryable)] == ["approve"]
        assert not [n for n in notes if "not paused" in n or "already decided" in n]
