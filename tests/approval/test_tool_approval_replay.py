"""Replays of a run whose LLM step made an approved tool call never make that call again.

Nobody is there to approve anything in a replay, so a step with a tool marked ``approve: true`` is treated
like a side-effecting step: while its inputs are unchanged it reuses the recorded result (no model call, no
tool call); reached with changed inputs, or never finished in the original run, it blocks the replay,
which names it. The model is the scripted server on 127.0.0.1 (it counts every request); the refund tool
writes a line per real execution.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.attribution.counterfactual import counterfactual
from orchestrator.attribution.methods import fork_run
from tests.approval.conftest import TICKET
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "tool_attribution.yaml"
BLOCKED = ("blocked by resolve: step with a tool that needs approval (refund), reached with changed inputs: "
           "a replay never calls it")


@pytest.fixture
def model(scripted_model: FakeOpenAI) -> FakeOpenAI:
    return scripted_model


def _propose_refund(model: FakeOpenAI) -> None:
    model.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                             finish_reason="tool_calls"))
    model.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                             finish_reason="tool_calls"))


def _approved_run(cli, model: FakeOpenAI, refund_log: Path) -> str:
    _propose_refund(model)
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    model.respond(completion("Refunded 40 on order 42."))
    res = cli("approve", res.json()["run_id"], "--json")
    assert res.exit_code == 0, res.stderr
    assert refund_log.read_text() == "42 40\n" and len(model.requests) == 3
    # should a replay ask the model, it would call the refund again: scripted, so that it would show
    _propose_refund(model)
    model.respond(completion("Refunded 40 on order 42."))
    return res.json()["run_id"]


def _record(store, run_id: str, step_id: str):
    return [r for r in store.step_records(run_id) if r.step_id == step_id][-1]


def test_a_replay_with_unchanged_inputs_reuses_the_recorded_result_and_calls_nothing(cli, store, model,
                                                                                    refund_log):
    run_id = _approved_run(cli, model, refund_log)
    replay = fork_run(store, run_id, "summarize", "Order 42 arrived broken, please refund it")
    assert replay.status == "succeeded", replay.error
    assert replay.output == "Refunded 40 on order 42."
    resolve = _record(store, replay.run_id, "resolve")
    assert resolve.origin == "reused"
    assert refund_log.read_text() == "42 40\n"  # the approved refund ran once, in the run
    assert len(model.requests) == 3


def test_a_replay_that_reaches_the_step_with_changed_inputs_is_blocked_naming_it(cli, store, model, refund_log):
    run_id = _approved_run(cli, model, refund_log)
    replay = fork_run(store, run_id, "summarize", "Order 42 arrived broken, refund it twice")
    assert replay.status == "blocked"
    assert replay.blocked_by == "resolve" and replay.error == BLOCKED
    assert store.get_run(replay.run_id).error == BLOCKED
    assert _record(store, replay.run_id, "resolve").error_type == "ReplayBlocked"
    assert refund_log.read_text() == "42 40\n"
    assert len(model.requests) == 3  # the model was not asked either


def test_the_cli_replay_prints_the_blocker(cli, model, refund_log, tmp_path):
    run_id = _approved_run(cli, model, refund_log)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps("Order 42 arrived broken, refund it twice"))
    res = cli("replay", run_id, "--from", "summarize", "--output", str(changed))
    assert res.exit_code == 1
    assert BLOCKED in " ".join((res.stdout + res.stderr).split())
    assert refund_log.read_text() == "42 40\n" and len(model.requests) == 3


def test_counterfactual_attribution_never_calls_the_tool_and_names_the_blocker(cli, store, model, refund_log):
    run_id = _approved_run(cli, model, refund_log)
    result = counterfactual(store, run_id)
    assert refund_log.read_text() == "42 40\n"
    assert len(model.requests) == 3
    resolve = next(c for c in result.candidates if c.step_id == "resolve")
    assert resolve.evidence["side_effects"] is True  # re-asking its model could call the tool: its record stands
    assert result.evidence["blocked"] == [{"step_id": "resolve", "reason": BLOCKED.split(": ", 1)[1],
                                           "candidates": ["summarize"]}]  # the baseline summary changed its inputs
    summarize = next(c for c in result.candidates if c.step_id == "summarize")
    replay = store.get_run(summarize.evidence["replay_run_id"])
    assert replay.status == "failed" and replay.error == BLOCKED


def test_a_replay_of_a_run_paused_at_the_tool_call_is_blocked_naming_the_step(cli, store, model, refund_log):
    _propose_refund(model)
    res = cli("run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    replay = fork_run(store, res.json()["run_id"], "summarize", "Order 42 arrived broken, please refund it")
    assert replay.status == "blocked" and replay.blocked_by == "resolve"
    assert "never" in (replay.blocked_reason or "")
    assert refund_log.read_text() == "" and len(model.requests) == 2
