"""The run screen: steps in order, the selected step's detail, and decisions on the waiting step."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.service import review
from orchestrator.store import Store, open_store
from tests.tui.seed import FIXTURES, Seeded, start
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.run_detail import RunDetailScreen
from tui.screens.runs import RunsScreen
from tui.widgets.gate_verdict import GateVerdict
from tui.widgets.step_detail import JumpButton, StepDetail
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (100, 32)


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
    await pilot.pause()
    return screen


def step_rows(screen: RunDetailScreen) -> list[str]:
    return [str(key.value) for key in screen.query_one(StepList).rows]


class TestShowing:
    async def test_steps_in_topological_order_with_the_paused_step_selected(self, app: ReviewApp,
                                                                          seeded: Seeded) -> None:
        """The list follows the DAG and the cursor starts on the step waiting for review."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_twice)
            assert step_rows(screen) == ["fetch", "score", "report"]
            assert screen.query_one(StepList).selected_step == "score"
            await settle(pilot)

    async def test_detail_shows_gates_attempts_context_and_reviews(self, app: ReviewApp, seeded: Seeded) -> None:
        """The paused step shows each gate's verdict, both attempts, what `report` needs, and alice's retry."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_twice)
            verdicts = {v.gate.gate: v for v in screen.query(GateVerdict)}
            assert verdicts["range"].has_class("-failed") and verdicts["not_empty"].has_class("-passed")
            assert "0.35 is below min 0.5" in verdicts["range"].gate.reason
            detail = screen.query_one(StepDetail)
            assert "#2 gate_failed" in str(detail.query_one("#attempts-text").render())
            assert "a score between 0 and 1" in str(detail.query_one("#injected-text").render())
            reviews = str(detail.query_one("#reviews-text").render())
            assert "retry of attempt 1 by alice" in reviews and "summary looks thin" in reviews
            assert [b.step_id for b in screen.query(JumpButton)] == ["fetch"]
            await settle(pilot)

    async def test_jump_to_an_upstream_step(self, app: ReviewApp, seeded: Seeded) -> None:
        """Pressing the upstream link selects the step it consumed."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_twice)
            button = screen.query_one(JumpButton)
            button.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert screen.query_one(StepList).selected_step == "fetch"
            assert screen.query_one("#section-gates").has_class("-empty")  # fetch has no gates
            await settle(pilot)

    async def test_refreshes_when_another_reviewer_decides(self, app: ReviewApp, db_url: str,
                                                           seeded: Seeded) -> None:
        """A rejection made elsewhere (its own store connection) shows up without a key press."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_twice)
            with open_store(db_url) as other:
                review.reject(other, seeded.paused_twice, reviewer="bob")
            await wait_for(pilot, lambda: screen.detail.run.status == "rejected")
            assert screen.detail.waiting == []
            await settle(pilot)

    async def test_q_goes_back_to_the_runs(self, app: ReviewApp, seeded: Seeded) -> None:
        """`q` on a run returns to the runs list (and does not quit)."""
        async with app.run_test(size=SIZE) as pilot:
            await open_run(pilot, seeded.paused_twice)
            await pilot.press("q")
            assert isinstance(app.screen, RunsScreen)
            await settle(pilot)


class TestDecisions:
    async def test_retry_runs_the_step_again_and_the_run_finishes(self, app: ReviewApp, store: Store,
                                                                 seeded: Seeded) -> None:
        """`r` stores a retry; the continuation re-runs `score` (now 0.55) and the run succeeds."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_retryable)
            await pilot.press("r")
            await wait_for(pilot, lambda: store.get_run(seeded.paused_retryable).status == "succeeded")
            await settle(pilot)
            await wait_for(pilot, lambda: screen.detail.run.status == "succeeded")
        assert [r.decision for r in store.reviews(seeded.paused_retryable)] == ["retry"]
        latest = store.latest_records(seeded.paused_retryable)
        assert (latest["score"].attempt, latest["score"].status, latest["score"].output["score"]) == \
            (2, "succeeded", 0.55)

    async def test_reject_asks_to_confirm_and_stores_the_comment(self, app: ReviewApp, store: Store,
                                                                seeded: Seeded) -> None:
        """`x` opens a confirmation with a comment box; confirming ends the run as rejected."""
        async with app.run_test(size=SIZE) as pilot:
            await open_run(pilot, seeded.paused_twice)
            await pilot.press("x")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press(*"not worth it", "enter")
            await wait_for(pilot, lambda: store.get_run(seeded.paused_twice).status == "rejected")
            await settle(pilot)
        [_, rejection] = store.reviews(seeded.paused_twice)
        assert (rejection.decision, rejection.comment, rejection.reviewer) == ("reject", "not worth it", "tester")
        assert store.latest_records(seeded.paused_twice)["report"].status == "skipped"

    async def test_reject_cancelled_stores_nothing(self, app: ReviewApp, store: Store, seeded: Seeded) -> None:
        """Escape in the confirmation leaves the run paused and the store untouched."""
        before = store.count_rows()
        async with app.run_test(size=SIZE) as pilot:
            await open_run(pilot, seeded.paused_twice)
            await pilot.press("x", "escape")
            assert isinstance(app.screen, RunDetailScreen)
            await settle(pilot)
        assert store.count_rows() == before
        assert store.get_run(seeded.paused_twice).status == "paused"

    async def test_a_run_decided_meanwhile_shows_a_message_and_changes_nothing(
            self, store: Store, seeded: Seeded, notes_factory) -> None:
        """Another reviewer rejects first; `a` here gets ReviewError's message and stores nothing more."""
        # no automatic refresh during the test: the screen must still believe the step waits
        app = make_app(store, reviewer="tester", refresh_interval=3600, cursor_blink=False)
        notes = notes_factory(app)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_retryable)
            review.reject(store, seeded.paused_retryable, reviewer="bob", comment="first")
            before = store.count_rows()
            await pilot.press("a")
            await wait_for(pilot, lambda: any("not paused" in n for n in notes))
            await wait_for(pilot, lambda: screen.detail.run.status == "rejected")
            await settle(pilot)
        assert store.count_rows() == before
        assert [(r.decision, r.reviewer) for r in store.reviews(seeded.paused_retryable)] == [("reject", "bob")]

    async def test_label_shows_the_step_a_backward_trace_blames(self, app: ReviewApp, store: Store,
                                                               seeded: Seeded) -> None:
        """A label of a run whose score was approved despite failing stores a trace blaming score; the run
        screen's header names the step of that stored record."""
        from orchestrator.service.runner import continue_run

        def approve_and_finish() -> None:
            review.approve(store, seeded.paused_twice, reviewer="bob")
            continue_run(store, seeded.paused_twice)

        await anyio.to_thread.run_sync(approve_and_finish)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, seeded.paused_twice)
            assert "blames step" not in str(screen.query_one("#run-summary").render())
            await pilot.press("l")
            app.screen.query_one("#incorrect").value = True
            await pilot.press("tab")
            app.screen.query_one("#reason").focus()
            await pilot.press(*"too optimistic", "enter")
            await wait_for(pilot, lambda: "backward trace blames step score"
                           in str(screen.query_one("#run-summary").render()))
            await settle(pilot)
        assert [(o.correct, o.reason) for o in store.outcomes(seeded.paused_twice)] == [(False, "too optimistic")]
        assert [a.blamed_step for a in store.attributions(seeded.paused_twice)] == ["score"]


