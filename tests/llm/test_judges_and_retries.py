"""Judges, gates and retries, end to end against the scripted OpenAI-compatible endpoint.

- an ``async def`` gate calls the model through ``ctx.llm`` on the event loop (no ``slow`` flag);
- a judge that never answers validly is a gate *error*: shown as such, never fed back to the model,
  and a retry policy does not spend another answer on it;
- a retry shows the model its previous answer beside the feedback, and a reviewer's ``retry
  --comment`` reaches the model as feedback;
- an LLM step whose answers never fit its schema pauses under ``on_gate_fail`` so a person can edit it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.llm.fake_openai_server import completion

WORKFLOWS = Path(__file__).parent / "workflows"


def user_prompt(request: dict) -> str:
    return request["messages"][-1]["content"]


def test_a_retry_shows_the_previous_answer_and_an_async_gate_asks_the_model(cli, fake_openai, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion("gamma"))   # write: fails one_of
    fake_openai.respond(completion("alpha"))   # write, retried
    fake_openai.respond(completion("yes"))     # review's async gate, through ctx.llm
    result = cli("run", str(WORKFLOWS / "judged.yaml"), "--input", "topic=greek letters", "--json")
    assert result.exit_code == 0, result.stderr
    retry_prompt = user_prompt(fake_openai.requests[1])
    assert "## Your previous answer failed these checks" in retry_prompt
    assert "Your previous answer was:\ngamma" in retry_prompt
    assert "Is 'alpha' a fine answer?" in user_prompt(fake_openai.requests[2])
    doc = result.json()
    review = doc["steps"][1]
    assert [(g["gate"], g["passed"], g.get("error")) for g in review["gates"]] == [
        ("judged_tools:AskTheModel", True, None)]
    assert [(c["purpose"], c["step_id"], c["gate"]) for c in doc["model_calls"]] == [
        ("step", "write", None), ("step", "write", None), ("judge", "review", "judged_tools:AskTheModel")]


def test_a_reviewers_retry_comment_reaches_the_model_with_its_previous_answer(cli, fake_openai, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion("gamma"))
    fake_openai.respond(completion("delta"))   # the retry policy's last attempt fails too: paused
    paused = cli("run", str(WORKFLOWS / "judged.yaml"), "--input", "topic=greek letters", "--json")
    assert paused.exit_code == 3, paused.stderr
    fake_openai.respond(completion("beta"))
    fake_openai.respond(completion("yes"))
    retried = cli("retry", paused.json()["run_id"], "--comment", "pick one of the first two letters", "--json")
    assert retried.exit_code == 0, retried.stderr
    prompt = user_prompt(fake_openai.requests[2])
    assert "- reviewer: pick one of the first two letters" in prompt
    assert "- one_of:" in prompt
    assert "Your previous answer was:\ndelta" in prompt


def test_a_judge_that_never_answers_validly_is_a_gate_error_not_the_answers_fault(cli, fake_openai, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion("Athens is the capital of Greece."))
    for _ in range(3):
        fake_openai.respond(completion("I think it is pretty good!"))   # never the verdict's JSON
    result = cli("run", str(WORKFLOWS / "broken_judge.yaml"), "--input", "topic=Greece", "--json")
    assert result.exit_code == 3, result.stderr   # paused for a person: another answer cannot mend the judge
    assert len(fake_openai.requests) == 4          # the step was not asked again under its retry policy
    (gate,) = result.json()["steps"][0]["gates"]
    assert (gate["gate"], gate["passed"], gate["error"]) == ("llm_judge", False, True)
    assert "LLMStepError" in gate["reason"]
    shown = cli("show", result.json()["run_id"]).stdout
    assert "error" in shown and "llm_judge" in shown
    fake_openai.respond(completion("Athens is in Greece."))
    fake_openai.respond(completion(json.dumps({"score": 0.9, "reason": "on topic"})))
    retried = cli("retry", result.json()["run_id"], "--json")
    assert retried.exit_code == 0, retried.stderr
    assert "failed these checks" not in user_prompt(fake_openai.requests[4])   # no judge error fed back


def test_an_answer_that_never_fits_the_schema_pauses_for_an_edit(cli, fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.respond(completion('{"category": "billing"}'))
    fake_openai.respond(completion("not json at all"))
    paused = cli("run", str(WORKFLOWS / "triage.yaml"), "--input", "ticket=I was charged twice", "--json")
    assert paused.exit_code == 3, paused.stderr
    classify = paused.json()["steps"][0]
    assert classify["status"] == "gate_failed"
    (gate,) = classify["gates"]
    assert gate["gate"] == "output_schema" and not gate["passed"]
    assert "did not match the output schema after 2 answers" in gate["reason"]
    assert classify["output"] == "not json at all"
    assert len(classify["llm"]["validation_errors"]) == 2
    assert "confidence" in user_prompt(fake_openai.requests[1])  # the re-ask named the error
    assert len(fake_openai.requests) == 2  # the step's retry policy did not ask again on top of the re-asks
    edited = tmp_path / "fixed.json"
    edited.write_text(json.dumps({"category": "billing", "confidence": 1.0}))
    fake_openai.respond(completion("Refunded."))
    done = cli("edit", paused.json()["run_id"], "--output", str(edited), "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["output"] == "Refunded. -- support (billing)"
