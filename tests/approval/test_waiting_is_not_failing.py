"""A pause for a person's approval is a wait, not a failure.

``show`` prints an approval step's and a tool call's open pause as ``waiting`` (as the progress line does),
then what was decided, never ``gate_failed``; the review app's attempts list says the same. ``show --json``
keeps ``status: gate_failed`` (a contract) and says the kind of pause in ``pause``: ``gate``, ``approval``
or ``tool_call`` (null for a record that is no pause), in ``steps`` and in ``attempts``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import Store
from tests.approval.conftest import TICKET
from tests.conftest import FIXTURES as WORKFLOWS
from tests.conftest import side_effect_file
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call
from tests.tui.run_screen import app_over
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_detail import StepDetail
from tui.widgets.step_list import StepList

APPROVAL = Path(__file__).parent.parent / "fixtures" / "approval"


@pytest.fixture
def pay_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return side_effect_file(tmp_path, monkeypatch, "pay.log", "PAY_LOG")


@pytest.fixture
def approval_paused(store: Store, pay_log: Path) -> str:
    """refund_approval.yaml waiting at its approval step ``confirm``."""
    return start(store, APPROVAL / "refund_approval.yaml", {"ticket": "refund order 42"})


@pytest.fixture
def tool_paused(store: Store, scripted_model: FakeOpenAI, refund_log: Path) -> str:
    """tool_approval.yaml's ``resolve`` waiting for the approval of a call of ``refund``."""
    scripted_model.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                                      finish_reason="tool_calls"))
    return start(store, APPROVAL / "tool_approval.yaml", {"ticket": TICKET.split("=", 1)[1]})


def _status(shown: str, step: str) -> str:
    """The status ``show`` prints for ``step``: its table row's third cell, or (one block per step on a narrow
    console) the word after the step id."""
    lines = shown.splitlines()
    table = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    blocks = [line.split() for line in lines if line.split()[:1] == [step]]
    statuses = [row[2] for row in table if row[0] == step] + [words[1] for words in blocks]
    return statuses[0]


def test_show_prints_an_open_approval_as_waiting_and_json_says_the_kind_of_pause(cli, approval_paused):
    assert _status(cli("show", approval_paused).stdout, "confirm") == "waiting"
    doc = cli("show", approval_paused, "--json").json()
    [confirm] = [s for s in doc["steps"] if s["step_id"] == "confirm"]
    assert (confirm["status"], confirm["pause"]) == ("gate_failed", "approval")
    assert [(a["unit"], a["pause"]) for a in doc["attempts"]] == [("decide", None), ("confirm", "approval")]


def test_a_rejected_approval_shows_what_was_decided(cli, approval_paused, pay_log):
    assert cli("reject", approval_paused, "--reason", "no").exit_code == 1
    assert _status(cli("show", approval_paused).stdout, "confirm") == "rejected"
    assert pay_log.read_text() == ""


def test_show_prints_a_tool_call_waiting_for_approval_as_waiting(cli, tool_paused):
    assert _status(cli("show", tool_paused).stdout, "resolve") == "waiting"
    [resolve] = cli("show", tool_paused, "--json").json()["steps"]
    assert (resolve["status"], resolve["pause"]) == ("gate_failed", "tool_call")


def test_a_pause_at_failed_gates_keeps_gate_failed_and_says_pause_gate(cli):
    res = cli("run", str(WORKFLOWS / "gated.yaml"), "--json")
    assert res.exit_code == 3
    [scored] = [s for s in res.json()["steps"] if s["step_id"] == "scored"]
    assert (scored["status"], scored["pause"]) == ("gate_failed", "gate")
    assert _status(cli("show", res.json()["run_id"]).stdout, "scored") == "gate_failed"
    assert all(s["pause"] is None for s in res.json()["steps"] if s["step_id"] != "scored")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_review_apps_attempts_list_says_waiting(store: Store, approval_paused: str, anyio_backend) -> None:
    app = app_over(store)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = RunDetailScreen(approval_paused)
        await pilot.app.push_screen(screen)
        await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
        await pilot.pause()
        assert screen.query_one(StepList).selected_step == "confirm"
        attempts = str(screen.query_one(StepDetail).query_one("#attempts-text").render())
        assert attempts.startswith("#1 waiting") and "gate_failed" not in attempts
        await settle(pilot)
