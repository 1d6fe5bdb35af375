"""The run screen over a tree of runs: a pause inside a child run is a row of its parent's screen named by
its path (``research > retrieve``), decided there by that path; enter on it, or on the step that started the
child, opens the child run's screen, escape comes back, and a decision taken on the child's screen continues
the child and then its parent, as ``orchestrator approve CHILD`` does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Static

from orchestrator.store import Store
from tests.flow.conftest import FLOW, executions
from tests.tui.run_screen import app_over, rows, title
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REPORT = "report: solar panels fact 0"


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
    await pilot.pause()
    return screen


async def shown(pilot) -> RunDetailScreen:
    """The run screen on top, once it has read its run."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunDetailScreen) and pilot.app.screen.detail
                   is not None and pilot.app.screen.query_one(StepList).row_count)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, RunDetailScreen)
    return screen


@pytest.fixture
def tree_paused(store: Store, step_log: Path) -> tuple[str, str]:
    """tree_review.yaml: the child run's retrieve found 1 item, its gate wants 2. (parent, child)."""
    run_id = start(store, FLOW / "tree_review.yaml")
    return run_id, store.child_runs(run_id)[0].run_id


async def test_the_pause_inside_the_child_is_a_row_of_the_parent_named_by_its_path(store: Store, tree_paused) -> None:
    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, parent)
        assert rows(screen) == ["plan", "research", "research > retrieve", "write"]
        assert screen.query_one(StepList).selected_step == "research > retrieve"
        assert screen.detail is not None and screen.detail.waiting == ["research > retrieve"]
        assert f"in child run {child} (enter opens it)" in title(screen)
        assert "waiting for review" in title(screen)
        await settle(pilot)


async def test_enter_on_the_path_row_opens_the_child_and_escape_returns(store: Store, tree_paused) -> None:
    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        await open_run(pilot, parent)
        await pilot.press("enter")
        opened = await shown(pilot)
        assert opened.run_id == child
        assert rows(opened) == ["retrieve", "summarize"]
        assert f"child run of {parent} at step research" in str(opened.query_one("#run-summary", Static).render())
        assert opened.query_one(StepList).selected_step == "retrieve"
        assert "waiting for review" in title(opened)
        await pilot.press("escape")
        back = await shown(pilot)
        assert back.run_id == parent
        await settle(pilot)


async def test_enter_on_the_step_that_started_the_child_opens_it(store: Store, tree_paused) -> None:
    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, parent)
        await pilot.press("up")
        assert screen.query_one(StepList).selected_step == "research"
        assert f"runs child run {child}" in title(screen)
        await pilot.press("enter")
        assert (await shown(pilot)).run_id == child
        await settle(pilot)


async def test_approving_on_the_childs_screen_continues_the_child_and_then_the_parent(
        store: Store, tree_paused, step_log: Path) -> None:
    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        await open_run(pilot, parent)
        await pilot.press("enter")
        await shown(pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: store.get_run(parent).status == "succeeded")
        await settle(pilot)
        await pilot.press("escape")
        back = await shown(pilot)
        await wait_for(pilot, lambda: back.detail is not None and back.detail.run.status == "succeeded")
        assert rows(back) == ["plan", "research", "write"]
    assert [(r.step_id, r.decision, r.reviewer) for r in store.reviews(child)] == [("retrieve", "approve", "tester")]
    assert store.get_run(parent).output == REPORT
    assert Counter(executions(step_log)) == Counter({"tree-review.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 1, "tree-review.write": 1})


async def test_approving_the_path_row_on_the_parents_screen_decides_it_on_the_child(
        store: Store, tree_paused, step_log: Path) -> None:
    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        await open_run(pilot, parent)
        await pilot.press("a")
        await wait_for(pilot, lambda: store.get_run(parent).status == "succeeded")
        await settle(pilot)
    assert [(r.step_id, r.decision) for r in store.reviews(child)] == [("retrieve", "approve")]
    assert store.reviews(parent) == []
    assert Counter(executions(step_log))["tree-research.retrieve"] == 1


@pytest.fixture
def tree_gated(store: Store, step_log: Path) -> tuple[str, str]:
    """tree_parent.yaml with 2 findings: the child finished, the parent's gate on research wants 3."""
    run_id = start(store, FLOW / "tree_parent.yaml", {"count": 2})
    return run_id, store.child_runs(run_id)[0].run_id


async def test_retrying_a_completed_step_on_a_finished_childs_screen_fixes_it_through_the_parent(
        store: Store, tree_gated, step_log: Path) -> None:
    """tree_parent.yaml with 2 findings: the child finished, the parent's gate on research wants 3. On the
    child's screen (enter on research), `r` on retrieve runs it and summarize again and then the parent's
    research, which pauses again on the same two findings."""
    parent, child = tree_gated
    async with app_over(store).run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, parent)
        assert screen.query_one(StepList).selected_step == "research"
        await pilot.press("enter")
        opened = await shown(pilot)
        assert opened.run_id == child and opened.query_one(StepList).selected_step == "retrieve"
        await pilot.press("r")
        await wait_for(pilot, lambda: Counter(executions(step_log))["tree-research.retrieve"] == 2
                       and store.get_run(parent).status == "paused")
        await settle(pilot)
    assert [(r.step_id, r.decision) for r in store.reviews(child)] == [("retrieve", "retry")]
    assert [(r.step_id, r.decision) for r in store.reviews(parent)] == [("research > retrieve", "retry")]
    assert Counter(executions(step_log)) == Counter({"tree-parent.plan": 1, "tree-research.retrieve": 2,
                                                     "tree-research.summarize": 2})


async def test_e_on_the_path_row_edits_the_childs_paused_output_and_the_tree_finishes(
        store: Store, tree_paused, step_log: Path) -> None:
    """`e` on `research > retrieve` opens the child's paused output; a save that passes its gate is stored on
    the child and the child, then the parent, continue."""
    from tui.screens.edit import EditScreen

    parent, child = tree_paused
    async with app_over(store).run_test(size=SIZE) as pilot:
        await open_run(pilot, parent)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EditScreen) and pilot.app.screen.record is not None)
        editor = pilot.app.screen
        assert isinstance(editor, EditScreen)
        assert '"solar panels fact 0"' in editor.query_one("#editor").text
        editor.query_one("#editor").load_text('{"findings": ["a", "b"]}')
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: store.get_run(parent).status == "succeeded")
        await settle(pilot)
    assert [(r.step_id, r.decision) for r in store.reviews(child)] == [("retrieve", "edit")]
    assert store.get_run(parent).output == "report: a; b"
    assert Counter(executions(step_log))["tree-research.retrieve"] == 1
