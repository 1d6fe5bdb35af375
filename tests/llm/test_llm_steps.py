"""LLM steps in a workflow, end to end through the CLI, against an OpenAI-compatible server the test starts.

The workflow (tests/llm/workflows/triage.yaml) classifies a ticket with structured output, then
writes a reply with a tool loop; each attempt's prompt, response, tokens and cost are stored on
its step record and shown by ``show --json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

WORKFLOWS = Path(__file__).parent / "workflows"


def run_triage(cli, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    return cli("run", str(WORKFLOWS / "triage.yaml"), "--input", "ticket=I was charged twice for order 42",
               "--json", *args)


def test_an_llm_workflow_runs_and_records_every_prompt_response_and_token(cli, fake_openai, monkeypatch):
    fake_openai.respond(completion(json.dumps({"category": "billing", "confidence": 0.9}), prompt_tokens=40,
                                   completion_tokens=9))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion("We refunded the duplicate charge on order 42.", prompt_tokens=60,
                                   completion_tokens=12))
    result = run_triage(cli, fake_openai, monkeypatch)
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["output"] == "We refunded the duplicate charge on order 42. -- support (billing)"
    classify, reply = doc["steps"]
    llm = classify["llm"]
    assert {"provider", "model", "messages", "response", "usage", "latency", "cost", "finish_reason",
            "turns"} <= set(llm)
    assert (llm["provider"], llm["model"]) == ("openai", "gpt-4o-mini")
    assert llm["usage"] == {"input_tokens": 40, "output_tokens": 9}
    assert llm["cost"] is not None and llm["cost"] > 0
    user = llm["messages"][-1]["content"]
    assert "I was charged twice for order 42" in user
    # next-step context injection: the consumer's needs end the prompt
    assert "the ticket's category, one of billing, bug or other" in user
    assert [t["kind"] for t in reply["llm"]["turns"]] == ["model", "tool", "model"]
    assert json.loads(reply["llm"]["turns"][1]["result"]) == {"order_id": "42", "status": "shipped"}
    assert doc["llm"]["input_tokens"] == 40 + 11 + 60 and doc["llm"]["calls"] == 3
    listed = cli("runs", "--json").json()
    assert [(r["run_id"], r["llm"]["input_tokens"], r["llm"]["calls"]) for r in listed] == [
        (doc["run_id"], 111, 3)]
    stats = {s["step_id"]: s for s in cli("stats", "--workflow", "llm-triage", "--json").json()["steps"]}
    assert (stats["classify"]["model_calls"], stats["classify"]["input_tokens"]) == (1, 40)
    assert (stats["reply"]["model_calls"], stats["reply"]["input_tokens"]) == (2, 71)
    assert stats["reply"]["cost"] > 0
    # the request the SDK sent carried the rendered messages and the JSON-schema response format
    first = fake_openai.requests[0]
    assert first["messages"][0] == {"role": "system", "content": "You route support tickets."}
    assert first["response_format"]["type"] == "json_schema"
    assert set(first["response_format"]["json_schema"]["schema"]["properties"]) == {"category", "confidence"}


def test_a_failing_gate_pauses_and_a_retry_tells_the_model_which_check_failed(cli, fake_openai, monkeypatch):
    fake_openai.respond(completion(json.dumps({"category": "refund", "confidence": 0.5})))
    result = run_triage(cli, fake_openai, monkeypatch)
    assert result.exit_code == 3
    run_id = result.json()["run_id"]
    fake_openai.respond(completion(json.dumps({"category": "billing", "confidence": 0.8})))
    fake_openai.respond(completion("Refunded."))
    retried = cli("retry", run_id, "--json")
    assert retried.exit_code == 0, retried.stderr
    prompt = fake_openai.requests[1]["messages"][-1]["content"]
    assert "## Your previous answer failed these checks" in prompt and "one_of" in prompt


@pytest.mark.slow
def test_an_unreachable_endpoint_fails_the_step_with_one_line(cli, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    result = cli("run", str(WORKFLOWS / "triage.yaml"), "--input", "ticket=x", "--json")
    assert result.exit_code == 1
    error = result.json()["steps"][0]["error"]
    assert "127.0.0.1:9" in error and "\n" not in error


def test_an_unknown_template_name_is_a_validation_error_with_step_and_line(cli):
    result = cli("validate", str(WORKFLOWS / "bad_template.yaml"), db=False)
    assert result.exit_code == 2
    assert "bad_template.yaml:10:" in result.stderr
    assert "step 'classify' prompt" in result.stderr and "'tiket'" in result.stderr


def test_a_replay_whose_prompts_are_unchanged_reuses_the_recorded_answers(cli, fake_openai, monkeypatch):
    fake_openai.respond(completion(json.dumps({"category": "billing", "confidence": 0.9})))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion("Refunded."))
    original = run_triage(cli, fake_openai, monkeypatch).json()
    asked = len(fake_openai.requests)
    fork = cli("replay", original["run_id"], "--from", "classify", "--json")
    assert fork.exit_code == 0, fork.stderr
    doc = fork.json()
    assert doc["output"] == original["output"]
    assert len(fake_openai.requests) == asked  # both steps ran again, and neither asked the model
    assert [s["llm"]["cached"] for s in doc["steps"]] == [True, True]
    assert [s["llm"]["calls"] for s in doc["steps"]] == [0, 0]
