"""The provider protocol and its request/response types.

Everything above this layer (tool loop, validation re-asks, caching, records) is written once
against :class:`ChatProvider`; a backend only has to turn one :class:`ChatRequest` into one
:class:`ChatResponse`. Messages use the OpenAI chat format because every backend speaks it
or can be adapted to it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from orchestrator.spec.llm_records import ToolCallInfo


class ChatRequest(BaseModel):
    """One model call."""

    messages: list[dict[str, Any]]
    model: str
    temperature: float = 0
    max_tokens: int | None = None
    seed: int | None = 0
    response_format: dict[str, Any] | None = None
    """The JSON Schema the answer must match, or ``None`` for free text."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI-style function tool schemas (``{"type": "function", "function": {...}}``)."""
    tool_choice: str = "auto"
    """``required``: the answer must be a call of one of ``tools`` (``LLMConfig.tool_choice``)."""
    timeout: float = 60
    """Seconds for one HTTP request (ignored in-process)."""
    max_retries: int = 4
    """Retries of transient errors (ignored in-process)."""
    structured_output: str = "auto"
    """How ``response_format`` is asked of an HTTP server (``LLMConfig.structured_output``; ignored in-process)."""
    extra_body: dict[str, Any] | None = None
    headers: dict[str, str] | None = None

    def cache_fields(self) -> dict[str, Any]:
        """What determines the answer (not how long we wait for it): the cache key's input."""
        return self.model_dump(include={"messages", "model", "temperature", "max_tokens", "seed", "response_format",
                                        "tools"} | ({"tool_choice"} if self.tool_choice != "auto" else set()))


class ChatResponse(BaseModel):
    """One model answer."""

    text: str = ""
    tool_calls: list[ToolCallInfo] = Field(default_factory=list)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    """The model name the backend reports (may be more specific than the one asked for)."""


@runtime_checkable
class ChatProvider(Protocol):
    """A chat-completion backend."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer one request; raise :class:`~orchestrator.spec.llm_errors.LLMError` for anything a user must fix."""
        ...


TextSink = Callable[[str], None]
"""Receives each piece of an answer's text as it arrives, on the event loop that asked."""


@runtime_checkable
class StreamingProvider(Protocol):
    """A backend that can hand out an answer's text while it is generated (``stream: true``)."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResponse:
        ...

    async def stream(self, request: ChatRequest, on_text: TextSink) -> ChatResponse:
        """Answer ``request`` exactly as :meth:`complete` does (same text, tool calls, finish reason and token
        counts), calling ``on_text`` with each piece of the answer's text in order as it arrives. The pieces
        concatenated are the response's ``text``; an answer that arrives wrapped (a tool protocol) may come
        as one piece once it is unwrapped."""
        ...


async def answer(provider: ChatProvider, request: ChatRequest, on_text: TextSink | None) -> ChatResponse:
    """One answer: streamed to ``on_text`` when it is given, else in one piece. A provider that cannot stream
    answers as usual and its text is handed to ``on_text`` whole, so a listener still sees every answer."""
    if on_text is None:
        return await provider.complete(request)
    if isinstance(provider, StreamingProvider):
        return await provider.stream(request, on_text)
    response = await provider.complete(request)
    if response.text:
        on_text(response.text)
    return response


@runtime_checkable
class ConnectingProvider(Protocol):
    """A backend with set-up of its own before a request can be sent (its SDK's imports, a client, a model
    loaded): :meth:`connect` does it, and the calls of one attempt go through the connection it yields. A
    model call is timed from the request sent to its answer, so its ``latency`` and its span hold the request
    alone, not the 1-3 s of the first call's imports."""

    name: str

    def connect(self) -> AbstractAsyncContextManager[ChatProvider]:
        """Set up (off the event loop where it blocks), and yield what answers the attempt's requests."""
        ...


def connection(provider: ChatProvider) -> AbstractAsyncContextManager[ChatProvider]:
    """``provider.connect()`` for a provider with set-up of its own; else the provider itself, as it is."""
    if isinstance(provider, ConnectingProvider):
        return provider.connect()
    return nullcontext(provider)
