"""run_llm against a scripted OpenAI-compatible server on 127.0.0.1, through the real openai SDK."""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import pytest

from orchestrator.llm import LLMConfig, LLMError, LLMStepError, ResponseCache, run_llm
from orchestrator.llm.providers import openai_provider
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

pytestmark = pytest.mark.anyio

ANSWER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}},
                                 "required": ["answer"]}
NEEDS = [("publish", "writer", "a one-line summary", "the blog post")]


def config(server: FakeOpenAI, **overrides: Any) -> LLMConfig:
    return LLMConfig.model_validate({"provider": "openai", "model": "fake-model", "base_url": server.base_url,
                                     **overrides})


async def test_request_carries_rendered_messages_needs_and_schema(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion('{"answer": "short"}', prompt_tokens=40, completion_tokens=6))
    outcome = await run_llm(config=config(fake_openai), system="You are {{ role }}.",
                            prompt="Summarise: {{ text }}", variables={"text": "a long story", "role": "an editor"},
                            output_schema=ANSWER_SCHEMA, needs=NEEDS)
    assert outcome.output == {"answer": "short"}
    [sent] = fake_openai.requests
    assert sent["model"] == "fake-model"
    assert sent["temperature"] == 0 and sent["seed"] == 0
    assert sent["messages"][0] == {"role": "system", "content": "You are an editor."}
    user = sent["messages"][1]["content"]
    assert user.startswith("Summarise: a long story\n\n## What the next steps need\n")
    assert "- step 'publish' (writer): needs: a one-line summary; produces: the blog post" in user
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": ANSWER_SCHEMA, "strict": False}}
    record = outcome.record
    assert record.messages == sent["messages"]
    [(start, end)] = record.injected_spans
    assert user[start:end].startswith("## What the next steps need")
    assert record.usage.input_tokens == 40 and record.usage.output_tokens == 6
    assert record.calls == 1 and not record.cached
    assert record.response == '{"answer": "short"}' and record.finish_reason == "stop"
    assert [t.kind for t in record.turns] == ["model"]
    assert json.loads(record.model_dump_json())["usage"] == {"input_tokens": 40, "output_tokens": 6}