class TestTwoWaitingSteps:
    @pytest.mark.slow
    async def test_decisions_apply_to_the_selected_waiting_step(self, store: Store, notes_factory) -> None:
        """With two steps waiting, the runs screen sends the reviewer into the run; there `a` approves
        only the selected one and the run stays paused at the other."""
        run_id = await anyio.to_thread.run_sync(start, store, FIXTURES / "two_branches.yaml")
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
        notes = notes_factory(app)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.screen.query_one("#runs").row_count == 1)
            await pilot.press("a")
            await wait_for(pilot, lambda: notes)
            assert "2 steps waiting (score_a, score_b)" in notes[-1]
            assert store.reviews(run_id) == []
            await pilot.press("enter")
            screen = app.screen
            await wait_for(pilot, lambda: isinstance(screen, RunDetailScreen) and screen.detail is not None)
            assert screen.query_one(StepList).selected_step == "score_a"
            await pilot.press("down")
            assert screen.query_one(StepList).selected_step == "score_b"
            await pilot.press("a")
            await wait_for(pilot, lambda: store.reviews(run_id))
            await settle(pilot)
            await wait_for(pilot, lambda: screen.detail.waiting == ["score_a"])
        assert [(r.decision, r.step_id) for r in store.reviews(run_id)] == [("approve", "score_b")]
        assert store.get_run(run_id).status == "paused"
