"""The run screen offers a critic's fix at its cause: the verified outputs side by side, and `e`/`r`
on a completed step fixing that step (its descendants are superseded and run again)."""

from __future__ import annotations

import html
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent.parent / "fixtures" / "workflows"
SIZE = (120, 40)


async def paused_run(store: Store, workflow: str) -> str:
    result = await anyio.to_thread.run_sync(lambda: start_run(store, load_workflow(FIXTURES / workflow), {}))
    assert result.status == "paused"
    return result.run_id


def on_screen(app) -> str:
    """The text the terminal shows now (from the app's screenshot)."""
    return html.unescape(app.export_screenshot()).replace("\u00a0", " ")


async def select(pilot, screen: RunDetailScreen, step: str) -> None:
    steps = screen.query_one(StepList)
    for _ in range(10):
        if steps.selected_step == step:
            return
        await pilot.press("up")
    raise AssertionError(f"cannot select {step}")


@pytest.mark.slow
async def test_e_on_the_verified_step_fixes_it_and_the_run_succeeds(store: Store) -> None:
    run_id = await paused_run(store, "fix_cause.yaml")
    app = make_app(store, reviewer="tester", refresh_interval=1.0, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = RunDetailScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None)
        await pilot.pause()
        assert screen.query_one(StepList).selected_step == "check_customer"
        evidence = screen.query_one("#critic-evidence")
        assert evidence.display
        shown = on_screen(app)
        assert "lookup_customer (succeeded)" in shown and "make_invoice (succeeded)" in shown
        assert '"id": "C-1"' in shown and '"billed": "C-2"' in shown

        await select(pilot, screen, "lookup_customer")
        assert not evidence.display  # only under the waiting critic
        await pilot.press("e")
        assert isinstance(app.screen, EditScreen)
        editor_screen = app.screen
        await wait_for(pilot, lambda: editor_screen.record is not None)
        assert editor_screen.record.step_id == "lookup_customer"
        editor_screen.query_one("#editor").load_text('{"id": "C-2", "name": "Bea"}')
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
        await settle(pilot)
    assert store.get_run(run_id).output == {"billed": "C-2", "reply_to": "C-2"}
    [decision] = store.reviews(run_id)
    assert (decision.decision, decision.step_id, decision.reviewer) == ("edit", "lookup_customer", "tester")
    assert [r.step_id for r in store.step_records(run_id) if r.superseded] == [
        "draft_reply", "make_invoice", "check_customer"]


@pytest.mark.slow
async def test_r_on_a_completed_step_asks_before_repeating_side_effects(store: Store) -> None:
    run_id = await paused_run(store, "fix_side_effects.yaml")
    app = make_app(store, reviewer="tester", refresh_interval=1.0, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = RunDetailScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None)
        await pilot.pause()
        await select(pilot, screen, "draft_reply")
        before = store.count_rows()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "send" in str(app.screen.query_one("#dialog-body").render())
        assert store.count_rows() == before  # nothing stored while the reviewer decides
        await pilot.press("escape")
        await pilot.pause()
        assert store.count_rows() == before and store.get_run(run_id).status == "paused"

        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.click("#confirm")
        # the lookup is still wrong, so the critic pauses the run again after the re-run
        await wait_for(pilot, lambda: len(store.reviews(run_id)) == 1 and store.get_run(run_id).status == "paused")
        await settle(pilot)
    [decision] = store.reviews(run_id)
    assert (decision.decision, decision.step_id, decision.rerun_side_effects) == ("retry", "draft_reply", True)
    superseded = [r.step_id for r in store.step_records(run_id) if r.superseded]
    assert sorted(superseded) == sorted(["draft_reply", "make_invoice", "check_customer", "send"])
