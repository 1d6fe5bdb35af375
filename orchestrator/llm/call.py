"""The LLM step: render, call, run tools, validate, re-ask, record.

:func:`run_llm` is what the executor calls for an ``llm`` step (and what judge gates and
critics build on). One call is one *attempt* of the step; gate retries are the executor's
business and come back here with ``gate_feedback``. Whatever happens after the model first
answers is captured in an :class:`~orchestrator.spec.llm_records.LLMRecord`, including when the
output never validates (:class:`~orchestrator.spec.llm_errors.LLMStepError` carries it), because
a failed attempt is exactly the one a reviewer needs to inspect.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.bind.approvals import ToolApprovalPending, ToolResume
from orchestrator.llm.cache import ResponseCache, cache_key
from orchestrator.llm.pricing import cost
from orchestrator.llm.prompt import FeedbackLike, NeedLike, render_prompt
from orchestrator.llm.providers.base import ChatProvider, ChatRequest, ChatResponse, answer, connection
from orchestrator.llm.structured import schema_of, validate
from orchestrator.llm.tools import ToolScope, ToolSpec, describe_tools, run_tool_call, tool_message_content
from orchestrator.spec.context import CallLog, ModelCall
from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.llm_errors import LLMStepError
from orchestrator.spec.llm_records import LLMRecord, ModelTurn, ToolCallInfo, ToolTurn, Turn, Usage

Checkpoint = Callable[[dict[str, Any]], Awaitable[None]]
"""Commits the tool loop's state durably (the step's ``ctx.checkpoint``)."""

TokenSink = Callable[[int, str], None]
"""Receives the pieces of each answer as they arrive: the model call's number in the attempt (1-based), the
text (the step's ``ctx.on_token``)."""


class LLMOutcome(BaseModel):
    """A successful attempt: the output (validated JSON value, or the answer text) and its record."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output: Any
    record: LLMRecord


def reask_message(errors: Sequence[str]) -> str:
    """The follow-up user message after an answer failed the output schema."""
    listed = "\n".join(f"- {e}" for e in errors)
    return (f"Your answer did not match the required output schema:\n{listed}\n"
            "Answer again with only the corrected JSON.")


def call_cost(model: str, response: ChatResponse, prices: Mapping[str, Mapping[str, float]] | None) -> float | None:
    """USD for one answer: by the configured model's price, else by the model the backend reported."""
    price = cost(model, response.input_tokens, response.output_tokens, prices)
    if price is None and response.model:
        price = cost(response.model, response.input_tokens, response.output_tokens, prices)
    return price


def _check(output_schema: Any | None, text: str) -> tuple[Any, list[str]]:
    return (text, []) if output_schema is None else validate(output_schema, text)


class _Attempt:
    """Mutable bookkeeping of one attempt, turned into the record at the end."""

    def __init__(self, messages: list[dict[str, Any]], config: LLMConfig, log: CallLog | None,
                 prices: Mapping[str, Mapping[str, float]] | None, scope: ToolScope | None = None,
                 on_token: TokenSink | None = None):
        self.config, self.log, self.prices = config, log, prices
        self.on_token = on_token
        self.scope = scope or ToolScope()
        self.conversation = list(messages)
        self.sent: list[dict[str, Any]] = list(messages)
        self.turns: list[Turn] = []
        self.usage = Usage()
        self.latency = 0.0
        self.calls = 0
        self.last = ChatResponse()
        self.validation_errors: list[str] = []

    async def ask(self, provider: ChatProvider, request: ChatRequest,
                  tools: list[dict[str, Any]] | None) -> ChatResponse:
        call = request.model_copy(update={"messages": list(self.conversation), "tools": tools})
        on_text = None if self.on_token is None else functools.partial(self.on_token, self.calls + 1)
        wall = time.time()
        started = time.perf_counter()
        try:
            response = await answer(provider, call, on_text)
        except Exception as exc:
            self.note(call, wall, time.perf_counter() - started, ChatResponse(), error=str(exc))
            raise
        elapsed = time.perf_counter() - started
        self.note(call, wall, elapsed, response)
        self.sent, self.last = call.messages, response
        self.calls += 1
        self.latency += elapsed
        self.usage.input_tokens += response.input_tokens
        self.usage.output_tokens += response.output_tokens
        self.turns.append(ModelTurn(response=response.text, finish_reason=response.finish_reason,
                                    input_tokens=response.input_tokens, output_tokens=response.output_tokens,
                                    latency=elapsed, tool_calls=list(response.tool_calls)))
        return response

    def note(self, call: ChatRequest, wall: float, elapsed: float, response: ChatResponse, *,
             error: str | None = None) -> None:
        """Log one model call (a failed one too: it may have been paid for) with its real start and end."""
        if self.log is None:
            return
        price = call_cost(self.config.model, response, self.prices)
        self.log.add(ModelCall(purpose=self.log.purpose, gate=self.log.gate, provider=self.config.provider,
                               model=self.config.model, started_at=wall, ended_at=wall + elapsed,
                               input_tokens=response.input_tokens, output_tokens=response.output_tokens, cost=price,
                               finish_reason=response.finish_reason, error=error, messages=list(call.messages),
                               response=response.text))

    async def run_tools(self, response: ChatResponse, specs: dict[str, ToolSpec], approvals: frozenset[str],
                        at: tuple[int, int]) -> None:
        self.conversation.append({"role": "assistant", "content": response.text or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls]})
        await self.answer(list(response.tool_calls), specs, approvals, at)

    async def answer(self, calls: list[ToolCallInfo], specs: dict[str, ToolSpec], approvals: frozenset[str],
                     at: tuple[int, int]) -> None:
        """Run the calls of one model turn in order; the first that needs approval pauses the loop with it
        and the calls after it (``at``: the loop's round and turn, to continue from)."""
        for i, call in enumerate(calls):
            if call.name in approvals:
                raise _Pause(call, self.state(calls[i:], at))
            self.answered(call, await self.run_call(specs, call, at))

    async def run_call(self, specs: dict[str, ToolSpec], call: ToolCallInfo, at: tuple[int, int]) -> ToolTurn:
        """Run one call, with its context (its idempotency key) should the tool ask for it."""
        return await run_tool_call(specs, call.name, call.arguments, self.scope.context(call.name, call.id, at))

    def answered(self, call: ToolCallInfo, turn: ToolTurn) -> None:
        self.turns.append(turn)
        self.conversation.append({"role": "tool", "tool_call_id": call.id, "content": tool_message_content(turn)})

    def state(self, pending: Sequence[ToolCallInfo], at: tuple[int, int]) -> dict[str, Any]:
        """The loop's state as stored with a pause or a checkpoint: enough to continue without asking the
        model again for the turns it already took."""
        return {"conversation": list(self.conversation), "pending": [c.model_dump() for c in pending],
                "round": at[0], "turn": at[1], "validation_errors": list(self.validation_errors)}


