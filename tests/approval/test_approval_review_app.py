"""The review app says a step waits for approval, not for a review of failed gates, and shows the proposal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_detail import StepDetail
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "refund_approval.yaml"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def paused(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PAY_LOG", os.fspath(tmp_path / "pay.log"))
    result = start_run(store, load_workflow(FLOW), {"ticket": "refund order 42"})
    assert result.status == "paused"
    return result.run_id


@pytest.mark.slow
async def test_the_step_detail_says_waiting_for_approval_with_the_proposal_as_output(store: Store,
                                                                                    paused: str) -> None:
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=(100, 32)) as pilot:
        screen = RunDetailScreen(paused)
        await pilot.app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
        await pilot.pause()
        assert screen.query_one(StepList).selected_step == "confirm"
        detail = screen.query_one(StepDetail)
        title = str(detail.query_one("#step-title").render())
        assert "waiting for approval" in title and "waiting for review" not in title
        assert json.loads(str(detail.query_one("#output-json").render())) == {"refund": {"order": "42", "amount": 20}}
        await settle(pilot)
