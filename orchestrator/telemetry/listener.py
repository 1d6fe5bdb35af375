"""Executor events as OpenTelemetry spans: the bridge the runner installs when tracing is on.

The executor knows nothing of tracing; it reports events. This listener turns them into the
span tree: one span per run execution (``RunStarted`` -> ``RunFinished``), one per step attempt
(``StepStarted`` -> ``StepFinished``, with gate verdicts as events), a GenAI model-call span per
LLM attempt and a tool span per tool call (from the attempt's stored record), and a ``paused``
event when the run stops for review. Events are passed on to the next listener unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.spec.context import ModelCall
from orchestrator.spec.events import (
    Event,
    EventHook,
    OutcomeScored,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    Verdict,
)
from orchestrator.telemetry.spans import ReplayOf, RunSpan, RunTracer, StepSpan

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' switch for message content on spans: off unless ``true`` (prompts may be sensitive)."""


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


class TracingListener:
    """Spans for one execution of one run (and of the child runs it runs), then whatever ``inner`` does with
    each event.

    A child run's events come in the same stream, its ``RunStarted`` naming its parent run and unit: its run
    span starts under the parent's open span of that unit's attempt, in the parent's trace."""

    def __init__(self, tracer: RunTracer, *, trace_id: str | None = None, inner: EventHook | None = None,
                 replay_of: ReplayOf | None = None) -> None:
        self.tracer = tracer
        self.trace_id = trace_id
        """The run's trace id: given for a resumed run, set at ``RunStarted`` otherwise."""
        self.replay_of = replay_of
        """For a replay run: what it replays, named on its run span."""
        self.inner = inner
        self.runs: dict[str, RunSpan] = {}
        """The open run spans: the run's own, and its child runs' while they execute."""
        self.steps: dict[tuple[str, str, int], StepSpan] = {}
        """Open step spans by (run id, unit, attempt)."""
        self.child_traces: dict[str, str] = {}
        """Child runs whose spans this execution started, with the trace they are in (stored on them)."""
        self.content = capture_content()
        self.run_id: str | None = None

    @property
    def run_span(self) -> RunSpan | None:
        """The span of the run itself (not a child's), while it is open."""
        return self.runs.get(self.run_id) if self.run_id is not None else None

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.start_run(event)
        elif isinstance(event, StepStarted) and event.run_id in self.runs:
            self.steps[(event.run_id, event.unit, event.attempt)] = self.runs[event.run_id].step_attempt(
                event.unit, agent=event.agent or None, attempt=event.attempt, step_type=event.step_type or None)
        elif isinstance(event, StepFinished):
            self.finish_step(event)
        elif isinstance(event, OutcomeScored) and event.run_id in self.runs:
            self.runs[event.run_id].event("outcome", source="evaluator", value=event.value, correct=event.correct)
        elif isinstance(event, RunFinished) and event.run_id in self.runs:
            span = self.runs.pop(event.run_id)
            if event.status == "paused":
                span.event("paused", steps=", ".join(event.paused_steps))
            span.set_status(event.status, event.error)
            span.end()
        if self.inner is not None:
            self.inner(event)

    def start_run(self, event: RunStarted) -> None:
        if event.parent_run_id is None:
            self.run_id = event.run_id
            span = self.tracer.run(event.run_id, event.workflow, trace_id=self.trace_id, resumed=event.resumed,
                                   replay_of=self.replay_of)
            self.runs[event.run_id] = span
            self.trace_id = span.trace_id
            return
        parent = next((span for (run_id, unit, _), span in reversed(self.steps.items())
                       if run_id == event.parent_run_id and unit == event.parent_step), None)
        if parent is None:
            return  # a child of a run this listener does not trace
        child = parent.child_run(event.run_id, event.workflow, resumed=event.resumed)
        self.runs[event.run_id] = child
        if child.trace_id:
            self.child_traces[event.run_id] = child.trace_id

    def interrupt(self, reason: str) -> None:
        """End what is still open when the execution stops from outside (Ctrl-C, a lost lease), so the
        segment's spans are exported and say how it ended; a resume continues the same trace."""
        for span in reversed(self.steps.values()):
            span.set_status("interrupted", reason)
            span.end()
        self.steps.clear()
        for run_span in reversed(self.runs.values()):
            run_span.event("interrupted", reason=reason)
            run_span.set_status("interrupted", reason)
            run_span.end()
        self.runs.clear()

    def finish_step(self, event: StepFinished) -> None:
        span = self.steps.pop((event.run_id, event.unit, event.attempt), None)
        if span is None:
            return
        if event.model_calls:
            record_calls(span, event.model_calls, event.verdicts, content=self.content)
        if event.llm:
            record_tool_calls(span, event.llm)
        for v in event.verdicts:
            span.gate(v.gate, v.passed, v.score, v.reason, v.severity)
        span.set_status(event.status, event.error)
        span.end()


def record_calls(span: StepSpan, calls: Sequence[ModelCall], verdicts: Sequence[Verdict], *,
                 content: bool) -> None:
    """A GenAI ``chat`` span per model call with its real start and end: the step's own under the step
    span, a gate's under a ``gate {name}`` (evaluator) span of their own."""
    by_gate: dict[str, list[ModelCall]] = {}
    for call in calls:
        if call.gate is None:
            chat_span(span, call, content=content)
        else:
            by_gate.setdefault(call.gate, []).append(call)
    outcome = {v.gate: v for v in verdicts}
    for gate, gate_calls in by_gate.items():
        verdict = outcome.get(gate)
        evaluator = span.gate_span(gate, passed=verdict.passed if verdict else None,
                                   score=verdict.score if verdict else None,
                                   start_time=min(c.started_at for c in gate_calls))
        for call in gate_calls:
            chat_span(evaluator, call, content=content)
        evaluator.end_at(max(c.ended_at for c in gate_calls))


def chat_span(parent: StepSpan, call: ModelCall, *, content: bool) -> None:
    llm = parent.llm_call(provider=call.provider, model=call.model, start_time=call.started_at)
    llm.record(call.input_tokens, call.output_tokens, call.finish_reason)
    if call.error is not None:
        llm.set_error(call.error, error_type="ModelCallError")
    if content:
        llm.content(call.messages, call.response)
    llm.end_at(call.ended_at)


def record_tool_calls(span: StepSpan, record: Mapping[str, Any]) -> None:
    """An ``execute_tool`` span per tool call of the attempt's LLM record."""
    for turn in record.get("turns") or ():
        if turn.get("kind") == "tool":
            with span.tool_call(str(turn.get("name", ""))) as tool:
                if turn.get("error"):
                    tool.set_error(str(turn["error"]))