class _Pause(Exception):
    """Inside the loop: a tool call waits for approval (``state`` to continue from, the call first pending)."""

    def __init__(self, call: ToolCallInfo, state: dict[str, Any], note: str | None = None) -> None:
        super().__init__(call.name)
        self.call, self.state, self.note = call, state, note


class ToolCallPaused(ToolApprovalPending):
    """Raised by :func:`run_llm`: the model called a tool that needs approval. ``record`` is the attempt's
    record so far, its ``loop`` the state a decision continues from."""

    def __init__(self, tool: str, proposal: dict[str, Any], record: LLMRecord) -> None:
        super().__init__(tool, proposal)
        self.record = record


def proposal_of(call: ToolCallInfo, note: str | None = None) -> dict[str, Any]:
    """What a person decides on: the tool, its arguments (parsed JSON when they parse) and the call's id."""
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        arguments = call.arguments
    proposal = {"tool": call.name, "arguments": arguments, "call_id": call.id}
    if note:
        proposal["note"] = note
    return proposal


INTERRUPTED_NOTE = ("the process stopped while this approved call ran, so it may have taken effect; approve to run "
                    "it again, or reject to tell the model")


async def _continue_decided(attempt: _Attempt, resume: ToolResume, specs: dict[str, ToolSpec],
                            approvals: frozenset[str], checkpoint: Checkpoint | None) -> tuple[int, int]:
    """Answer the calls a paused loop left pending, the decided one first, and return where the loop goes
    on. An approved (or edited) call runs between two checkpoints: before it runs, so a process that stops
    during the call never runs it again unasked, and after, with its result, so a resume answers the model
    with that result rather than running the call again."""
    state = resume.state
    attempt.conversation = list(state["conversation"])
    attempt.sent = list(attempt.conversation)
    attempt.validation_errors = list(state.get("validation_errors", []))
    at = (int(state["round"]), int(state["turn"]))
    pending = [ToolCallInfo.model_validate(c) for c in state.get("pending", [])]
    if resume.interrupted:
        call = ToolCallInfo.model_validate(state["call"])
        raise _Pause(call, {**attempt.state([call, *pending[1:]], at)}, INTERRUPTED_NOTE)
    if resume.decision is not None and pending:
        first, pending = pending[0], pending[1:]
        if resume.decision == "reject":
            attempt.answered(first, ToolTurn(name=first.name, arguments=proposal_of(first)["arguments"],
                                             error=f"the reviewer rejected this call: {resume.reason}"))
        else:
            if resume.decision == "edit":
                first = first.model_copy(update={"arguments": json.dumps(resume.arguments)})
            if checkpoint is not None:
                await checkpoint({**attempt.state([first, *pending], at), "phase": "executing",
                                  "call": first.model_dump()})
            attempt.answered(first, await attempt.run_call(specs, first, at))
            if checkpoint is not None:
                await checkpoint({**attempt.state(pending, at), "phase": "executed", "call": first.model_dump(),
                                  "result": attempt.conversation[-1]["content"]})
    await attempt.answer(pending, specs, approvals, at)
    return at[0], at[1] + 1


