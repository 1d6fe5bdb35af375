"""Executor events as OpenTelemetry spans: the bridge the runner installs when tracing is on.

The executor knows nothing of tracing; it reports events. This listener turns them into the
span tree: one span per run execution (``RunStarted`` -> ``RunFinished``), one per step attempt
(``StepStarted`` -> ``StepFinished``, with gate verdicts as events), a GenAI model-call span per
LLM attempt and a tool span per tool call (from the attempt's stored record), and a ``paused``
event when the run stops for review. Events are passed on to the next listener unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.events import Event, EventHook, RunFinished, RunStarted, StepFinished, StepStarted
from orchestrator.telemetry.spans import RunSpan, RunTracer, StepSpan


class TracingListener:
    """Spans for one execution of one run, then whatever ``inner`` does with each event."""

    def __init__(self, tracer: RunTracer, *, trace_id: str | None = None, inner: EventHook | None = None) -> None:
        self.tracer = tracer
        self.trace_id = trace_id
        """The run's trace id: given for a resumed run, set at ``RunStarted`` otherwise."""
        self.inner = inner
        self.run_span: RunSpan | None = None
        self.steps: dict[tuple[str, int], StepSpan] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.run_span = self.tracer.run(event.run_id, event.workflow, trace_id=self.trace_id,
                                            resumed=event.resumed)
            self.trace_id = self.run_span.trace_id
        elif isinstance(event, StepStarted) and self.run_span is not None:
            self.steps[(event.step_id, event.attempt)] = self.run_span.step_attempt(
                event.step_id, agent=event.agent or None, attempt=event.attempt, step_type=event.step_type or None)
        elif isinstance(event, StepFinished):
            self.finish_step(event)
        elif isinstance(event, RunFinished) and self.run_span is not None:
            if event.status == "paused":
                self.run_span.event("paused", steps=", ".join(event.paused_steps))
            self.run_span.set_status(event.status, event.error)
            self.run_span.end()
            self.run_span = None
        if self.inner is not None:
            self.inner(event)

    def finish_step(self, event: StepFinished) -> None:
        span = self.steps.pop((event.step_id, event.attempt), None)
        if span is None:
            return
        if event.llm:
            record_model_call(span, event.llm)
        for v in event.verdicts:
            span.gate(v.gate, v.passed, v.score, v.reason, v.severity)
        span.set_status(event.status, event.error)
        span.end()


def record_model_call(span: StepSpan, record: Mapping[str, Any]) -> None:
    """A GenAI ``chat`` span for the attempt's model calls, and an ``execute_tool`` span per tool call."""
    usage = record.get("usage") or {}
    with span.llm_call(provider=str(record.get("provider", "")), model=str(record.get("model", ""))) as llm:
        llm.record(usage.get("input_tokens"), usage.get("output_tokens"), record.get("finish_reason"))
    for turn in record.get("turns") or ():
        if turn.get("kind") == "tool":
            with span.tool_call(str(turn.get("name", ""))) as tool:
                if turn.get("error"):
                    tool.set_error(str(turn["error"]))
