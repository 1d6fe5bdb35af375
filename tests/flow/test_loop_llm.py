"""An LLM step in a loop, against a scripted OpenAI-compatible server: each iteration is its own model call,
whose prompt sees `iteration` and `previous` (the iteration before's answer); a retried loop's first new
iteration is told which check failed, with the reviewer's comment and the answer it is about."""

from __future__ import annotations

import json

import pytest

from orchestrator.llm.registry import reset_providers
from tests.flow.conftest import FLOW
from tests.llm.fake_openai_server import completion


@pytest.fixture(autouse=True)
def _endpoint(fake_openai, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ORCHESTRATOR_LLM_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    reset_providers()
    yield
    reset_providers()


def _answer(fake_openai, draft: str, passed: bool) -> None:
    fake_openai.respond(completion(json.dumps({"draft": draft, "passed": passed})))


def _prompt(request) -> str:
    return request["messages"][-1]["content"]


def test_each_iteration_asks_the_model_with_its_number_and_the_previous_answer(cli, fake_openai):
    _answer(fake_openai, "Owls fly.", False)
    _answer(fake_openai, "Owls fly silently at night.", True)
    res = cli("run", str(FLOW / "loop_llm.yaml"), "--input", "topic=owls", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == {"draft": "Owls fly silently at night.", "passed": True}
    first, second = (_prompt(r) for r in fake_openai.requests)
    assert first.startswith("Iteration 1: write one sentence about owls.") and "Improve this draft" not in first
    assert second.startswith("Iteration 2:") and "Improve this draft: Owls fly." in second
    steps = {s["unit"]: s for s in doc["steps"]}
    assert [steps[u]["llm"]["response"] for u in ("improve#1", "improve#2")] == [
        json.dumps({"draft": "Owls fly.", "passed": False}),
        json.dumps({"draft": "Owls fly silently at night.", "passed": True})]
    assert [c["step_id"] for c in doc["model_calls"]] == ["improve", "improve"]
    assert doc["llm"]["calls"] == 2


def test_a_retried_loop_tells_the_model_why_with_the_reviewers_comment(cli, fake_openai):
    _answer(fake_openai, "Owls.", False)
    _answer(fake_openai, "Owls fly.", False)
    paused = cli("run", str(FLOW / "loop_llm.yaml"), "--input", "topic=owls", "--json")
    assert paused.exit_code == 3, paused.stderr
    assert paused.json()["paused_steps"] == ["improve"]
    _answer(fake_openai, "Owls hunt at night.", True)
    retried = cli("retry", paused.json()["run_id"], "--comment", "say what owls do at night", "--json")
    assert retried.exit_code == 0, retried.stderr
    assert retried.json()["output"]["draft"] == "Owls hunt at night."
    third = _prompt(fake_openai.requests[2])
    assert third.startswith("Iteration 3:") and "Improve this draft: Owls fly." in third
    assert "## Your previous answer failed these checks" in third
    assert "- repeat: until output.passed still false after 2 iterations" in third
    assert "- reviewer: say what owls do at night" in third
    assert 'Your previous answer was:\n{"draft": "Owls fly.", "passed": false}' in third