def _record(config: LLMConfig, attempt: _Attempt, injected_spans: list[tuple[int, int]], key: str,
            prices: Mapping[str, Mapping[str, float]] | None) -> LLMRecord:
    price = cost(config.model, attempt.usage.input_tokens, attempt.usage.output_tokens, prices)
    if price is None and attempt.last.model:
        price = cost(attempt.last.model, attempt.usage.input_tokens, attempt.usage.output_tokens, prices)
    return LLMRecord(provider=config.provider, model=config.model, messages=attempt.sent,
                     response=attempt.last.text, usage=attempt.usage, latency=attempt.latency, cost=price,
                     finish_reason=attempt.last.finish_reason, turns=attempt.turns,
                     validation_errors=attempt.validation_errors, injected_spans=injected_spans,
                     cached=False, calls=attempt.calls, cache_key=key)


async def run_llm(*, config: LLMConfig, prompt: str, variables: Mapping[str, Any] | None = None,
                  system: str | None = None, output_schema: Any | None = None,
                  tools: Sequence[Callable[..., Any]] | None = None, max_turns: int = 4, validation_retries: int = 2,
                  needs: Sequence[NeedLike] = (), inject_needs: bool = True, gate_feedback: Sequence[FeedbackLike] = (),
                  previous: str | None = None,
                  cache: ResponseCache | None = None, resample: bool = False, provider: ChatProvider | None = None,
                  prices: Mapping[str, Mapping[str, float]] | None = None, log: CallLog | None = None,
                  approval_tools: Collection[str] = (), resume: ToolResume | None = None,
                  checkpoint: Checkpoint | None = None, tool_scope: ToolScope | None = None,
                  on_token: TokenSink | None = None) -> LLMOutcome:
    """Run one attempt of an LLM step.

    ``prompt`` and ``system`` are Jinja templates rendered with ``variables`` (plus
    ``next_needs`` and ``gate_feedback``). ``output_schema`` (pydantic model class or JSON
    Schema dict) makes the output a validated JSON value; an invalid answer is re-asked up to
    ``validation_retries`` times with the errors. ``tools`` may be called for up to
    ``max_turns`` model turns per answer; the last turn is sent without tools so the model has
    to answer. With a ``cache``, an unchanged request is answered from it (zero model calls)
    unless ``resample``. ``provider`` overrides the shared one for ``config`` (tests, wrappers).
    ``previous`` (on a retry: the answer the feedback is about) is ``{{ previous }}`` in the templates
    and is quoted in the feedback section unless the template placed it. ``log`` gets one entry per
    model call, charged to its current purpose and gate.

    A call of a tool named in ``approval_tools`` pauses the loop: :class:`ToolCallPaused` carries the call
    as the proposal and the record, whose ``loop`` a later attempt continues from as ``resume`` (with the
    person's decision; no turn already taken is asked again). ``checkpoint(state)`` commits the loop's
    state before and after an approved call runs. ``tool_scope`` (the run, step and step key) is what each
    call's :class:`~orchestrator.llm.tools.ToolContext` and idempotency key derive from.

    ``on_token(call, text)`` streams each answer: it gets the pieces of the answer's text as they arrive (see
    :class:`~orchestrator.llm.providers.base.StreamingProvider`); the record is the same as without it. An
    answer from the cache is no model call and streams nothing.

    Raises :class:`~orchestrator.spec.llm_errors.LLMError` when the model cannot be called,
    :class:`~orchestrator.spec.llm_errors.LLMStepError` (with the record) when no answer validated.
    """
    from orchestrator.llm.registry import get_provider

    rendered = render_prompt(prompt, variables or {}, system=system, needs=needs, inject_needs=inject_needs,
                             gate_feedback=gate_feedback, previous=previous)
    specs = describe_tools(tools) if tools else {}
    tool_schemas = [spec.schema_for_model() for spec in specs.values()] or None
    request = ChatRequest(messages=rendered.messages, model=config.model, temperature=config.temperature,
                          max_tokens=config.resolved_max_tokens(), seed=config.seed,
                          response_format=schema_of(output_schema) if output_schema is not None else None,
                          tools=tool_schemas, tool_choice=config.tool_choice, timeout=config.timeout,
                          max_retries=config.max_retries,
                          structured_output=config.structured_output, extra_body=config.extra_body,
                          headers=config.headers)
    key = cache_key(config.provider, request)

    if cache is not None and not resample and resume is None and (hit := cache.get(key)) is not None:
        cached_output, cached_errors = _check(output_schema, hit.response)
        if not cached_errors:  # a cached answer that no longer validates (schema changed) is asked again
            record = hit.model_copy(deep=True, update={
                "cached": True, "calls": 0, "usage": Usage(), "latency": 0.0, "cost": None if hit.cost is None else 0.0,
                "injected_spans": rendered.injected_spans, "cache_key": key})
            return LLMOutcome(output=cached_output, record=record)

    attempt = _Attempt(rendered.messages, config, log, prices, tool_scope, on_token)
    output: Any = None
    errors: list[str] = []
    approvals = frozenset(approval_tools)
    try:
        # the provider's set-up (its SDK's imports, a client) before any call is timed
        async with connection(provider or get_provider(config)) as model:
            start = (0, 0) if resume is None else await _continue_decided(attempt, resume, specs, approvals,
                                                                          checkpoint)
            for round_no in range(start[0], validation_retries + 1):
                for turn_no in range(start[1] if round_no == start[0] else 0, max(max_turns, 1)):
                    offered = tool_schemas if turn_no < max_turns - 1 else None
                    response = await attempt.ask(model, request, offered)
                    if not (offered and response.tool_calls):
                        break
                    await attempt.run_tools(response, specs, approvals, (round_no, turn_no))
                output, errors = _check(output_schema, attempt.last.text)
                if not errors:
                    break
                attempt.validation_errors.append("; ".join(errors))
                if round_no < validation_retries:
                    attempt.conversation.append({"role": "assistant", "content": attempt.last.text})
                    attempt.conversation.append({"role": "user", "content": reask_message(errors)})
    except _Pause as pause:
        record = _record(config, attempt, rendered.injected_spans, key, prices)
        record.loop = pause.state
        raise ToolCallPaused(pause.call.name, proposal_of(pause.call, pause.note), record) from None

    record = _record(config, attempt, rendered.injected_spans, key, prices)
    if errors:
        tries = validation_retries + 1
        raise LLMStepError(f"the model's output did not match the output schema after {tries} "
                           f"answer{'s' if tries > 1 else ''}: {'; '.join(errors)}", record)
    if cache is not None:
        cache.put(key, record)
    return LLMOutcome(output=output, record=record)
