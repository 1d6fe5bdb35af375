"""Steps that passed only on a reviewer's word or a warning are marked, and the run screen's header
and trace panel name the step of one and the same attribution record."""

from __future__ import annotations

import pytest

from orchestrator.attribution.choice import explaining_record
from orchestrator.attribution.result import AttributionResult, Candidate, save
from orchestrator.bind.loader import load_workflow
from orchestrator.service import review
from orchestrator.service.runner import continue_run, start_run
from orchestrator.store import Store
from tests.attribution.conftest import FIX as ATTRIBUTION_FIXTURES
from tests.tui.seed import NOW
from tests.tui.seed_history import History, seed_history
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_marks import APPROVED_DESPITE, WARNED
from tui.widgets.trace_panel import TracePanel
from tui.widgets.traced_step_list import TracedStepList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


@pytest.fixture
def history(store: Store) -> History:
    return seed_history(store)


@pytest.fixture
def app(store: Store) -> ReviewApp:
    return make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)


@pytest.fixture
def warned_critic(store: Store) -> str:
    """critic.yaml: its critic runs under on_gate_fail: warn and fails; the run goes on."""
    return start_run(store, load_workflow(ATTRIBUTION_FIXTURES / "critic.yaml"), {}).run_id


@pytest.fixture
def approved_critic(store: Store) -> str:
    """critic_paused.yaml: the critic fails and pauses the run; ana approves it and the run finishes."""
    run_id = start_run(store, load_workflow(ATTRIBUTION_FIXTURES / "critic_paused.yaml"), {}).run_id
    review.approve(store, run_id, step="check", reviewer="ana")
    continue_run(store, run_id)
    return run_id


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(TracedStepList).row_count)
    await settle(pilot)
    return screen


def icons(screen: RunDetailScreen) -> dict[str, str]:
    steps = screen.query_one(TracedStepList)
    return {str(row.key.value): str(steps.get_row_at(i)[0]) for i, row in enumerate(steps.ordered_rows)}


def text_of(screen: RunDetailScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


class TestMarks:
    async def test_a_step_approved_despite_failing_has_its_own_icon_and_names_the_gate(
            self, app: ReviewApp, history: History) -> None:
        """score failed range (0.3 < 0.5) and bob approved it: not a plain ✓, and the detail says why."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, history.score_blamed)
            assert icons(screen) == {"fetch": "✓", "score": APPROVED_DESPITE, "report": "✓"}
            steps = screen.query_one(TracedStepList)
            steps.move_cursor(row=[str(r.key.value) for r in steps.ordered_rows].index("score"))
            await wait_for(pilot, lambda: "approved despite: range:" in text_of(screen, "#step-title"))
            assert "0.3 is below min 0.5" in text_of(screen, "#step-title")
            await settle(pilot)

    async def test_a_step_whose_warning_gate_failed_is_marked_as_a_warning(self, app: ReviewApp,
                                                                           warned_critic: str) -> None:
        """The critic failed under on_gate_fail: warn: the run went on, and its row says ⚠, not ✓."""
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, warned_critic)
            marks = icons(screen)
            assert marks["check"] == WARNED
            assert {marks[s] for s in ("fetch", "analyze", "summarize", "respond")} == {"✓"}
            await settle(pilot)

    async def test_an_approved_critic_is_marked_on_the_critic(self, app: ReviewApp, approved_critic: str) -> None:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, approved_critic)
            assert icons(screen)["check"] == APPROVED_DESPITE
            await settle(pilot)


class TestOneRecord:
    async def test_header_and_trace_panel_name_the_step_of_the_same_record(self, app: ReviewApp, store: Store,
                                                                           history: History) -> None:
        """score_blamed has a stored trace blaming score; a later counterfactual record blaming fetch is more
        informative, so the header, the step list marker and the trace panel all follow it."""
        run_id = history.score_blamed
        save(store, AttributionResult(run_id, "counterfactual", {}, [Candidate("fetch", "retriever", -1.0),
                                                                    Candidate("score", "scorer", 0.0)],
                                      {"retriever": -1.0, "scorer": 0.0}, "fetch", 1.0, {}, cost=3))
        chosen = explaining_record(store.attributions(run_id))
        assert chosen is not None and (chosen.method, chosen.blamed_step) == ("counterfactual", "fetch")
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, run_id)
            assert "counterfactual attribution blames step fetch" in text_of(screen, "#run-summary")
            await pilot.press("t")
            panel = screen.query_one(TracePanel)
            await wait_for(pilot, lambda: panel.view is not None)
            assert panel.view is not None and panel.view.id == chosen.id
            assert "blames step fetch" in str(screen.query_one("#trace-head").render())
            assert screen.query_one(TracedStepList).traced == "fetch"
            await settle(pilot)
