"""The backward trace on the run screen (`t`): blamed step, confidence, ranked candidates, and the
blamed step highlighted in the step list."""

from __future__ import annotations

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.tui.seed import NOW
from tests.tui.seed_history import DASHBOARD, History, seed_history
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.label import LabelScreen
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_detail import StepDetail
from tui.widgets.trace_panel import CandidateView, TracePanel
from tui.widgets.traced_step_list import TracedStepList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


@pytest.fixture
def history(store: Store) -> History:
    return seed_history(store)


@pytest.fixture
def history_app(store: Store, history: History) -> ReviewApp:
    return make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False, clock=lambda: NOW)


@pytest.fixture
def pauses_twice(store: Store, history: History) -> str:
    """A dashboard-demo run paused at fetch (2 documents) that pauses at score (0.3) once approved."""
    return start_run(store, load_workflow(DASHBOARD), {"found": 2, "quality": 0.3}).run_id


async def open_trace(pilot, run_id: str) -> RunDetailScreen:
    """Open the run screen, press `t`, and wait until the trace (or why there is none) is shown."""
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(TracedStepList).row_count)
    await pilot.press("t")
    panel = screen.query_one(TracePanel)
    await wait_for(pilot, lambda: panel.view is not None or panel.reason is not None)
    await settle(pilot)
    return screen


def head(screen: RunDetailScreen) -> str:
    return str(screen.query_one("#trace-head").render())


def row_background(steps: TracedStepList, step_id: str):
    """The background colour the step's row is drawn with (its first cell)."""
    index = [str(k.value) for k in steps.rows].index(step_id)
    strip = steps.render_line(steps.header_height + index)
    return next(seg.style.bgcolor for seg in strip if seg.text.strip() and seg.style is not None)


