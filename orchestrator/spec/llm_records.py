"""What is stored about every LLM call: the :class:`LLMRecord`.

Its keys are a public contract (the store, the TUI and exports read them), so they are plain
JSON-able pydantic models. One record covers one *attempt* of a step: every model call and
tool call of that attempt, including the re-asks after a schema failure.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Usage(BaseModel):
    """Tokens summed over all model calls of the attempt."""

    input_tokens: int = 0
    output_tokens: int = 0


class ToolCallInfo(BaseModel):
    """A tool call the model asked for; ``arguments`` is the JSON text it sent."""

    id: str
    name: str
    arguments: str


class ModelTurn(BaseModel):
    """One answer of the model."""

    kind: Literal["model"] = "model"
    response: str
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency: float = 0.0
    tool_calls: list[ToolCallInfo] = Field(default_factory=list)


class ToolTurn(BaseModel):
    """One tool run. ``result`` is JSON text; ``error`` is set instead when the tool raised."""

    kind: Literal["tool"] = "tool"
    name: str
    arguments: Any = None
    result: str | None = None
    error: str | None = None
    duration: float = 0.0


Turn = Annotated[ModelTurn | ToolTurn, Field(discriminator="kind")]


class LLMRecord(BaseModel):
    """Everything about one attempt of an LLM step, for the store, replays and the UI."""

    model_config = ConfigDict(extra="ignore")

    provider: str
    model: str
    messages: list[dict[str, Any]]
    """Exactly what was sent in the last request: rendered prompt, tool turns and re-asks."""
    response: str = ""
    """Raw text of the model's last answer."""
    usage: Usage = Field(default_factory=Usage)
    latency: float = 0.0
    """Seconds spent waiting for the model, summed over calls."""
    cost: float | None = None
    """USD from the price table; ``None`` when the model's price is unknown."""
    finish_reason: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    validation_errors: list[str] = Field(default_factory=list)
    """One entry per answer that failed the output schema (each led to a re-ask or the failure)."""
    injected_spans: list[tuple[int, int]] = Field(default_factory=list)
    """``[start, end)`` character ranges of the first user message that the orchestrator added."""
    cached: bool = False
    calls: int = 0
    """Real model calls made (0 when answered from the cache)."""
    cache_key: str | None = None
    """The :class:`~orchestrator.llm.cache.ResponseCache` key of the first request, so stored
    records can be preloaded into a cache for replays."""
    loop: dict[str, Any] | None = None
    """At a pause for a tool call's approval: the tool loop's state to continue from (``conversation``,
    ``pending`` calls, ``round``, ``turn``); None otherwise."""
