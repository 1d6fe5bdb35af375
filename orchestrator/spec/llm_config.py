"""Which model a step talks to and how.

A workflow-level ``llm:`` block gives defaults and each step may override any key; that is
:func:`merge`. Only the *name* of the API key variable is configured, never the key itself,
so workflow files and stored records can never leak it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.spec.validation import no_boolean

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

DEFAULT_MAX_TOKENS = {"local": 512, "openai": 4096}
"""The most tokens one model answer may hold when ``max_tokens`` is not set, by provider. The embedded model's
context holds 2 048 tokens, prompt and answer together, and it generates a few tokens a second on a CPU,
so an unbounded answer could run for minutes; an endpoint's own limit may be higher than 4 096, which a
workflow raises with ``max_tokens``."""

StructuredOutputMode = Literal["auto", "json_schema", "json_object", "tools", "prompt"]


class LLMConfig(BaseModel):
    """Settings of one LLM call site (a step, a judge gate or a critic)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["local", "openai"] = "local"
    """``local`` runs a GGUF model in-process (llama.cpp); ``openai`` is any OpenAI-compatible HTTP API."""
    model: str = "smollm2"
    base_url: str | None = None
    """OpenAI provider only. Unset: ``$ORCHESTRATOR_LLM_BASE_URL``, then ``$OPENAI_BASE_URL``, then OpenAI's."""
    api_key_env: str = "OPENAI_API_KEY"
    """The NAME of the environment variable holding the key."""
    temperature: float = Field(default=0, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    """The most tokens one answer may hold; unset: the provider's default (:data:`DEFAULT_MAX_TOKENS`)."""
    seed: int | None = Field(default=0, strict=True)
    max_concurrency: int = Field(default=4, ge=1, strict=True)
    """Cap on concurrent requests to one provider endpoint (shared by every step using it)."""
    timeout: float = Field(default=60, gt=0)
    """Seconds for one HTTP request."""
    max_retries: int = Field(default=4, ge=0, strict=True)
    """Retries of transient errors (429, 5xx, timeouts, connection errors)."""
    structured_output: StructuredOutputMode = "auto"
    """How an ``output_schema`` is asked of an OpenAI-compatible server: ``json_schema`` (response_format
    json_schema), ``json_object`` (response_format json_object with the schema, and the schema in the
    prompt), ``tools`` (a forced call of one function whose parameters are the schema), ``prompt`` (the
    schema in the prompt only), or ``auto``: json_schema, falling back in that order when the server
    refuses a format, remembered per endpoint and model."""
    tool_choice: Literal["auto", "required"] = "auto"
    """With ``tools``: ``auto`` lets the model answer or call a tool; ``required`` makes it call one on every
    turn that offers tools (the loop's last turn offers none, so it still ends with an answer): for a model
    too small to decide to call a tool by itself. Keep ``max_turns`` small with it."""
    extra_body: dict[str, Any] | None = None
    """Extra JSON keys merged into each request body (server-specific options)."""
    headers: dict[str, str] | None = None
    """Extra HTTP headers of each request (no secrets: workflow files and records keep them)."""
    stream: bool = Field(default=False, strict=True)
    """Stream the answer of an LLM step as it is generated: each piece of its text reaches the run's event
    listener as a ``Token`` event (nothing streams without a listener). What is stored is the same as
    without streaming; judges and ``ctx.llm`` calls never stream."""

    _numbers = field_validator("temperature", "timeout", mode="before")(staticmethod(no_boolean))

    @field_validator("model")
    @classmethod
    def _named_model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model is empty; name a model (smollm2 for the embedded one)")
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url {value!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
        return value

    def resolved_max_tokens(self) -> int:
        """The bound on one answer: ``max_tokens``, else the provider's default (:data:`DEFAULT_MAX_TOKENS`)."""
        return self.max_tokens if self.max_tokens is not None else DEFAULT_MAX_TOKENS[self.provider]

    def resolved_base_url(self) -> str | None:
        """The endpoint actually used: ``None`` for the local provider."""
        if self.provider != "openai":
            return None
        return (self.base_url or os.environ.get("ORCHESTRATOR_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
                or DEFAULT_OPENAI_BASE_URL)


def _as_dict(value: LLMConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, LLMConfig):
        # Only keys the author wrote: a step that says nothing about ``model`` keeps the workflow's.
        return value.model_dump(exclude_unset=True)
    return dict(value)


def merge(defaults: LLMConfig | Mapping[str, Any] | None, overrides: LLMConfig | Mapping[str, Any] | None = None
          ) -> LLMConfig:
    """The config of a step: the workflow's ``llm:`` block, with the step's keys on top.

    Raises :class:`pydantic.ValidationError` for unknown keys or bad values (the spec loader
    turns that into a SpecProblem with the key's location).
    """
    return LLMConfig.model_validate({**_as_dict(defaults), **_as_dict(overrides)})
