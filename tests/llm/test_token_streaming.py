"""Token streaming: an LLM step's answer reaches the program's listener piece by piece as it is generated.

Against the scripted OpenAI-compatible server, which answers a request with ``stream: true`` as
server-sent events: the pieces come in order between the step's start and its end, they make up the
stored answer, and the stored model call (text, tokens from the final usage chunk, cost, turns) is the
one a run without streaming stores. Structured output and tool calls are put back together from their
deltas and validated at the end; a listener that raises changes nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator
from orchestrator.llm import ChatRequest, ChatResponse, LLMConfig, run_llm
from orchestrator.spec.events import Event, RunFinished, StepFinished, StepStarted, Token
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

WORKFLOWS = Path(__file__).parent / "workflows"
ANSWER = "We refunded the duplicate charge on order 42."
TICKET = {"ticket": "I was charged twice for order 42"}


@pytest.fixture
def orch(db_url: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    with Orchestrator(db_url) as o:
        yield o


def stored_call(orch: Orchestrator, run_id: str, step_id: str) -> dict[str, Any]:
    """The step's stored model call, without what differs between any two calls (how long it took)."""
    [step] = [s for s in orch.get_run(run_id).steps if s.step_id == step_id]
    assert step.llm is not None
    llm = dict(step.llm)
    llm.pop("latency")
    for turn in llm["turns"]:  # (a tool turn has a duration)
        turn.pop("latency", None)
        turn.pop("duration", None)
    return llm


def texts(events: list[Event], step_id: str, call: int = 1) -> list[str]:
    return [e.text for e in events if isinstance(e, Token) and e.step_id == step_id and e.call == call]


def test_a_streamed_step_sends_its_answer_in_order_and_stores_what_a_step_without_streaming_stores(
        orch: Orchestrator, fake_openai: FakeOpenAI):
    fake_openai.respond(completion(ANSWER, prompt_tokens=40, completion_tokens=12))
    fake_openai.respond(completion(ANSWER, prompt_tokens=40, completion_tokens=12))
    events: list[Event] = []
    streamed = orch.run(WORKFLOWS / "streamed.yaml", TICKET, on_event=events.append)
    plain = orch.run(WORKFLOWS / "streamed.yaml", TICKET)  # nobody listens: nothing to stream to

    assert streamed.status == plain.status == "succeeded" and streamed.output == plain.output == ANSWER
    pieces = texts(events, "reply")
    assert len(pieces) > 1 and "".join(pieces) == ANSWER
    kinds = [type(e).__name__ for e in events if not isinstance(e, Token) or e.text == pieces[0]]
    assert kinds.index("StepStarted") < kinds.index("Token") < kinds.index("StepFinished")
    token = next(e for e in events if isinstance(e, Token))
    assert (token.run_id, token.unit, token.attempt) == (streamed.run_id, "reply", 1)
    # the same call stored either way: text, usage from the stream's final chunk, cost, turns
    assert stored_call(orch, streamed.run_id, "reply") == stored_call(orch, plain.run_id, "reply")
    assert stored_call(orch, streamed.run_id, "reply")["usage"] == {"input_tokens": 40, "output_tokens": 12}
    asked_streaming, asked_whole = fake_openai.requests
    assert asked_streaming["stream"] is True and asked_streaming["stream_options"] == {"include_usage": True}
    assert "stream" not in asked_whole


def test_usage_sent_on_the_finishing_chunk_is_stored(orch: Orchestrator, fake_openai: FakeOpenAI):
    head = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": "fake-model"}
    fake_openai.respond_stream([
        {**head, "choices": [{"index": 0, "delta": {"content": "Refunded"}, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {"content": " today."}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24}}])
    events: list[Event] = []
    run = orch.run(WORKFLOWS / "streamed.yaml", TICKET, on_event=events.append)
    assert run.output == "Refunded today." and texts(events, "reply") == ["Refunded", " today."]
    llm = stored_call(orch, run.run_id, "reply")
    assert llm["usage"] == {"input_tokens": 21, "output_tokens": 3} and llm["finish_reason"] == "stop"


def test_a_run_that_streams_tokens_streams_structured_output_and_tool_calls_and_validates_them(
        orch: Orchestrator, fake_openai: FakeOpenAI):
    category = json.dumps({"category": "billing", "confidence": 0.9})
    fake_openai.respond(completion(category, prompt_tokens=40, completion_tokens=9))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion(ANSWER, prompt_tokens=60, completion_tokens=12))
    events: list[Event] = []
    run = orch.run(WORKFLOWS / "triage.yaml", TICKET, on_event=events.append, tokens=True)

    assert run.status == "succeeded" and run.output == f"{ANSWER} -- support (billing)"
    classify, reply = run.steps
    assert classify.output == {"category": "billing", "confidence": 0.9}  # validated once the deltas were in
    assert "".join(texts(events, "classify")) == category
    # the tool call came as deltas of its arguments: put together, the tool ran with them
    llm = stored_call(orch, run.run_id, "reply")
    assert [t["kind"] for t in llm["turns"]] == ["model", "tool", "model"]
    assert llm["turns"][0]["tool_calls"] == [{"id": "c1", "name": "lookup_order", "arguments": '{"order_id": "42"}'}]
    assert json.loads(llm["turns"][1]["result"]) == {"order_id": "42", "status": "shipped"}
    assert texts(events, "reply", call=1) == []  # a call of a tool is no text
    assert "".join(texts(events, "reply", call=2)) == ANSWER == llm["response"]
    assert all(r["stream"] is True for r in fake_openai.requests) and len(fake_openai.requests) == 3


