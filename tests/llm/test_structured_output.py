"""Structured output on every OpenAI-compatible server: the ``structured_output`` modes, ``auto``'s
fallback, ``extra_body`` and ``headers``, and requests a server calls invalid failing at once.

Against llama-cpp-python's real server (started by the test on 127.0.0.1 with the embedded
SmolLM2 GGUF), which refuses ``response_format: json_schema`` with HTTP 500; and against the
scripted endpoint for what only a recorded request shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.llm.call import run_llm
from orchestrator.llm.registry import reset_providers
from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.llm_errors import LLMError, LLMStepError
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call
from tests.llm.llama_server import LlamaServer

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
QUESTION = "What is the capital of France?"

pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("llama_server")]
"""One worker runs the module: the server (module-scoped) loads its model once, where spread over several
workers each would start a server of its own and load the model again beside the other."""


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def config(base_url: str, mode: str, **extra: object) -> LLMConfig:
    return LLMConfig.model_validate({"provider": "openai", "base_url": base_url, "model": "smollm2",
                                     "structured_output": mode, "max_tokens": 60, **extra})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["json_object", "tools"])
async def test_a_mode_the_server_supports_gives_validated_output(llama: LlamaServer, mode: str) -> None:
    before = len(llama.statuses())
    outcome = await run_llm(config=config(llama.base_url, mode), prompt=QUESTION, output_schema=CITY,
                            inject_needs=False)
    assert isinstance(outcome.output, dict) and isinstance(outcome.output["city"], str)
    answered = llama.statuses()[before:]
    assert answered == [200] * outcome.record.calls and answered   # a re-ask, if any, is one more request


@pytest.mark.slow
async def test_json_schema_on_a_server_that_refuses_it_fails_at_once_with_the_servers_message(
        llama: LlamaServer) -> None:
    before = len(llama.statuses())
    with pytest.raises(LLMError, match="Input should be 'text' or 'json_object'"):
        await run_llm(config=config(llama.base_url, "json_schema"), prompt=QUESTION, output_schema=CITY,
                      inject_needs=False)
    assert llama.statuses()[before:] == [500]   # not retried as if it were transient


@pytest.mark.slow
async def test_the_prompt_mode_sends_no_response_format_and_the_server_answers(llama: LlamaServer) -> None:
    before = len(llama.statuses())
    try:
        outcome = await run_llm(config=config(llama.base_url, "prompt"), prompt=QUESTION, output_schema=CITY,
                                inject_needs=False, validation_retries=0)
        assert isinstance(outcome.output["city"], str)
    except LLMStepError as exc:  # a 135M model may not follow the instruction; the server took the request
        assert exc.record.validation_errors and exc.record.calls == 1
    assert llama.statuses()[before:] == [200]


@pytest.mark.slow
async def test_auto_falls_back_from_json_schema_and_remembers_what_the_endpoint_accepts(llama: LlamaServer) -> None:
    reset_providers()   # what an endpoint accepts is remembered per process: start from nothing known
    before = len(llama.statuses())
    first = await run_llm(config=config(llama.base_url, "auto"), prompt=QUESTION, output_schema=CITY,
                          inject_needs=False, validation_retries=0)
    assert isinstance(first.output["city"], str)
    assert llama.statuses()[before:] == [500, 200]   # json_schema refused once, json_object answered
    second = await run_llm(config=config(llama.base_url, "auto"), prompt="And of Italy?", output_schema=CITY,
                           inject_needs=False, validation_retries=0)
    assert isinstance(second.output["city"], str)
    assert llama.statuses()[before + 2:] == [200]   # straight to the format it accepted


@pytest.mark.slow
def test_an_llm_judge_workflow_runs_on_the_server_in_auto_mode(llama: LlamaServer, cli, tmp_path: Path) -> None:
    workflow = tmp_path / "judged.yaml"
    workflow.write_text(f"""
name: judged-on-llama
llm: {{provider: openai, base_url: "{llama.base_url}", model: smollm2, max_tokens: 60}}
steps:
  - id: answer
    type: llm
    prompt: "What is the capital of France?"
    gates:
      - {{gate: llm_judge, rubric: "names a city", threshold: 0.0}}
""")
    result = cli("run", str(workflow), "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    (gate,) = doc["steps"][0]["gates"]
    assert gate["passed"] and gate.get("error") is None and 0 <= gate["score"] <= 1
    assert doc["llm"]["by_purpose"]["judge"]["calls"] == 1


async def test_extra_body_and_headers_reach_the_server(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion('{"city": "Paris"}'))
    cfg = config(fake_openai.base_url, "json_schema", extra_body={"top_k": 1, "cache_prompt": True},
                 headers={"X-Tenant": "acme"})
    await run_llm(config=cfg, prompt=QUESTION, output_schema=CITY, inject_needs=False)
    (body,) = fake_openai.requests
    assert (body["top_k"], body["cache_prompt"]) == (1, True)
    assert fake_openai.request_headers[0]["x-tenant"] == "acme"


async def test_each_mode_asks_for_the_schema_its_own_way(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion('{"city": "Paris"}'))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "final_answer", {"city": "Paris"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion('{"city": "Paris"}'))
    outputs = [(await run_llm(config=config(fake_openai.base_url, mode), prompt=QUESTION, output_schema=CITY,
                              inject_needs=False)).output for mode in ("json_object", "tools", "prompt")]
    assert outputs == [{"city": "Paris"}] * 3
    as_object, as_tool, as_prompt = fake_openai.requests
    assert as_object["response_format"] == {"type": "json_object", "schema": CITY}
    assert json.dumps(CITY, separators=(",", ":")) in as_object["messages"][-1]["content"]
    assert as_tool["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert as_tool["tools"][0]["function"]["parameters"] == CITY and "response_format" not in as_tool
    assert "response_format" not in as_prompt and "JSON Schema" in as_prompt["messages"][-1]["content"]


async def test_a_request_the_server_calls_invalid_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond({"error": {"message": "max_tokens is too large for this model", "type": "invalid_request"}},
                        status=400)
    with pytest.raises(LLMError, match="HTTP 400.*max_tokens is too large for this model"):
        await run_llm(config=config(fake_openai.base_url, "auto"), prompt=QUESTION, inject_needs=False)
    assert len(fake_openai.requests) == 1
