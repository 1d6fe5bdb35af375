"""Tools that need approval: ``tools: [{ref: support_tools:refund, approve: true}]`` on an ``llm`` step.

When the model calls such a tool the step pauses mid-loop with the call (tool and arguments) as its
proposal; approve runs the call and the loop goes on from the stored turns (the model is not asked again
for a turn it already took), edit runs it with the edited arguments, reject returns the reviewer's reason to
the model as the tool's answer and the loop goes on. The model is the scripted server the test starts on
127.0.0.1, which counts the requests it received; the refund tool writes a line per real execution.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.approval.conftest import TICKET
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

FIXTURES = Path(__file__).parent.parent / "fixtures" / "approval"
FLOW = FIXTURES / "tool_approval.yaml"


@pytest.fixture
def model(scripted_model: FakeOpenAI) -> FakeOpenAI:
    # turn 1 looks the order up (no approval needed), turn 2 proposes the refund
    scripted_model.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                      finish_reason="tool_calls"))
    scripted_model.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                                      finish_reason="tool_calls"))
    return scripted_model


def _paused(cli, model: FakeOpenAI) -> str:
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["resolve"]
    assert len(model.requests) == 2
    return res.json()["run_id"]


def _tool_answers(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_call_of_a_tool_that_needs_approval_pauses_the_step_with_the_call_as_its_proposal(cli, model, refund_log):
    run_id = _paused(cli, model)
    step = cli("show", run_id, "--json").json()["steps"][0]
    assert step["status"] == "gate_failed" and step["gates"] == []
    assert step["error"] == "AwaitingApproval: waiting for approval of a call of tool 'refund'"
    assert step["output"] == {"tool": "refund", "arguments": {"order_id": "42", "amount": 40}, "call_id": "c2"}
    assert [t["kind"] for t in step["llm"]["turns"]] == ["model", "tool", "model"]  # the lookup ran, not the refund
    assert refund_log.read_text() == ""
    shown = cli("show", run_id).stdout
    assert "waiting for approval of a call of tool 'refund'" in shown


def test_approve_runs_the_call_and_the_loop_goes_on_without_asking_the_model_again(cli, model, refund_log):
    run_id = _paused(cli, model)
    model.respond(completion("Refunded 40 on order 42."))
    res = cli("approve", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "Refunded 40 on order 42."
    assert refund_log.read_text() == "42 40\n"
    assert len(model.requests) == 3  # two turns before the pause, one after: none asked twice
    first, second, third = model.requests
    assert third["messages"][:len(second["messages"])] == second["messages"]
    assert json.loads(_tool_answers(third)[-1]["content"]) == {"order_id": "42", "refunded": 40}
    assert [m["tool_call_id"] for m in _tool_answers(third)] == ["c1", "c2"]
    stats = cli("stats", "--workflow", "tool-approval", "--json").json()["steps"][0]
    assert stats["gate_failures"] == 0 and stats["gate_pass_rate"] is None
    assert stats["model_calls"] == 3  # every request the server received, counted once


def test_edit_runs_the_call_with_the_edited_arguments(cli, model, refund_log, tmp_path):
    run_id = _paused(cli, model)
    model.respond(completion("Refunded 25 on order 42."))
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({"tool": "refund", "arguments": {"order_id": "42", "amount": 25}}))
    res = cli("edit", run_id, "--output", str(edited), "--json")
    assert res.exit_code == 0, res.stderr
    assert refund_log.read_text() == "42 25\n"
    assert json.loads(_tool_answers(model.requests[-1])[-1]["content"]) == {"order_id": "42", "refunded": 25}
    assert cli("show", run_id, "--json").json()["reviews"][0]["output_after"]["arguments"] == {
        "order_id": "42", "amount": 25}


def test_an_edit_whose_arguments_do_not_fit_the_tool_is_refused_and_nothing_is_stored(cli, model, refund_log,
                                                                                       tmp_path):
    run_id = _paused(cli, model)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({"order_id": "42", "amount": "a lot"}))  # the arguments alone are an edit too
    res = cli("edit", run_id, "--output", str(edited))
    assert res.exit_code == 2
    assert "the edited arguments of the call of tool 'refund' in step 'resolve' do not fit the tool: amount:" \
        in res.stderr
    doc = cli("show", run_id, "--json").json()
    assert doc["status"] == "paused" and doc["reviews"] == []
    assert refund_log.read_text() == "" and len(model.requests) == 2


def test_reject_returns_the_reason_to_the_model_as_the_tool_answer_and_the_run_goes_on(cli, model, refund_log):
    run_id = _paused(cli, model)
    model.respond(completion("A manager will look at your refund."))
    res = cli("reject", run_id, "--reason", "refunds over 30 need a manager", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["status"] == "succeeded"
    assert res.json()["output"] == "A manager will look at your refund."
    assert refund_log.read_text() == ""
    answer = _tool_answers(model.requests[-1])[-1]
    assert answer["tool_call_id"] == "c2"
    assert json.loads(answer["content"]) == {
        "error": "the reviewer rejected this call: refunds over 30 need a manager"}
    assert len(model.requests) == 3


def test_each_call_that_needs_approval_pauses_again(cli, model, refund_log):
    run_id = _paused(cli, model)
    model.respond(completion(None, tool_calls=[tool_call("c3", "refund", {"order_id": "42", "amount": 5})],
                             finish_reason="tool_calls"))
    res = cli("approve", run_id, "--json")
    assert res.exit_code == 3, res.stderr
    step = cli("show", run_id, "--json").json()["steps"][0]
    assert step["output"]["call_id"] == "c3"
    model.respond(completion("Refunded 40, then 5 more."))
    res = cli("approve", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    assert refund_log.read_text() == "42 40\n42 5\n"
    assert len(model.requests) == 4


def test_tool_choice_required_asks_for_a_call_on_every_turn_that_offers_tools(cli, fake_openai, monkeypatch,
                                                                             refund_log):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "refund", {"order_id": "42", "amount": 40})],
                                      finish_reason="tool_calls"))
    res = cli("run", str(FIXTURES / "tool_required.yaml"), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    fake_openai.respond(completion("Refunded."))
    assert cli("approve", res.json()["run_id"]).exit_code == 0
    first, last = fake_openai.requests
    assert first["tool_choice"] == "required" and [t["function"]["name"] for t in first["tools"]] == ["refund"]
    assert "tool_choice" not in last and "tools" not in last  # the last turn offers no tool: the answer
    assert refund_log.read_text() == "42 40\n"


def test_a_tool_call_nobody_decided_in_time_is_rejected_and_the_model_goes_on(cli, model, refund_log):
    model.respond(completion("Nobody approved the refund in time; a colleague will get back to you."))
    res = cli("run", str(FIXTURES / "tool_timeout.yaml"), "--input", TICKET, "--json")  # waits out the timeout
    assert res.exit_code == 0, res.stderr
    doc = cli("show", res.json()["run_id"], "--json").json()
    assert doc["status"] == "succeeded"
    assert doc["reviews"][0]["decision"] == "reject" and doc["reviews"][0]["reviewer"] == "review-timeout"
    assert json.loads(_tool_answers(model.requests[-1])[-1]["content"]) == {
        "error": "the reviewer rejected this call: no decision within 0.5 s"}
    assert refund_log.read_text() == "" and len(model.requests) == 3


def test_a_worker_rejects_a_tool_call_nobody_decided_in_time_and_the_run_goes_on(cli, model, refund_log, store):
    from orchestrator.engine.stored_workflow import load_run_workflow
    from orchestrator.service.review import apply_review_timeouts

    res = cli("run", str(FIXTURES / "tool_timeout.yaml"), "--input", TICKET, "--json", "--queue")
    assert res.exit_code == 0, res.stderr
    run_id = res.json()["run_id"]
    assert cli("worker", "--once", "--poll", "0.05").exit_code == 0
    assert store.get_run(run_id).status == "paused"
    spec = load_run_workflow(store, run_id)[0].spec
    [decision] = apply_review_timeouts(store, run_id, spec, now=time.time() + 60)  # as an idle worker does
    assert decision.decision == "reject" and decision.continue_run
    assert store.get_run(run_id).status == "queued"  # handed to any worker
    model.respond(completion("A colleague will get back to you."))
    assert cli("worker", "--once", "--poll", "0.05").exit_code == 0
    assert store.get_run(run_id).status == "succeeded"
    assert refund_log.read_text() == "" and len(model.requests) == 3


def test_the_python_twin_marks_the_same_tool_for_approval(cli, model, refund_log):
    from orchestrator import ToolRef, Workflow
    from orchestrator.bind.loader import load_workflow

    typed = Workflow("tool-approval", inputs={"ticket": {"type": "string"}}, output="resolve",
                     llm={"provider": "openai", "model": "gpt-4o-mini", "temperature": 0})
    typed.llm_step(id="resolve", system="You resolve support tickets with the tools you have.",
                   prompt="Ticket: {{ ticket }}",
                   tools=["support_tools:lookup_order", ToolRef(ref="support_tools:refund", approve=True)], max_turns=5)
    twin = FIXTURES / "tool_approval_py.py"
    assert load_workflow(twin).content_hash == load_workflow(FLOW).content_hash \
        == typed.bind(str(FLOW)).content_hash
    res = cli("run", str(twin), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["steps"][0]["output"]["tool"] == "refund" and refund_log.read_text() == ""


def test_calls_of_one_turn_are_answered_in_order_each_that_needs_approval_pausing(cli, fake_openai, monkeypatch,
                                                                                refund_log):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion(None, finish_reason="tool_calls", tool_calls=[
        tool_call("a", "refund", {"order_id": "42", "amount": 10}),
        tool_call("b", "lookup_order", {"order_id": "42"}),
        tool_call("c", "refund", {"order_id": "43", "amount": 5})]))
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3 and res.json()["steps"][0]["output"]["call_id"] == "a"
    run_id = res.json()["run_id"]
    res = cli("approve", run_id, "--json")  # a runs, b runs unasked, c waits
    assert res.exit_code == 3, res.stderr
    assert res.json()["steps"][0]["output"]["call_id"] == "c"
    assert refund_log.read_text() == "42 10\n"
    fake_openai.respond(completion("Done."))
    assert cli("reject", run_id, "--reason", "one refund is enough").exit_code == 0
    assert refund_log.read_text() == "42 10\n"
    assert len(fake_openai.requests) == 2  # one turn with three calls, one answer
    answers = _tool_answers(fake_openai.requests[-1])
    assert [m["tool_call_id"] for m in answers] == ["a", "b", "c"]
    assert json.loads(answers[1]["content"])["status"] == "delivered"
    assert json.loads(answers[2]["content"]) == {"error": "the reviewer rejected this call: one refund is enough"}


def test_each_instance_of_a_mapped_step_waits_for_its_own_approval(cli, fake_openai, monkeypatch, refund_log,
                                                                   tmp_path):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    for n, order in enumerate(["41", "42"]):
        fake_openai.respond(completion(None, finish_reason="tool_calls", tool_calls=[
            tool_call(f"c{n}", "refund", {"order_id": order, "amount": 10 + n})]))
    tickets = tmp_path / "inputs.json"
    tickets.write_text(json.dumps({"tickets": ["order 41 broken", "order 42 broken"]}))
    res = cli("run", str(FIXTURES / "tool_map.yaml"), "--input-file", str(tickets), "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["resolve[0]", "resolve[1]"]
    run_id = res.json()["run_id"]
    fake_openai.respond(completion("Refunded 42."))
    res = cli("approve", run_id, "--step", "resolve[1]", "--json")
    assert res.exit_code == 3 and res.json()["paused_steps"] == ["resolve[0]"]
    assert refund_log.read_text() == "42 11\n"
    fake_openai.respond(completion("Refunded 41."))
    res = cli("approve", run_id, "--step", "resolve[0]", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == ["Refunded 41.", "Refunded 42."]
    assert refund_log.read_text() == "42 11\n41 10\n"
    assert len(fake_openai.requests) == 4


def test_a_tool_call_inside_a_child_run_is_decided_from_the_parent(cli, model, refund_log):
    res = cli("run", str(FIXTURES / "tool_parent.yaml"), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["support > resolve"]
    model.respond(completion("Refunded 40 on order 42."))
    res = cli("approve", res.json()["run_id"], "--step", "support > resolve", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "Refunded 40 on order 42."
    assert refund_log.read_text() == "42 40\n" and len(model.requests) == 3


def test_the_progress_line_says_a_step_waits_for_the_approval_of_a_tool_call(cli, model: FakeOpenAI):
    res = cli("run", str(FLOW), "--input", TICKET)
    assert res.exit_code == 3, res.stderr
    [line] = [line for line in res.stderr.splitlines() if line.strip().startswith("resolve ")]
    assert line.split()[:2] == ["resolve", "waiting"] and "waiting for approval of a call of tool 'refund'" in line
