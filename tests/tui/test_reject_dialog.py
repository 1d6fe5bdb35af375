"""The reject dialog says what rejecting the selected pause will do, for each kind of pause.

At a failed gate or an approval step the run ends as rejected (and cannot be undone); at an instance only the
instance ends and the run goes on; inside a child run the child and every run above it end; at a tool
call only the call is refused: the model is told so and the step goes on, so the dialog must not say the
run ends. Escape leaves everything as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Label, Static

from orchestrator.store import Store
from tests.approval.conftest import TICKET
from tests.conftest import side_effect_file
from tests.flow.conftest import FLOW
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call
from tests.tui.run_screen import app_over
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.screens.confirm import ConfirmScreen
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

APPROVAL = Path(__file__).parents[1] / "fixtures" / "approval"
GATED = Path(__file__).parents[1] / "fixtures" / "workflows" / "gated.yaml"


async def reject_dialog(store: Store, run_id: str) -> tuple[str, str]:
    """Press `x` on the run's screen (its waiting step selected); the dialog's title and body. Escape closes it."""
    app = app_over(store)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = RunDetailScreen(run_id)
        await pilot.app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
        await pilot.pause()
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        dialog = app.screen
        shown = (str(dialog.query_one("#dialog-title", Label).render()),
                 str(dialog.query_one("#dialog-body", Static).render()))
        await pilot.press("escape")
        await settle(pilot)
    assert store.get_run(run_id).status == "paused" and store.reviews(run_id) == []
    return shown


@pytest.fixture
def gate_paused(store: Store) -> str:
    return start(store, GATED)


@pytest.fixture
def approval_paused(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PAY_LOG", os.fspath(tmp_path / "pay.log"))
    return start(store, APPROVAL / "refund_approval.yaml", {"ticket": "refund order 42"})


@pytest.fixture
def refund_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return side_effect_file(tmp_path, monkeypatch, "refunds.log", "REFUND_LOG")


@pytest.fixture
def tool_paused(store: Store, fake_openai: FakeOpenAI, refund_log: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                                      finish_reason="tool_calls"))
    return start(store, APPROVAL / "tool_approval.yaml", {"ticket": TICKET.split("=", 1)[1]})


async def test_at_a_failed_gate_the_run_ends_as_rejected(store: Store, gate_paused: str) -> None:
    title, body = await reject_dialog(store, gate_paused)
    assert title == f"Reject run {gate_paused}?"
    assert body == ("The run ends as rejected at step scored; steps that never ran are recorded as skipped. "
                    "This cannot be undone.")


async def test_at_an_approval_step_the_proposal_is_not_carried_out_and_the_run_ends(store: Store,
                                                                                    approval_paused: str) -> None:
    _, body = await reject_dialog(store, approval_paused)
    assert body.startswith("The proposal of approval step confirm is not carried out: the run ends as rejected")
    assert "cannot be undone" in body


async def test_at_a_tool_call_only_the_call_is_refused_and_the_step_goes_on(store: Store, tool_paused: str,
                                                                           refund_log: Path) -> None:
    title, body = await reject_dialog(store, tool_paused)
    assert title == f"Reject the call of tool 'refund' in run {tool_paused}?"
    assert "told the call was refused" in body and "the step goes on; the run continues" in body
    assert "ends as rejected" not in body and "cannot be undone" not in body
    assert refund_log.read_text() == ""


@pytest.fixture
def instance_paused(store: Store, step_log: Path) -> str:
    return start(store, FLOW / "map.yaml")


@pytest.fixture
def child_paused(store: Store, step_log: Path) -> str:
    return start(store, FLOW / "tree_review.yaml")


async def test_at_an_instance_only_the_instance_ends_and_the_run_goes_on(store: Store, instance_paused: str) -> None:
    run_id = instance_paused
    title, body = await reject_dialog(store, run_id)
    assert title == f"Reject summarize[3] of run {run_id}?"
    assert body.startswith("Instance summarize[3] ends as rejected (its consumers read null) and the run goes on")


async def test_inside_a_child_the_child_and_every_run_above_it_end(store: Store, child_paused: str) -> None:
    run_id = child_paused
    _, body = await reject_dialog(store, run_id)
    assert body.startswith("Step research > retrieve waits inside a child run: the child run ends as rejected, "
                           "and so does every run above it, this one at step research")
