"""The run screen over routed and mapped runs: instances as child rows of their step, the waiting
instance selected on opening, decisions on the selected instance, skipped steps with their reason."""

from __future__ import annotations

import pytest

from orchestrator.store import Store
from tests.flow.conftest import FLOW
from tests.tui.run_screen import app_over, rows, title
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (110, 36)


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
    await pilot.pause()
    return screen


@pytest.fixture
def map_paused(store: Store) -> str:
    """map.yaml over 5 documents: instance 3's document is too long for its max_words gate."""
    return start(store, FLOW / "map.yaml")


@pytest.fixture
def three_paused(store: Store) -> str:
    """map_two_pauses.yaml over 3 documents: every instance fails its gate."""
    return start(store, FLOW / "map_two_pauses.yaml", {"count": 3})


@pytest.fixture
def many_paused(store: Store) -> str:
    return start(store, FLOW / "map.yaml", {"count": 25})


@pytest.fixture
def routed(store: Store) -> str:
    return start(store, FLOW / "route.yaml", {"ticket": "I was charged twice"})


class TestInstancePause:
    async def test_opening_selects_the_waiting_instance_under_its_step(self, store: Store, map_paused: str) -> None:
        """Instance 3 of 5 failed its gate: the five instances are child rows of `summarize`, each with its
        icon, and the cursor starts on `summarize[3]`, whose detail names it and its failed verdict."""
        run_id = map_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert rows(screen) == ["retrieve", "summarize", *(f"summarize[{i}]" for i in range(5)), "combine"]
            assert screen.query_one(StepList).selected_step == "summarize[3]"
            assert screen.detail is not None and screen.detail.waiting == ["summarize[3]"]
            icons = {unit: str(screen.query_one(StepList).get_cell(unit, "icon"))
                     for unit in ("summarize[0]", "summarize[3]", "combine")}
            assert icons == {"summarize[0]": "✓", "summarize[3]": "!", "combine": "·"}
            assert title(screen).startswith("summarize[3]  instance 3 of summarize")
            assert "waiting for review" in title(screen)
            await settle(pilot)

    async def test_a_approves_the_selected_instance_and_the_run_finishes(self, store: Store, map_paused: str) -> None:
        """`a` stores the approval against `summarize[3]` (as `approve RUN --step 'summarize[3]'` would) and
        the run continues to its end, combining the five outputs in item order."""
        run_id = map_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            await open_run(pilot, run_id)
            await pilot.press("a")
            await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
            await settle(pilot)
        reviews = store.reviews(run_id)
        assert [(r.step_id, r.decision, r.reviewer) for r in reviews] == [("summarize[3]", "approve", "tester")]
        output = store.get_run(run_id).output
        assert [part.split()[1] for part in output.split(" | ")] == ["0", "1", "2", "3", "4"]

    async def test_several_waiting_instances_are_decided_one_by_one(self, store: Store, three_paused: str) -> None:
        """Several waiting instances are several pauses: `a` decides the selected one only, and the cursor
        moves on to the next one still waiting (wrapping round to the first), so `a a a` decides all three; the
        run finishes when the last is decided."""
        run_id = three_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert screen.detail is not None and screen.detail.waiting == [f"summarize[{i}]" for i in range(3)]
            assert screen.query_one(StepList).selected_step == "summarize[0]"
            await pilot.press("down", "a")
            await wait_for(pilot, lambda: [r.step_id for r in store.reviews(run_id)] == ["summarize[1]"])
            await wait_for(pilot, lambda: screen.detail is not None
                           and screen.detail.waiting == ["summarize[0]", "summarize[2]"])
            assert screen.query_one(StepList).selected_step == "summarize[2]"
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.detail is not None and screen.detail.waiting == ["summarize[0]"])
            assert screen.query_one(StepList).selected_step == "summarize[0]"
            await pilot.press("a")
            await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
            await settle(pilot)
        assert [r.step_id for r in store.reviews(run_id)] == ["summarize[1]", "summarize[2]", "summarize[0]"]


class TestManyInstances:
    async def test_beyond_twenty_a_summary_row_and_the_waiting_one(self, store: Store, many_paused: str) -> None:
        """25 instances collapse as `show` does: a summary row counting each state, then the one that waits."""
        run_id = many_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert rows(screen) == ["retrieve", "summarize", "summarize[0..24]", "summarize[3]", "combine"]
            assert screen.query_one(StepList).selected_step == "summarize[3]"
            screen.query_one(StepList).move_cursor(row=2)
            await wait_for(pilot, lambda: "25 instances: 1 gate_failed, 24 succeeded" in title(screen))
            await settle(pilot)


class TestSkippedSteps:
    async def test_a_skipped_step_shows_its_reason(self, store: Store, routed: str) -> None:
        """The route not taken is `skipped`, and its detail says which condition was false on what value."""
        run_id = routed
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert str(screen.query_one(StepList).get_cell("technical", "icon")) == "-"
            screen.query_one(StepList).move_cursor(row=rows(screen).index("technical"))
            await wait_for(pilot, lambda: "when classify.category == 'technical' and inputs.tier != 'free' was "
                                          "false (classify.category = 'refund'" in title(screen))
            await settle(pilot)


@pytest.fixture
def loop_paused(store: Store) -> str:
    """loop.yaml with a target no iteration reaches: four iterations, then the loop's repeat gate pauses."""
    return start(store, FLOW / "loop.yaml", {"target": 5})


@pytest.fixture
def iteration_paused(store: Store) -> str:
    """loop_gated.yaml: the gate of iteration 2 fails, so draft#2 waits."""
    return start(store, FLOW / "loop_gated.yaml")


class TestLoops:
    async def test_iterations_are_child_rows_and_the_loop_waiting_at_its_repeat_gate_is_selected(
            self, store: Store, loop_paused: str) -> None:
        """Each iteration is a row of its own under its step; the loop's own row waits at its `repeat` gate and
        `a` accepts the last iteration, as `approve RUN` would."""
        run_id = loop_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert rows(screen) == ["draft", *(f"draft#{n}" for n in range(1, 5)), "publish"]
            assert screen.query_one(StepList).selected_step == "draft"
            assert "waiting for review" in title(screen)
            screen.query_one(StepList).move_cursor(row=2)
            await wait_for(pilot, lambda: title(screen).startswith("draft#2  iteration 2 of draft"))
            screen.query_one(StepList).move_cursor(row=0)
            await wait_for(pilot, lambda: title(screen).startswith("draft  "))
            await pilot.press("a")
            await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
            await settle(pilot)
        assert [(r.step_id, r.decision) for r in store.reviews(run_id)] == [("draft", "approve")]
        assert store.get_run(run_id).output == "ESSAY V4"

    async def test_a_waiting_iteration_is_selected_and_decided(self, store: Store, iteration_paused: str) -> None:
        run_id = iteration_paused
        async with app_over(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert rows(screen) == ["draft", "draft#1", "draft#2", "publish"]
            assert screen.query_one(StepList).selected_step == "draft#2"
            await pilot.press("a")
            await wait_for(pilot, lambda: store.get_run(run_id).status == "succeeded")
            await settle(pilot)
        assert [(r.step_id, r.decision) for r in store.reviews(run_id)] == [("draft#2", "approve")]
        assert store.get_run(run_id).output == "ESSAY V3"