class TestTrace:
    async def test_t_shows_method_blamed_step_confidence_and_ranked_candidates(self, history_app: ReviewApp,
                                                                               history: History) -> None:
        """r0004 (score approved despite failing, labelled incorrect): score blamed with confidence 0.90;
        candidates score, report, fetch with their credit and evidence."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.score_blamed)
            assert screen.has_class("-tracing")
            assert not screen.query_one(StepDetail).display and screen.query_one(TracePanel).display
            assert "blames step score (agent scorer) · confidence 0.90 · method trace" in head(screen)
            assert "outcome incorrect (0.00, human carol)" in head(screen)
            candidates = screen.query_one(TracePanel).candidates
            assert [(c.rank, c.step_id, c.credit) for c in candidates] == [(1, "score", -1.0), (2, "report", 0.0),
                                                                           (3, "fetch", 0.0)]
            evidence = str(candidates[0].query_one(".candidate-evidence").render())
            assert "approved despite failing: failed range: field 'score' = 0.3 is below min 0.5; approved by bob" \
                in evidence
            assert not candidates[0].has_class("-quiet")
            assert candidates[1].has_class("-quiet") and candidates[2].has_class("-quiet")  # one line each
            assert "report (writer) +0.00 · no signal, unchecked" in str(candidates[1].query_one(".candidate-head")
                                                                         .render())
            assert "fetch (retriever) +0.00 · no signal, checked by gates" in \
                str(candidates[2].query_one(".candidate-head").render())
            assert "step 'score' is the earliest step" in str(screen.query_one("#trace-why").render())
            assert "2 of 3 candidate steps are checked" in str(screen.query_one("#trace-coverage").render())
            await settle(pilot)

    async def test_the_blamed_step_is_highlighted_by_its_class(self, history_app: ReviewApp,
                                                               history: History) -> None:
        """The blamed candidate has the class -blamed; in the step list score's row takes the
        steplist--blamed style while the trace is open, and loses it when `t` closes the trace."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.score_blamed)
            blamed = [c.step_id for c in screen.query(CandidateView) if c.has_class("-blamed")]
            assert blamed == ["score"]
            steps = screen.query_one(TracedStepList)
            assert steps.has_class("-tracing") and steps.traced == "score"
            assert steps.selected_step == "fetch"  # the cursor stays put: the highlight is visible
            highlight = steps.get_component_rich_style("steplist--blamed").bgcolor
            assert highlight is not None
            assert row_background(steps, "score") == highlight
            assert row_background(steps, "report") != highlight
            await pilot.press("t")
            assert not screen.has_class("-tracing") and screen.query_one(StepDetail).display
            assert steps.traced is None and not steps.has_class("-tracing")
            assert row_background(steps, "score") != highlight
            await settle(pilot)

    async def test_a_trace_that_blames_no_step(self, history_app: ReviewApp, history: History) -> None:
        """Every gate passed, yet the run was labelled incorrect: no step blamed, nothing highlighted,
        and the explanation points to the replay methods."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.unattributed)
            assert "blames no step · confidence 0.00" in head(screen)
            assert not [c for c in screen.query(CandidateView) if c.has_class("-blamed")]
            assert screen.query_one(TracedStepList).traced is None
            assert "counterfactual" in str(screen.query_one("#trace-why").render())
            await settle(pilot)

    async def test_tab_moves_into_a_long_trace_and_scrolls_it(self, history_app: ReviewApp,
                                                              history: History) -> None:
        """At 80x24 the trace is longer than its pane: tab focuses it and end scrolls to the coverage line."""
        async with history_app.run_test(size=(80, 24)) as pilot:
            screen = await open_trace(pilot, history.score_blamed)
            panel = screen.query_one(TracePanel)
            assert panel.max_scroll_y > 0
            await pilot.press("tab")
            assert panel.has_focus
            await pilot.press("end")
            await wait_for(pilot, lambda: panel.scroll_y == panel.max_scroll_y)
            await settle(pilot)

    async def test_escape_closes_the_trace_then_leaves_the_run(self, history_app: ReviewApp,
                                                               history: History) -> None:
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.fetch_blamed)
            assert screen.query_one(TracedStepList).traced == "fetch"
            await pilot.press("escape")
            assert history_app.screen is screen and not screen.has_class("-tracing")
            await pilot.press("escape")
            assert history_app.screen is not screen
            await settle(pilot)


class TestNoOutcomeYet:
    async def test_a_paused_run_shows_why_it_cannot_be_traced(self, history_app: ReviewApp, store: Store,
                                                              history: History) -> None:
        """The attribution code's message, in the panel; nothing stored, nothing highlighted, no crash."""
        before = store.count_rows()
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.paused)
            panel = screen.query_one(TracePanel)
            assert panel.has_class("-unavailable") and not panel.candidates
            assert f"run {history.paused} is paused and has no outcome to explain yet" in head(screen)
            assert screen.query_one(TracedStepList).traced is None
            await settle(pilot)
        assert store.count_rows() == before

    async def test_an_unlabelled_run_traces_once_labelled_here(self, history_app: ReviewApp, store: Store,
                                                               history: History) -> None:
        """A finished run nobody labelled: the message says how; `l` → incorrect, and the open trace blames
        fetch (approved despite finding two documents)."""
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, history.unlabelled)
            assert "has no outcome to explain" in head(screen)
            assert "Press l to label it here" in head(screen)
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(history_app.screen, LabelScreen))
            history_app.screen.query_one("#incorrect").value = True
            history_app.screen.query_one("#reason").focus()
            await pilot.press(*"two sources only", "enter")
            panel = screen.query_one(TracePanel)
            await wait_for(pilot, lambda: panel.view is not None)
            await settle(pilot)
            assert "blames step fetch (agent retriever)" in head(screen)
            assert screen.query_one(TracedStepList).traced == "fetch"
            await settle(pilot)
        assert [a.blamed_step for a in store.attributions(history.unlabelled)] == ["fetch"]

    async def test_a_step_that_starts_waiting_closes_the_trace(self, history_app: ReviewApp,
                                                              pauses_twice: str) -> None:
        """Approved at fetch from the trace view, the run pauses again at score: the trace gives way to
        score's detail, since deciding on it is what the run screen is for."""
        run_id = pauses_twice
        async with history_app.run_test(size=SIZE) as pilot:
            screen = await open_trace(pilot, run_id)
            assert "is paused and has no outcome" in head(screen)
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.detail is not None and screen.detail.waiting == ["score"])
            await settle(pilot)
            assert not screen.has_class("-tracing") and screen.query_one(StepDetail).display
            assert screen.query_one(TracedStepList).selected_step == "score"
            await settle(pilot)