async def test_rate_limit_is_retried_honouring_retry_after(fake_openai: FakeOpenAI,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", recording_sleep)
    fake_openai.respond({"error": {"message": "slow down", "type": "rate_limit"}}, status=429,
                        headers={"Retry-After": "1"})
    fake_openai.respond(completion("hello"))
    outcome = await run_llm(config=config(fake_openai), prompt="Say hello")
    assert outcome.output == "hello"
    assert len(fake_openai.requests) == 2
    assert 1.0 in waits  # the server's Retry-After, not the backoff


async def test_server_errors_give_up_after_max_retries(fake_openai: FakeOpenAI) -> None:
    for _ in range(3):
        fake_openai.respond({"error": {"message": "overloaded"}}, status=503, headers={"Retry-After": "0"})
    with pytest.raises(LLMError) as err:
        await run_llm(config=config(fake_openai, max_retries=1), prompt="hi")
    assert len(fake_openai.requests) == 2
    assert "HTTP 503" in str(err.value) and "\n" not in str(err.value)


async def test_schema_failure_is_reasked_with_the_errors_then_fails_with_the_record(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion('{"wrong": 1}'))
    fake_openai.respond(completion("not json at all"))
    fake_openai.respond(completion('{"answer": 3}'))
    with pytest.raises(LLMStepError) as err:
        await run_llm(config=config(fake_openai), prompt="Answer", output_schema=ANSWER_SCHEMA, validation_retries=2)
    record = err.value.record
    assert len(fake_openai.requests) == 3 and record.calls == 3
    assert len(record.validation_errors) == 3
    assert "'answer' is a required property" in record.validation_errors[0]
    assert "not valid JSON" in record.validation_errors[1]
    assert "3 is not of type 'string'" in record.validation_errors[2]
    reask = fake_openai.requests[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": '{"wrong": 1}'}
    assert reask[-1]["role"] == "user" and "'answer' is a required property" in reask[-1]["content"]
    assert record.messages == fake_openai.requests[2]["messages"]
    assert record.response == '{"answer": 3}'
    assert "3 is not of type 'string'" in str(err.value)


async def test_a_reask_can_succeed(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion("```json\n{\"answer\": 1}\n```"))
    fake_openai.respond(completion("```json\n{\"answer\": \"one\"}\n```"))
    outcome = await run_llm(config=config(fake_openai), prompt="Answer", output_schema=ANSWER_SCHEMA)
    assert outcome.output == {"answer": "one"}
    assert outcome.record.calls == 2 and len(outcome.record.validation_errors) == 1


def add(a: int, b: int = 0) -> int:
    """Add two integers.

    Longer explanation that is not part of the description.
    """
    return a + b


async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


async def test_tool_loop_runs_tools_and_records_every_turn_in_order(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion(None, finish_reason="tool_calls", prompt_tokens=20, completion_tokens=8,
                                   tool_calls=[tool_call("c1", "add", {"a": 2, "b": "3"}),
                                               tool_call("c2", "explode", {"reason": "x"})]))
    fake_openai.respond(completion('{"answer": "5"}', prompt_tokens=30, completion_tokens=4))
    outcome = await run_llm(config=config(fake_openai), prompt="What is 2+3?", tools=[add, explode],
                            output_schema=ANSWER_SCHEMA)
    assert outcome.output == {"answer": "5"}
    first, second = fake_openai.requests
    add_tool = first["tools"][0]
    assert add_tool["type"] == "function"
    assert add_tool["function"]["name"] == "add"
    assert add_tool["function"]["description"] == "Add two integers."
    assert add_tool["function"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert add_tool["function"]["parameters"]["required"] == ["a"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages[0] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert "RuntimeError: boom: x" in tool_messages[1]["content"]
    record = outcome.record
    assert [t.kind for t in record.turns] == ["model", "tool", "tool", "model"]
    model_turn, add_turn, explode_turn, final_turn = record.turns
    assert model_turn.kind == "model" and [c.name for c in model_turn.tool_calls] == ["add", "explode"]
    assert add_turn.kind == "tool" and add_turn.name == "add" and add_turn.arguments == {"a": 2, "b": "3"}
    assert add_turn.result == "5" and add_turn.error is None
    assert explode_turn.kind == "tool" and explode_turn.error == "RuntimeError: boom: x" and explode_turn.result is None
    assert final_turn.kind == "model" and final_turn.response == '{"answer": "5"}'
    assert record.messages == second["messages"]
    assert record.usage.input_tokens == 50 and record.usage.output_tokens == 12 and record.calls == 2


async def test_last_turn_is_sent_without_tools(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion(None, finish_reason="tool_calls", tool_calls=[tool_call("c1", "add", {"a": 1})]))
    fake_openai.respond(completion("done"))
    outcome = await run_llm(config=config(fake_openai), prompt="add", tools=[add], max_turns=2)
    assert outcome.output == "done"
    assert "tools" in fake_openai.requests[0] and "tools" not in fake_openai.requests[1]


async def test_cost_comes_from_the_price_table_and_a_custom_price_file(fake_openai: FakeOpenAI, tmp_path: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("ORCHESTRATOR_LLM_PRICES", str(prices))
    fake_openai.respond(completion("x", prompt_tokens=1000, completion_tokens=500))
    fake_openai.respond(completion("x", prompt_tokens=1_000_000, completion_tokens=1_000_000))
    fake_openai.respond(completion("x"))
    house = await run_llm(config=config(fake_openai, model="house-model"), prompt="p")
    assert house.record.cost == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1_000_000)
    mini = await run_llm(config=config(fake_openai, model="gpt-4o-mini-2024-07-18"), prompt="p")
    assert mini.record.cost == pytest.approx(0.15 + 0.60)
    unknown = await run_llm(config=config(fake_openai, model="mystery"), prompt="p")
    assert unknown.record.cost is None


async def test_cache_answers_an_unchanged_request_without_calling_the_model(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion('{"answer": "a"}', prompt_tokens=9))
    fake_openai.respond(completion('{"answer": "b"}'))
    fake_openai.respond(completion('{"answer": "c"}'))
    cache = ResponseCache()
    kwargs: dict[str, Any] = {"config": config(fake_openai), "prompt": "Q: {{ q }}", "variables": {"q": "1"},
                              "output_schema": ANSWER_SCHEMA, "cache": cache}
    first = await run_llm(**kwargs)
    again = await run_llm(**kwargs)
    assert len(fake_openai.requests) == 1
    assert again.output == first.output == {"answer": "a"}
    assert again.record.cached and again.record.calls == 0 and again.record.usage.input_tokens == 0
    assert again.record.messages == first.record.messages and again.record.turns == first.record.turns
    # A replay: a new cache preloaded from the stored record (as JSON) answers too.
    replay = ResponseCache()
    assert replay.preload([json.loads(first.record.model_dump_json())]) == 1
    replayed = await run_llm(**{**kwargs, "cache": replay})
    assert replayed.record.cached and len(fake_openai.requests) == 1
    resampled = await run_llm(**{**kwargs, "cache": replay, "resample": True})
    assert resampled.output == {"answer": "b"} and not resampled.record.cached
    assert len(fake_openai.requests) == 2
    changed = await run_llm(**{**kwargs, "variables": {"q": "2"}})
    assert len(fake_openai.requests) == 3 and not changed.record.cached and changed.output == {"answer": "c"}


async def test_concurrency_is_capped_per_endpoint(fake_openai: FakeOpenAI) -> None:
    fake_openai.delay = 0.15
    for _ in range(3):
        fake_openai.respond(completion("ok"))
    cfg = config(fake_openai, max_concurrency=1)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(lambda: run_llm(config=cfg, prompt="hi"))
    assert len(fake_openai.requests) == 3
    assert fake_openai.max_in_flight == 1


async def test_unreachable_endpoint_is_one_clear_line() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    cfg = LLMConfig(provider="openai", model="some-model", base_url=base_url, max_retries=0, timeout=5)
    with pytest.raises(LLMError) as err:
        await run_llm(config=cfg, prompt="hi")
    message = str(err.value)
    assert "\n" not in message
    assert base_url in message and "'some-model'" in message and "cannot reach" in message
    assert err.value.__cause__ is None and err.value.__suppress_context__


async def test_unknown_model_is_one_clear_line(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond({"error": {"message": "The model `nope` does not exist", "type": "invalid_request_error"}},
                        status=404)
    with pytest.raises(LLMError) as err:
        await run_llm(config=config(fake_openai, model="nope"), prompt="hi")
    message = str(err.value)
    assert "\n" not in message and "'nope'" in message and fake_openai.base_url in message and "404" in message


async def test_rejected_key_names_the_variable(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "sk-wrong")
    fake_openai.respond({"error": {"message": "Incorrect API key"}}, status=401)
    with pytest.raises(LLMError, match=r"rejected the API key \(HTTP 401\): check \$TEAM_KEY"):
        await run_llm(config=config(fake_openai, api_key_env="TEAM_KEY"), prompt="hi")


async def test_missing_key_for_a_remote_endpoint_names_the_variable() -> None:
    cfg = LLMConfig(provider="openai", model="gpt-4o", base_url="https://llm.example.invalid/v1",
                    api_key_env="MY_LLM_KEY")
    with pytest.raises(LLMError, match="set the environment variable MY_LLM_KEY"):
        await run_llm(config=cfg, prompt="hi")


def test_a_local_endpoint_needs_no_key() -> None:
    assert openai_provider.resolve_api_key("http://localhost:11434/v1", "UNSET_VARIABLE_X") == "unused"
    assert openai_provider.is_local_url("http://127.0.0.1:8080/v1")
    assert not openai_provider.is_local_url("https://api.openai.com/v1")
