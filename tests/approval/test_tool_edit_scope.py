"""An edit of a waiting tool call changes that call's arguments and nothing else.

A proposal given as a whole (``{"tool": ..., "arguments": ..., "call_id": ...}``) must name the waiting
call's tool and call id, or leave them out: one naming another tool or another call is refused with exit 2
(the CLI), a ReviewError (the Python API) or an inline error (the review app), and nothing is stored and
nothing runs. The refund tool writes a line per real execution; the scripted model counts its requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import ReviewError
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.approval.conftest import TICKET
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.screens.edit import EditScreen

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "tool_approval.yaml"

OTHER_TOOL = {"tool": "other_tool", "arguments": {"order_id": "1", "amount": 1}, "call_id": "c2"}
OTHER_CALL = {"tool": "refund", "arguments": {"order_id": "1", "amount": 1}, "call_id": "call_999"}


@pytest.fixture
def model(scripted_model: FakeOpenAI) -> FakeOpenAI:
    """Turn 1 proposes a refund of 40 on order 42 (call c2), which waits for approval."""
    scripted_model.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                                      finish_reason="tool_calls"))
    return scripted_model


@pytest.fixture
def paused(store: Store, model: FakeOpenAI) -> str:
    result = start_run(store, load_workflow(FLOW), {"ticket": TICKET.split("=", 1)[1]})
    assert result.status == "paused"
    return result.run_id


def _nothing_happened(store: Store, run_id: str, refund_log: Path, model: FakeOpenAI) -> None:
    assert store.get_run(run_id).status == "paused"
    assert store.reviews(run_id) == []
    assert refund_log.read_text() == ""
    assert len(model.requests) == 1


@pytest.mark.parametrize(("proposal", "why"), [
    (OTHER_TOOL, "names tool 'other_tool', but the waiting call is of tool 'refund'"),
    (OTHER_CALL, "names call id 'call_999', but the waiting call's id is 'c2'"),
], ids=["another-tool", "another-call-id"])
def test_the_cli_refuses_an_edit_naming_another_tool_or_call_and_runs_nothing(cli, store, paused, model, refund_log,
                                                                              tmp_path, proposal, why):
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(proposal))
    res = cli("edit", paused, "--output", str(edited))
    assert res.exit_code == 2, res.stdout
    assert f"the edit of the call waiting in step 'resolve' {why}" in res.stderr
    assert "nothing was changed" in res.stderr and "Traceback" not in res.stderr
    _nothing_happened(store, paused, refund_log, model)


def test_a_proposal_naming_the_waiting_tool_and_call_id_runs_it_with_the_new_arguments(cli, store, paused, model,
                                                                                       refund_log, tmp_path):
    model.respond(completion("Refunded 25 on order 42."))
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({"tool": "refund", "arguments": {"order_id": "42", "amount": 25}, "call_id": "c2"}))
    res = cli("edit", paused, "--output", str(edited))
    assert res.exit_code == 0, res.stderr
    assert refund_log.read_text() == "42 25\n"


def test_the_python_api_refuses_an_edit_naming_another_tool(db_url, store, paused, model, refund_log):
    with Orchestrator(db_url, reviewer="ann") as orch, pytest.raises(ReviewError, match="names tool 'other_tool'"):
        orch.edit(paused, OTHER_TOOL)
    _nothing_happened(store, paused, refund_log, model)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_review_apps_editor_refuses_an_edit_naming_another_call_inline(store, paused, model, refund_log,
                                                                                 anyio_backend):
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=(100, 32)) as pilot:
        screen = EditScreen(paused, None)
        await pilot.app.push_screen(screen)
        await wait_for(pilot, lambda: screen.record is not None)
        screen.query_one("#editor").load_text(json.dumps(OTHER_CALL))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not screen.saving)
        await pilot.pause()
        assert app.screen is screen  # still editing: the edit was refused
        error = str(screen.query_one("#edit-error").render())
        assert "names call id 'call_999', but the waiting call's id is 'c2'" in error
        await settle(pilot)
    _nothing_happened(store, paused, refund_log, model)
