"""Tools that need approval on an ``llm`` step with ``repeat:``: each iteration's call pauses that iteration.

Every iteration is a unit of its own (``resolve#2``), so its tool call waits on that unit and is decided on
it; the loop goes on from the decided iteration, and nothing that already ran runs again. The model is the
scripted server on 127.0.0.1 (it counts the requests), the refund tool writes a line per real execution.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.approval.conftest import TICKET
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "tool_loop.yaml"


@pytest.fixture
def model(scripted_model: FakeOpenAI) -> FakeOpenAI:
    return scripted_model


def _refund(model: FakeOpenAI, call_id: str, amount: int) -> None:
    model.respond(completion(None, tool_calls=[tool_call(call_id, "refund", {"order_id": "42", "amount": amount})],
                             finish_reason="tool_calls"))


def test_each_iterations_tool_call_waits_on_its_own_unit_and_approving_it_continues_the_loop(cli, model,
                                                                                          refund_log):
    _refund(model, "r1", 10)
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["resolve#1"]
    run_id = res.json()["run_id"]

    model.respond(completion("not yet"))  # iteration 1 ends, until is false
    _refund(model, "r2", 15)              # iteration 2 proposes another refund
    res = cli("approve", run_id, "--step", "resolve#1", "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["resolve#2"]
    assert refund_log.read_text() == "42 10\n"
    doc = cli("show", run_id, "--json").json()
    waiting = [s for s in doc["steps"] if s["status"] == "gate_failed"]
    assert [(s["unit"], s["output"]["call_id"]) for s in waiting] == [("resolve#2", "r2")]
    assert "round 2" in model.requests[-1]["messages"][-1]["content"]

    model.respond(completion("done"))
    res = cli("approve", run_id, "--step", "resolve#2", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "done"
    assert refund_log.read_text() == "42 10\n42 15\n"  # each approved refund ran once
    assert len(model.requests) == 4  # two turns per iteration, none asked twice
    third, fourth = model.requests[2:]
    assert fourth["messages"][:len(third["messages"])] == third["messages"]
    assert json.loads(fourth["messages"][-1]["content"]) == {"order_id": "42", "refunded": 15}
    doc = cli("show", run_id, "--json").json()
    assert [r["decision"] for r in doc["reviews"]] == ["approve", "approve"]
    loop = [s for s in doc["steps"] if s["unit"] == "resolve"][-1]
    assert loop["status"] == "succeeded" and loop["output"] == "done"


def test_a_rejected_call_in_an_iteration_tells_the_model_and_the_loop_goes_on(cli, model, refund_log):
    _refund(model, "r1", 10)
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    run_id = res.json()["run_id"]
    model.respond(completion("not yet"))
    _refund(model, "r2", 15)
    assert cli("approve", run_id, "--step", "resolve#1").exit_code == 3
    model.respond(completion("done"))
    res = cli("reject", run_id, "--step", "resolve#2", "--reason", "one refund is enough", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "done"
    assert refund_log.read_text() == "42 10\n"
    assert json.loads(model.requests[-1]["messages"][-1]["content"]) == {
        "error": "the reviewer rejected this call: one refund is enough"}
    assert len(model.requests) == 4
