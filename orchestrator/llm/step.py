"""LLM steps: the step function binding makes for a step with a ``prompt``.

The function renders the prompt from the step's inputs (plus ``ctx``, ``next_needs`` and
``gate_feedback``, and on a ``repeat:`` step ``previous`` and ``iteration``), calls the model through
:func:`~orchestrator.llm.call.run_llm`, and puts
the attempt's :class:`~orchestrator.spec.llm_records.LLMRecord` on ``ctx.llm_records``, where the
executor stores it with the step record (also when the call fails). A critic with a prompt
answers with the built-in verdict schema; an ``llm`` step with ``run`` hands the model's answer
to that function (``reply=``) to post-process.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.spec.context import StepContext
from orchestrator.spec.llm_config import LLMConfig, merge
from orchestrator.spec.model import StepSpec, WorkflowSpec

REPLY_PARAMETER = "reply"
"""The parameter through which a post-processing function receives the model's answer."""


@dataclass(frozen=True)
class LLMStep:
    """Everything one LLM step needs to call its model, resolved when the workflow is bound."""

    step_id: str
    config: LLMConfig
    prompt: str
    system: str | None
    output_schema: Any
    """A pydantic model class, a JSON Schema dict, or None for plain text."""
    tools: tuple[Callable[..., Any], ...]
    max_turns: int
    validation_retries: int
    inject_needs: bool
    post_process: Callable[..., Any] | None
    approval_tools: frozenset[str] = frozenset()
    """Names of the tools whose calls wait for a person's approval (``approve: true``)."""

    async def __call__(self, ctx: StepContext, **inputs: Any) -> Any:
        from orchestrator.llm.call import ToolCallPaused, run_llm
        from orchestrator.llm.tools import ToolScope
        from orchestrator.spec.llm_errors import LLMStepError
        from orchestrator.spec.records import unit_name
        from orchestrator.spec.templates import tojson

        needs = [n.to_json() for n in ctx.next_needs]
        feedback = [{"gate": str(g.details.get("gate", "check")), "reason": g.reason} for g in ctx.gate_feedback]
        previous = None if ctx.previous is None else ctx.previous if isinstance(ctx.previous, str) \
            else tojson(ctx.previous)
        variables = {**inputs, "ctx": ctx}
        if ctx.iteration is not None:  # a repeat: step's template sees its loop (an input of the name wins)
            variables.setdefault("previous", ctx.previous_iteration)
            variables.setdefault("iteration", ctx.iteration)
        calls = ctx.calls

        async def checkpoint(state: dict[str, Any]) -> None:
            # the model calls made so far go with the checkpoint: a stop after it keeps them counted
            made = list(calls.calls)
            calls.calls.clear()
            await ctx.checkpoint(state, made)

        try:
            outcome = await run_llm(config=self.config, prompt=self.prompt, system=self.system,
                                    variables=variables, output_schema=self.output_schema,
                                    tools=list(self.tools) or None, max_turns=self.max_turns,
                                    validation_retries=self.validation_retries, needs=needs,
                                    inject_needs=self.inject_needs, gate_feedback=feedback, previous=previous,
                                    cache=ctx.llm_cache, resample=ctx.resample, log=ctx.calls,
                                    approval_tools=self.approval_tools, resume=ctx.tool_resume,
                                    checkpoint=checkpoint if ctx.checkpoint is not None else None,
                                    tool_scope=ToolScope(ctx.run_id, ctx.step_id,
                                                         unit_name(ctx.step_id, ctx.index, ctx.iteration),
                                                         ctx.idempotency_key),
                                    on_token=ctx.on_token if self.config.stream or ctx.stream_tokens else None)
        except ToolCallPaused as paused:
            ctx.llm_records.append(paused.record.model_dump(mode="json"))
            raise
        except LLMStepError as exc:
            ctx.llm_records.append(exc.record.model_dump(mode="json"))
            raise
        ctx.llm_records.append(outcome.record.model_dump(mode="json"))
        if self.post_process is None:
            return outcome.output
        result = self.post_process(**{**inputs, REPLY_PARAMETER: outcome.output})
        return await result if inspect.isawaitable(result) else result


def step_config(workflow: WorkflowSpec, step: StepSpec) -> LLMConfig:
    """The workflow's ``llm:`` defaults with the step's overrides (and its ``max_tokens`` and ``stream``) on top."""
    overrides = step.llm.model_dump(exclude_unset=True) if step.llm is not None else {}
    if step.max_tokens is not None:
        overrides["max_tokens"] = step.max_tokens
    if step.stream is not None:
        overrides["stream"] = step.stream
    return merge(workflow.llm, overrides)


def template_problems(step: StepSpec, input_names: Sequence[str]) -> list[tuple[str, int | None, str]]:
    """``(key, line within the template, message)`` for the step's prompt and system templates."""
    from orchestrator.spec.templates import BUILTIN_NAMES
    from orchestrator.spec.templates import template_problems as check

    known = [*input_names, *BUILTIN_NAMES, *(("iteration",) if step.loops else ())]
    out: list[tuple[str, int | None, str]] = []
    for key, template in (("prompt", step.prompt), ("system", step.system)):
        if template:
            out.extend((key, line, message) for line, message in check(template, known))
    return out


def make_llm_step(workflow: WorkflowSpec, step: StepSpec, *, resolve: Callable[[str], Any],
                  post_process: Callable[..., Any] | None) -> LLMStep:
    """Build the step function; ``resolve`` turns ``module:name`` references into objects."""
    from orchestrator.llm.judge import CRITIC_VERDICT_SCHEMA

    schema: Any = step.output_schema
    if isinstance(schema, str):
        schema = resolve(schema)
    elif schema is None and step.type == "critic":
        schema = CRITIC_VERDICT_SCHEMA
    attempts = step.retry.attempts
    refs = step.tool_refs()
    tools = tuple(resolve(t.ref) for t in refs)
    gated = frozenset(getattr(fn, "__name__", type(fn).__name__) for t, fn in zip(refs, tools, strict=True)
                      if t.approve)
    return LLMStep(step_id=step.id, config=step_config(workflow, step), prompt=step.prompt or "",
                   system=step.system, output_schema=schema, tools=tools,
                   max_turns=step.max_turns, validation_retries=max(0, attempts - 1), inject_needs=step.inject_needs,
                   post_process=post_process, approval_tools=gated)
