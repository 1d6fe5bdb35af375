"""The edit screen: the paused output as JSON; saving checks syntax and every gate, or says why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.service import review
from orchestrator.store import Store
from tests.tui.seed import Seeded, start
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.force_edit import ForceEditScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs import RunsScreen
from tui.widgets.step_detail import StepDetail
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (100, 32)
APPROVAL = Path(__file__).parents[1] / "fixtures" / "approval" / "refund_approval.yaml"
"""decide -> confirm (an approval step; its output_schema allows an amount of at most 50) -> pay."""


async def open_editor(pilot, run_id: str, step: str | None = "score") -> EditScreen:
    screen = EditScreen(run_id, step)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.record is not None)
    await pilot.pause()
    return screen


def reviews_text(screen: RunDetailScreen) -> str:
    return str(screen.query_one(StepDetail).query_one("#reviews-text").render())


def error_text(screen: EditScreen) -> str:
    box = screen.query_one("#edit-error")
    return str(box.render()) if box.has_class("-shown") else ""


async def save(pilot, screen: EditScreen, text: str) -> None:
    screen.query_one("#editor").load_text(text)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: not screen.saving)
    await pilot.pause()


class TestEdit:
    async def test_opens_with_the_paused_output(self, app: ReviewApp, seeded: Seeded) -> None:
        """The editor holds the paused output as indented JSON, and names the failing gate."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            assert '"score": 0.3' in screen.query_one("#editor").text
            assert "0.3 is below min 0.5" in str(screen.query_one("#edit-title").render())
            await settle(pilot)

    async def test_invalid_json_is_shown_inline_and_nothing_is_stored(self, app: ReviewApp, store: Store,
                                                                      seeded: Seeded) -> None:
        """A syntax error names line and column; the text stays in the editor; the store is untouched."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            await save(pilot, screen, '{"score": 0.9\n "summary": "x"}')
            assert "invalid JSON at line 2, column 2" in error_text(screen)
            assert screen.query_one("#editor").text == '{"score": 0.9\n "summary": "x"}'
            assert isinstance(app.screen, EditScreen)
            await settle(pilot)
        assert store.count_rows() == before

    async def test_output_failing_a_gate_shows_the_verdict_and_asks_before_forcing(self, app: ReviewApp,
                                                                                  store: Store,
                                                                                  seeded: Seeded) -> None:
        """review.edit refuses 0.2 (range fails): the failing verdict and "Store anyway, recorded as forced?
        [y/N]" are shown, nothing is stored while asking, and enter (No is the default) stores nothing."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            screen.query_one("#editor").load_text('{"score": 0.2, "summary": "x"}')
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, ForceEditScreen))
            verdicts = str(app.screen.query_one("#force-verdicts").render())
            assert "✗ range: field 'score' = 0.2 is below min 0.5" in verdicts
            assert "not_empty" not in verdicts  # only what refuses the edit
            assert "recorded as forced? [y/N]" in str(app.screen.query_one("#dialog-body").render())
            assert "fails its checks: range" in error_text(screen)
            assert store.count_rows() == before
            await pilot.press("enter")
            await wait_for(pilot, lambda: not screen.saving)
            assert app.screen is screen
            assert "not saved" in error_text(screen) and "below min 0.5" in error_text(screen)
            assert screen.query_one("#editor").text == '{"score": 0.2, "summary": "x"}'
            await settle(pilot)
        assert store.count_rows() == before
        assert store.reviews(seeded.paused_retryable) == []
        assert store.get_run(seeded.paused_retryable).status == "paused"

    async def test_declining_the_override_stores_nothing_and_the_run_stays_paused(self, app: ReviewApp,
                                                                                   store: Store, seeded: Seeded,
                                                                                   cli) -> None:
        """`n` on the confirmation: back in the editor with the edit kept; no review, no record."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            screen.query_one("#editor").load_text('{"score": 0.2, "summary": "x"}')
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, ForceEditScreen))
            await pilot.press("n")
            await wait_for(pilot, lambda: not screen.saving)
            assert app.screen is screen and screen.query_one("#editor").text == '{"score": 0.2, "summary": "x"}'
            await settle(pilot)
        assert store.count_rows() == before
        doc = cli("show", seeded.paused_retryable, "--json").json()
        assert doc["status"] == "paused" and doc["reviews"] == []

    @pytest.mark.slow
    async def test_confirming_stores_the_edit_as_forced_and_the_run_continues(self, app: ReviewApp, store: Store,
                                                                            seeded: Seeded, cli) -> None:
        """`y`: the edit is stored with forced=True and its comment, the run goes on to the end, and the review
        shows as forced in `show`, `show --json` and the run screen's reviews."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            screen.query_one("#edit-comment").value = "low score is right, report it"
            screen.query_one("#editor").load_text('{"score": 0.2, "summary": "x"}')
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, ForceEditScreen))
            await pilot.press("y")
            await wait_for(pilot, lambda: store.get_run(seeded.paused_retryable).status == "succeeded")
            assert not isinstance(app.screen, (EditScreen, ForceEditScreen))
            await settle(pilot)
            detail = RunDetailScreen(seeded.paused_retryable)
            await app.push_screen(detail)
            await wait_for(pilot, lambda: detail.detail is not None)
            await wait_for(pilot, lambda: detail.query_one(StepList).row_count == 3)
            detail.query_one(StepList).move_cursor(row=1)  # fetch, score, report
            await wait_for(pilot, lambda: "edit of attempt 1 by tester" in reviews_text(detail))
            assert "(forced past its failing checks)" in reviews_text(detail)
            await settle(pilot)
        [edit] = store.reviews(seeded.paused_retryable)
        assert (edit.decision, edit.forced, edit.comment, edit.output_after) == \
            ("edit", True, "low score is right, report it", {"score": 0.2, "summary": "x"})
        assert store.latest_records(seeded.paused_retryable)["score"].origin == "edited"
        assert store.get_run(seeded.paused_retryable).output["text"] == "score 0.20: x"
        [shown] = cli("show", seeded.paused_retryable, "--json").json()["reviews"]
        assert (shown["decision"], shown["forced"]) == ("edit", True)
        assert "(forced)" in cli("show", seeded.paused_retryable).stdout

    async def test_passing_output_is_stored_and_the_run_continues(self, app: ReviewApp, store: Store,
                                                                 seeded: Seeded) -> None:
        """A valid output that passes the gates is stored as an edit with the comment, and the run finishes."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            screen.query_one("#edit-comment").value = "rescored by hand"
            await save(pilot, screen, '{"score": 0.8, "summary": "two guides"}')
            await wait_for(pilot, lambda: store.get_run(seeded.paused_retryable).status == "succeeded")
            assert not isinstance(app.screen, EditScreen)
            await settle(pilot)
        [edit] = store.reviews(seeded.paused_retryable)
        assert (edit.decision, edit.comment, edit.output_after) == \
            ("edit", "rescored by hand", {"score": 0.8, "summary": "two guides"})
        assert store.latest_records(seeded.paused_retryable)["score"].origin == "edited"
        assert store.get_run(seeded.paused_retryable).output["text"] == "score 0.80: two guides"

    async def test_a_run_decided_meanwhile_is_reported_inline(self, app: ReviewApp, store: Store,
                                                              seeded: Seeded) -> None:
        """Another reviewer rejects while the editor is open: saving says so and stores nothing more."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            review.reject(store, seeded.paused_retryable, reviewer="bob")
            before = store.count_rows()
            await save(pilot, screen, '{"score": 0.8, "summary": "two guides"}')
            assert "rejected, not paused" in error_text(screen)
            assert screen.query_one("#editor").text == '{"score": 0.8, "summary": "two guides"}'
            await settle(pilot)
        assert store.count_rows() == before

    async def test_leaving_with_changes_asks_first(self, app: ReviewApp, store: Store, seeded: Seeded) -> None:
        """Escape after editing asks before discarding; cancelling keeps the edit; nothing is stored."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            screen.query_one("#editor").load_text('{"score": 0.9}')
            await pilot.press("escape")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("escape")
            assert app.screen is screen and screen.query_one("#editor").text == '{"score": 0.9}'
            await pilot.press("ctrl+r")
            assert '"score": 0.3' in screen.query_one("#editor").text
            await pilot.press("escape")
            assert isinstance(app.screen, RunsScreen)
            await settle(pilot)
        assert store.count_rows() == before

    async def test_e_on_the_run_screen_opens_the_editor_for_the_selected_step(self, app: ReviewApp,
                                                                             seeded: Seeded) -> None:
        """`e` edits the waiting step; on a completed upstream step it edits that one (a fix at the cause)."""
        async with app.run_test(size=SIZE) as pilot:
            detail = RunDetailScreen(seeded.paused_twice)
            await app.push_screen(detail)
            await wait_for(pilot, lambda: detail.detail is not None)
            await pilot.press("e")
            assert isinstance(app.screen, EditScreen)
            await wait_for(pilot, lambda: app.screen.record is not None)
            assert app.screen.record.step_id == "score"
            await pilot.press("escape")
            await pilot.press("up")
            await pilot.press("e")
            assert isinstance(app.screen, EditScreen)
            await wait_for(pilot, lambda: app.screen.record is not None)
            assert app.screen.record.step_id == "fetch"
            assert "run again" in str(app.screen.query_one("#edit-title").render())
            await settle(pilot)


@pytest.fixture
def approval_paused(store: Store) -> str:
    """A refund of 20 on order 42, waiting at the approval step ``confirm``."""
    return start(store, APPROVAL, {"ticket": "refund order 42"})


class TestForcedApprovalEdit:
    async def test_an_edit_outside_the_output_schema_may_be_stored_as_forced(self, store: Store, approval_paused: str,
                                                                             cli) -> None:
        """An approval step's edit is checked by its output_schema (amount at most 50): 99 shows that refusal and
        the confirmation, as `edit --force` would accept it; `y` stores it as forced and pay runs with 99."""
        run_id = approval_paused
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, run_id, None)
            screen.query_one("#editor").load_text('{"refund": {"order": "42", "amount": 99}}')
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, ForceEditScreen))
            assert "✗ output_schema: $.refund.amount: 99 is greater than the maximum of 50" in \
                str(app.screen.query_one("#force-verdicts").render())
            assert store.reviews(run_id) == []
            await pilot.press("y")
            await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
            await settle(pilot)
        [edit] = store.reviews(run_id)
        assert (edit.decision, edit.forced, edit.output_after) == \
            ("edit", True, {"refund": {"order": "42", "amount": 99}})
        assert store.get_run(run_id).output == "refunded 99 on order 42"
        assert cli("show", run_id, "--json").json()["reviews"][0]["forced"] is True
