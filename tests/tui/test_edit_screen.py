"""The edit screen: the paused output as JSON; saving checks syntax and every gate, or says why not."""

from __future__ import annotations

import pytest

from orchestrator import review
from orchestrator.store import Store
from tests.tui.seed import Seeded
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs import RunsScreen

pytestmark = pytest.mark.anyio

SIZE = (100, 32)


async def open_editor(pilot, run_id: str, step: str | None = "score") -> EditScreen:
    screen = EditScreen(run_id, step)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.record is not None)
    await pilot.pause()
    return screen


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

    async def test_output_failing_a_gate_is_refused_inline(self, app: ReviewApp, store: Store,
                                                           seeded: Seeded) -> None:
        """review.edit's ReviewError (range fails at 0.2) is shown; nothing is stored; the edit is kept."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_editor(pilot, seeded.paused_retryable)
            await save(pilot, screen, '{"score": 0.2, "summary": "x"}')
            assert "fails its gates" in error_text(screen) and "below min 0.5" in error_text(screen)
            assert screen.query_one("#editor").text == '{"score": 0.2, "summary": "x"}'
            await settle(pilot)
        assert store.count_rows() == before
        assert store.get_run(seeded.paused_retryable).status == "paused"

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
