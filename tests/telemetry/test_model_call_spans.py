"""Every model call is a span of its own, with its real start and end, under the step or gate that made it.

The counted workflow (tests/llm/workflows/counted.yaml) calls the model from an LLM step, its judge
gate, a Python step through ``ctx.llm`` (twice), an LLM critic, and an async step whose judge fails;
the OTLP receiver the test starts gets what a backend such as Phoenix would.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.llm.fake_openai_server import completion
from tests.llm.test_model_call_accounting import SCRIPT

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")

if TYPE_CHECKING:
    from tests.telemetry.conftest import ReceivedSpan, Receiver

WORKFLOWS = Path(__file__).parents[1] / "llm" / "workflows"
SERVER_DELAY = 0.05
"""Seconds the scripted endpoint waits before each answer: every call lasts at least this long."""
KIND = "openinference.span.kind"


def run_counted(cli, fake_openai, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    fake_openai.delay = SERVER_DELAY
    for text, tokens_in, tokens_out in SCRIPT:
        fake_openai.respond(completion(text, prompt_tokens=tokens_in, completion_tokens=tokens_out))
    assert cli("run", str(WORKFLOWS / "counted.yaml"), "--input", "ticket=order 42 is broken").exit_code == 3


def parent_of(span: ReceivedSpan, receiver: Receiver) -> ReceivedSpan:
    (parent,) = [s for s in receiver.spans if s.span_id == span.parent_span_id]
    return parent


def test_one_span_per_model_call_with_its_real_times_under_its_step_or_gate(cli, fake_openai, receiver: Receiver,
                                                                             monkeypatch: pytest.MonkeyPatch):
    run_counted(cli, fake_openai, receiver, monkeypatch)
    chats = receiver.named("chat gpt-4o-mini")
    assert len(chats) == len(fake_openai.requests) == 7
    owners = []
    for chat in chats:
        assert chat.attributes[KIND] == "LLM"
        assert chat.end - chat.start >= SERVER_DELAY * 1e9   # the call's own duration, not emitted after the fact
        parent = parent_of(chat, receiver)
        assert parent.start <= chat.start and chat.end <= parent.end
        if parent.name.startswith("gate "):
            assert parent.attributes[KIND] == "EVALUATOR"
            step = parent_of(parent, receiver)
            owners.append((step.name, parent.name, chat.attributes["gen_ai.usage.input_tokens"]))
        else:
            owners.append((parent.name, None, chat.attributes["gen_ai.usage.input_tokens"]))
    assert sorted(owners, key=lambda o: o[2]) == [
        ("step draft", None, 101), ("step draft", "gate llm_judge", 102), ("step notes", None, 103),
        ("step notes", None, 104), ("step check", None, 105), ("step final", None, 106),
        ("step final", "gate llm_judge", 107)]
    failing = [g for g in receiver.named("gate llm_judge") if parent_of(g, receiver).name == "step final"]
    assert failing[0].attributes["orchestrator.gate_passed"] is False
    run = receiver.one("run llm-counted")
    assert run.attributes[KIND] == "CHAIN"
    assert receiver.one("step draft").attributes[KIND] == "AGENT"
    assert receiver.one("step check").attributes[KIND] == "EVALUATOR"   # a critic
    assert not any("gen_ai.input.messages" in c.attributes for c in chats)   # content is opt-in


def test_message_content_is_on_the_spans_only_when_asked_for(cli, fake_openai, receiver: Receiver,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    run_counted(cli, fake_openai, receiver, monkeypatch)
    draft = next(c for c in receiver.named("chat gpt-4o-mini") if c.attributes["gen_ai.usage.input_tokens"] == 101)
    assert "Reply to: order 42 is broken" in draft.attributes["gen_ai.input.messages"]
    assert draft.attributes["output.value"] == SCRIPT[0][0]
