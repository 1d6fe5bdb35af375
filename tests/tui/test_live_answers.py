"""The run screen shows the text an LLM step is writing while the app itself continues the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import Store
from tests.llm.fake_openai_server import FakeOpenAI, completion
from tests.tui.run_screen import app_over
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.live_answers import LiveAnswerPanel
from tui.widgets.step_list import StepList

GATED_THEN_LLM = Path(__file__).parents[1] / "fixtures" / "workflows" / "gated_then_llm.yaml"
ANSWER = "A score of 0.1 is low, but a person let it through."


@pytest.fixture
def paused_before_llm(store: Store, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run paused at a failed gate; its next step, `draft`, asks the scripted endpoint, which streams ANSWER
    four characters at a time and stops after the first two pieces until the test releases it."""
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.respond(completion(ANSWER))
    fake_openai.hold_stream_after(3)  # the opening chunk (role, no text), "A sc", "ore "
    return start(store, GATED_THEN_LLM)


@pytest.mark.slow  # about 2-4 s: the continuation loads the executor and the OpenAI client
@pytest.mark.anyio
async def test_after_approve_the_llm_steps_answer_grows_under_the_steps(
        store: Store, fake_openai: FakeOpenAI, paused_before_llm: str) -> None:
    """Approving in the app continues the run here with streaming on: the panel under the steps shows the
    half-written answer while the step runs (a cursor mark says it is still writing), then all of it, kept and
    marked with the step's status once the step ended."""
    run_id = paused_before_llm
    app = app_over(store)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = RunDetailScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
        panel = screen.query_one(LiveAnswerPanel)
        assert not panel.display  # nothing streams before the decision

        await pilot.press("a")
        await wait_for(pilot, lambda: str(panel.render()) == "draft: A score ▌")
        assert panel.display
        assert store.get_run(run_id).status == "running" and "draft" not in store.latest_records(run_id)

        fake_openai.release_stream()
        await wait_for(pilot, lambda: str(panel.render()) == f"draft (succeeded): {ANSWER}")
        await settle(pilot)
        assert panel.display and str(panel.render()) == f"draft (succeeded): {ANSWER}"
    assert store.get_run(run_id).status == "succeeded"
    assert fake_openai.requests[0]["stream"] is True  # the app asked for the answer piece by piece
