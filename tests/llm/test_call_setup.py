"""A model call costs what its request costs: the provider's set-up (its SDK's imports, a client) is made before
the call is timed, so the record's ``latency`` and the call's span (its start and end) hold the request alone; and
a prompt template is compiled once, however many calls render it. Against the scripted OpenAI-compatible
server, through the real SDK."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from orchestrator.llm import LLMConfig, run_llm
from orchestrator.llm.providers.openai_provider import OpenAIConnection, OpenAIProvider
from orchestrator.spec.context import CallLog
from orchestrator.spec.templates import compiled
from tests.llm.fake_openai_server import FakeOpenAI, completion

pytestmark = pytest.mark.anyio

SETUP_SECONDS = 0.5
"""How long the slow provider takes to set up; the scripted server answers at once."""


class SlowToSetUp(OpenAIProvider):
    """An OpenAI provider whose set-up takes SETUP_SECONDS (as a first call's SDK imports take 1-3 s)."""

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[OpenAIConnection]:
        await anyio.sleep(SETUP_SECONDS)
        async with super().connect() as connection:
            yield connection


def config(server: FakeOpenAI, **overrides: Any) -> LLMConfig:
    return LLMConfig.model_validate({"provider": "openai", "model": "fake-model", "base_url": server.base_url,
                                     **overrides})


async def test_the_recorded_latency_and_call_span_leave_out_the_providers_set_up(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion("fine"))
    log = CallLog()
    outcome = await run_llm(config=config(fake_openai), prompt="Say {{ word }}.", variables={"word": "fine"},
                            provider=SlowToSetUp(base_url=fake_openai.base_url), log=log)
    assert outcome.output == "fine" and len(fake_openai.requests) == 1
    assert outcome.record.latency < SETUP_SECONDS
    [call] = log.calls
    assert call.ended_at - call.started_at < SETUP_SECONDS


async def test_the_calls_of_one_attempt_share_one_set_up(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(completion("not json"))
    fake_openai.respond(completion('{"answer": "yes"}'))
    connections = 0

    class Counting(OpenAIProvider):
        @asynccontextmanager
        async def connect(self) -> AsyncIterator[OpenAIConnection]:
            nonlocal connections
            connections += 1
            async with super().connect() as connection:
                yield connection

    outcome = await run_llm(config=config(fake_openai), prompt="Answer.", provider=Counting(
        base_url=fake_openai.base_url), output_schema={"type": "object", "required": ["answer"]})
    assert outcome.output == {"answer": "yes"} and outcome.record.calls == 2
    assert connections == 1


async def test_a_prompt_template_is_compiled_once_for_all_the_calls_that_render_it(fake_openai: FakeOpenAI) -> None:
    marker = secrets.token_hex(8)  # templates no other test compiled
    system, prompt = f"You review tickets ({marker}).", f"Classify {{{{ ticket }}}} ({marker})."
    before = compiled.cache_info().misses
    for i in range(5):
        fake_openai.respond(completion(f"label {i}"))
        outcome = await run_llm(config=config(fake_openai), system=system, prompt=prompt,
                                variables={"ticket": f"ticket {i}"})
        assert outcome.output == f"label {i}"
    assert compiled.cache_info().misses - before == 2  # the system template and the prompt, once each
    assert [r["messages"][1]["content"] for r in fake_openai.requests] == [
        f"Classify ticket {i} ({marker})." for i in range(5)]