def test_without_a_stream_key_or_the_run_option_nothing_streams(orch: Orchestrator, fake_openai: FakeOpenAI):
    fake_openai.respond(completion(json.dumps({"category": "other", "confidence": 0.5})))
    fake_openai.respond(completion(ANSWER))
    events: list[Event] = []
    run = orch.run(WORKFLOWS / "triage.yaml", TICKET, on_event=events.append)
    assert run.status == "succeeded"
    assert not any(isinstance(e, Token) for e in events)
    assert not any("stream" in r for r in fake_openai.requests)


@pytest.mark.anyio
async def test_an_answer_asked_as_a_function_call_streams_its_arguments_and_validates(fake_openai: FakeOpenAI):
    schema = {"type": "object", "properties": {"category": {"type": "string"}}, "required": ["category"]}
    arguments = json.dumps({"category": "billing"})
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "final_answer", {"category": "billing"})],
                                   finish_reason="tool_calls", prompt_tokens=30, completion_tokens=6))
    pieces: list[tuple[int, str]] = []
    config = LLMConfig(provider="openai", base_url=fake_openai.base_url, model="m", structured_output="tools")
    outcome = await run_llm(config=config, prompt="Classify.", output_schema=schema,
                            on_token=lambda call, text: pieces.append((call, text)))
    assert outcome.output == {"category": "billing"}
    assert {call for call, _ in pieces} == {1} and len(pieces) > 1 and "".join(t for _, t in pieces) == arguments
    assert (outcome.record.usage.input_tokens, outcome.record.usage.output_tokens) == (30, 6)


def test_a_listener_that_raises_on_tokens_changes_nothing_stored(orch: Orchestrator, fake_openai: FakeOpenAI,
                                                                 caplog: pytest.LogCaptureFixture):
    fake_openai.respond(completion(ANSWER, prompt_tokens=40, completion_tokens=12))
    seen: list[Event] = []

    def breaks_on_tokens(event: Event) -> None:
        seen.append(event)
        if isinstance(event, Token):
            raise RuntimeError("the consumer broke")

    with caplog.at_level(logging.WARNING, logger="orchestrator.events"):
        run = orch.run(WORKFLOWS / "streamed.yaml", TICKET, on_event=breaks_on_tokens)
    assert run.status == "succeeded" and run.output == ANSWER
    assert stored_call(orch, run.run_id, "reply")["usage"] == {"input_tokens": 40, "output_tokens": 12}
    assert "".join(texts(seen, "reply")) == ANSWER  # it kept getting them
    assert isinstance(seen[-1], RunFinished) and any(isinstance(e, StepFinished) for e in seen)
    assert "the consumer broke" in caplog.text


def test_a_stream_with_tokens_yields_them_between_the_steps_start_and_end(orch: Orchestrator,
                                                                         fake_openai: FakeOpenAI):
    fake_openai.respond(completion(json.dumps({"category": "bug", "confidence": 0.7})))
    fake_openai.respond(completion(ANSWER))
    items = list(orch.stream(WORKFLOWS / "triage.yaml", TICKET, tokens=True))
    assert isinstance(items[-1], RunFinished) and items[-1].status == "succeeded"
    starts = [i for i, e in enumerate(items) if isinstance(e, StepStarted) and e.step_id == "reply"]
    ends = [i for i, e in enumerate(items) if isinstance(e, StepFinished) and e.step_id == "reply"]
    tokens = [i for i, e in enumerate(items) if isinstance(e, Token) and e.step_id == "reply"]
    assert starts[0] < tokens[0] and tokens[-1] < ends[0]
    assert "".join(texts(list(items), "reply")) == ANSWER


def test_run_stream_prints_each_answer_on_stdout_and_the_progress_on_stderr(cli, fake_openai: FakeOpenAI,
                                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    category = json.dumps({"category": "billing", "confidence": 0.9})
    fake_openai.respond(completion(category))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion(ANSWER))
    result = cli("run", str(WORKFLOWS / "triage.yaml"), "--input", f"ticket={TICKET['ticket']}", "--stream")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    # each answer under its unit (a later model call of the attempt says which), whole on its own lines
    assert lines[:4] == ["[classify]", category, "[reply call 2]", ANSWER]
    assert lines[4].startswith("run ") and "succeeded" in lines[4]
    assert ANSWER not in result.stderr and "classify" in result.stderr and "reply" in result.stderr
    assert all(r["stream"] is True for r in fake_openai.requests)


@pytest.mark.parametrize("clash", [["--json"], ["--queue"]])
def test_run_stream_refuses_what_leaves_it_nothing_to_print_on(cli, clash: list[str]):
    result = cli("run", str(WORKFLOWS / "triage.yaml"), "--input", "ticket=x", "--stream", *clash)
    assert result.exit_code == 2 and "--stream" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.anyio
async def test_a_provider_that_cannot_stream_hands_its_whole_answer_over_in_one_piece():
    class WholeAnswers:
        name = "whole"

        async def complete(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(text="All at once.", finish_reason="stop", input_tokens=5, output_tokens=3)

    pieces: list[tuple[int, str]] = []
    outcome = await run_llm(config=LLMConfig(), prompt="Hi.", provider=WholeAnswers(),
                            on_token=lambda call, text: pieces.append((call, text)))
    assert pieces == [(1, "All at once.")] and outcome.output == "All at once."
