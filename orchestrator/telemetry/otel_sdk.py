"""The real tracer, on the OpenTelemetry SDK. Imported only when telemetry is enabled.

Spans are parented explicitly (each span object passes its own context to its children) rather
than through "the current span", because the executor runs steps concurrently in anyio tasks and
a step may be started in one place and ended in another. While a span's ``with`` block runs it is
also made current, so spans from auto-instrumented libraries (an HTTP client, an LLM SDK) called
inside a step nest under that step.

A :class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor` exports from a background thread, so
ending a span never blocks the executor's event loop on network I/O; ``force_flush``/``shutdown``
drain it before the process exits.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from orchestrator.telemetry.spans import (
    LLMSpan,
    ReplayOf,
    RunSpan,
    RunTracer,
    StepSpan,
    ToolSpan,
    attributes,
    valid_trace_id,
)

PREFIX = "orchestrator."
ERROR_TYPE = "error.type"
SPAN_KIND = "openinference.span.kind"
"""OpenInference's span kind (CHAIN, AGENT, LLM, TOOL, EVALUATOR...), what Phoenix and Langfuse read to
show a span as what it is, beside the GenAI attributes."""
STEP_KINDS = {"retrieval": "RETRIEVER", "critic": "EVALUATOR", "verification": "EVALUATOR"}
"""The OpenInference kind of a step by its type; any other step is an AGENT."""


def nanos(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
_ids = RandomIdGenerator()


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("orchestrator")
    except Exception:  # not installed as a distribution (running from a checkout)
        return None


def make_resource(service: str) -> Resource:
    """The process's resource: ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` as the SDK reads
    them, with ``service.name`` = ``service`` and the package version filled in."""
    extra: dict[str, str] = {SERVICE_NAME: service}
    if (version := _version()) is not None:
        extra[SERVICE_VERSION] = version
    detected = Resource.create()
    if detected.attributes.get(SERVICE_VERSION):
        extra.pop(SERVICE_VERSION, None)  # a user-set version wins
    return detected.merge(Resource(extra))


class _OtelSpan:
    """Wraps one SDK span: ends it once, makes it current inside ``with``, records escaping errors."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._context = trace.set_span_in_context(span)
        self._token: Token[otel_context.Context] | None = None
        self._ended = False
        self._end_lock = threading.Lock()

    def __enter__(self) -> Self:
        self._token = otel_context.attach(self._context)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self._fail(exc, None)
        if self._token is not None:
            token, self._token = self._token, None
            otel_context.detach(token)
        self.end()

    def end(self) -> None:
        self.end_at(None)

    def end_at(self, end_time: float | None) -> None:
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
        self._span.end(end_time=None if end_time is None else nanos(end_time))

    @property
    def recording(self) -> bool:
        return self._span.is_recording()

    @property
    def span_context(self) -> trace.SpanContext:
        """The span's ids, for a span elsewhere to link to it."""
        return self._span.get_span_context()

    def _fail(self, error: BaseException | str, error_type: str | None) -> None:
        """Mark the span as an error; an exception is also recorded as an ``exception`` event."""
        if isinstance(error, BaseException):
            self._span.record_exception(error)
            kind = error_type or type(error).__qualname__
            message = str(error) or kind
        else:
            kind = error_type or "_OTHER"  # the semantic conventions' "unknown error class"
            message = error
        self._span.set_attribute(ERROR_TYPE, kind)
        self._span.set_status(Status(StatusCode.ERROR, message))

    def _event(self, name: str, values: Mapping[str, object]) -> None:
        self._span.add_event(name, attributes(PREFIX, values))


class OtelToolSpan(_OtelSpan, ToolSpan):
    def set_result(self, **values: object) -> None:
        self._span.set_attributes(attributes(PREFIX, values))

    def set_error(self, error: BaseException | str, *, error_type: str | None = None) -> None:
        self._fail(error, error_type)


class OtelLLMSpan(_OtelSpan, LLMSpan):
    def record(self, input_tokens: int | None = None, output_tokens: int | None = None,
               finish_reason: str | Sequence[str] | None = None, response_model: str | None = None, *,
               response_id: str | None = None) -> None:
        values: dict[str, object] = {
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.response.model": response_model,
            "gen_ai.response.id": response_id,
        }
        if finish_reason is not None:  # always an array in the conventions, one entry per choice
            values["gen_ai.response.finish_reasons"] = [finish_reason] if isinstance(finish_reason, str) \
                else [str(r) for r in finish_reason]
        self._span.set_attributes(attributes(PREFIX, values))

    def set_error(self, error: BaseException | str, *, error_type: str | None = None) -> None:
        self._fail(error, error_type)

    def content(self, messages: Sequence[Mapping[str, Any]], response: str) -> None:
        sent = json.dumps(list(messages), default=str)
        answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": response}]}])
        self._span.set_attributes({"gen_ai.input.messages": sent, "gen_ai.output.messages": answer,
                                   "input.value": sent, "input.mime_type": "application/json",
                                   "output.value": response})


class OtelStepSpan(_OtelSpan, StepSpan):
    def __init__(self, span: trace.Span, tracer: trace.Tracer) -> None:
        super().__init__(span)
        self._tracer = tracer

    def set_status(self, status: str, error: BaseException | str | None = None, *,
                   error_type: str | None = None) -> None:
        self._span.set_attribute(PREFIX + "status", status)
        if status == "failed":
            self._fail(error if error is not None else "step failed", error_type)
        elif error is not None:  # e.g. gate_failed with its message: worth keeping, not an error
            self._span.set_attribute(PREFIX + "error", str(error))

    def gate(self, name: str, passed: bool, score: float | None = None, reason: str | None = None,
             severity: str | None = None) -> None:
        gate = PREFIX + "gate."
        self._event("gate", {gate + "name": name, gate + "passed": passed, gate + "score": score,
                             gate + "reason": reason, gate + "severity": severity})

    def event(self, name: str, **values: object) -> None:
        self._event(name, values)

    def llm_call(self, *, provider: str, model: str, operation: str = "chat", temperature: float | None = None,
                 max_tokens: int | None = None, start_time: float | None = None) -> OtelLLMSpan:
        values: dict[str, object] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the pre-1.37 name, still what many backends read
            "gen_ai.request.model": model,
            "gen_ai.request.temperature": temperature,
            "gen_ai.request.max_tokens": max_tokens,
            SPAN_KIND: "LLM", "llm.model_name": model, "llm.provider": provider,
        }
        span = self._tracer.start_span(f"{operation} {model}", context=self._context, kind=SpanKind.CLIENT,
                                       attributes=attributes(PREFIX, values),
                                       start_time=None if start_time is None else nanos(start_time))
        return OtelLLMSpan(span)

    def gate_span(self, name: str, *, passed: bool | None, score: float | None, start_time: float) -> OtelStepSpan:
        values: dict[str, object] = {SPAN_KIND: "EVALUATOR", "gate": name, "gate_passed": passed,
                                     "gate_score": score}
        span = self._tracer.start_span(f"gate {name}", context=self._context, kind=SpanKind.INTERNAL,
                                       attributes=attributes(PREFIX, values), start_time=nanos(start_time))
        return OtelStepSpan(span, self._tracer)

    def tool_call(self, name: str, *, call_id: str | None = None) -> OtelToolSpan:
        values: dict[str, object] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                     "gen_ai.tool.call.id": call_id, SPAN_KIND: "TOOL", "tool.name": name}
        span = self._tracer.start_span(f"execute_tool {name}", context=self._context, kind=SpanKind.INTERNAL,
                                       attributes=attributes(PREFIX, values))
        return OtelToolSpan(span)

    def child_run(self, run_id: str, workflow: str, *, resumed: bool = False) -> OtelRunSpan:
        values: dict[str, object] = {"run_id": run_id, "workflow": workflow, "resumed": resumed, SPAN_KIND: "CHAIN",
                                     "child": True}
        span = self._tracer.start_span(f"run {workflow}", context=self._context, kind=SpanKind.INTERNAL,
                                       attributes=attributes(PREFIX, values))
        return OtelRunSpan(span, self._tracer)


class OtelRunSpan(_OtelSpan, RunSpan):
    def __init__(self, span: trace.Span, tracer: trace.Tracer) -> None:
        super().__init__(span)
        self._tracer = tracer

    @property
    def trace_id(self) -> str:
        return trace.format_trace_id(self._span.get_span_context().trace_id)

    def step_attempt(self, step_id: str, *, agent: str | None = None, attempt: int = 1,
                     step_type: str | None = None) -> OtelStepSpan:
        values: dict[str, object] = {"step_id": step_id, "agent": agent, "attempt": attempt, "step_type": step_type,
                                     "gen_ai.agent.name": agent, SPAN_KIND: STEP_KINDS.get(step_type or "", "AGENT")}
        span = self._tracer.start_span(f"step {step_id}", context=self._context, kind=SpanKind.INTERNAL,
                                       attributes=attributes(PREFIX, values))
        return OtelStepSpan(span, self._tracer)

    def event(self, name: str, **values: object) -> None:
        self._event(name, values)

    def set_status(self, status: str, error: str | None = None) -> None:
        self._span.set_attribute(PREFIX + "status", status)
        if status == "failed":
            self._fail(error or "run failed", None)
        elif error is not None:
            self._span.set_attribute(PREFIX + "error", error)


class StoredTraceIds(RandomIdGenerator):
    """Gives a root span the trace id stored on its run, so every execution of a run and every decision
    on it lands in one trace as a root of its own: no span points at a parent nobody sent.

    (A made-up remote parent would join the trace too, but backends then show that parent as missing.)
    The id to use is set around one ``start_span`` call (:meth:`pinned`); otherwise ids are random."""

    def __init__(self) -> None:
        self._next: ContextVar[int | None] = ContextVar("orchestrator_next_trace_id", default=None)

    def generate_trace_id(self) -> int:
        pinned = self._next.get()
        return pinned if pinned is not None else super().generate_trace_id()

    @contextmanager
    def pinned(self, trace_id: str | None) -> Iterator[bool]:
        """Inside the block a new root span gets ``trace_id`` (when valid); yields whether it is."""
        tid = valid_trace_id(trace_id)
        token = self._next.set(int(tid, 16) if tid is not None else None)
        try:
            yield tid is not None
        finally:
            self._next.reset(token)


class OtelRunTracer(RunTracer):
    """Exports spans over OTLP/HTTP with its own TracerProvider.

    The provider is deliberately not installed as the global one: a library embedding the
    orchestrator may have its own, and tests create several tracers in one process.
    """

    enabled = True

    def __init__(self, endpoint: str, service: str, *, exporter: SpanExporter | None = None,
                 processor: SpanProcessor | None = None, on_shutdown: Callable[[], None] | None = None) -> None:
        self.endpoint = endpoint
        self.trace_ids = StoredTraceIds()
        self.provider = TracerProvider(resource=make_resource(service), id_generator=self.trace_ids)
        if processor is None:
            processor = BatchSpanProcessor(exporter if exporter is not None else OTLPSpanExporter(endpoint=endpoint))
        self.provider.add_span_processor(processor)
        self._tracer = self.provider.get_tracer("orchestrator", _version())
        self._on_shutdown = on_shutdown

    def run(self, run_id: str, workflow: str, *, trace_id: str | None = None, resumed: bool = False,
            replay_of: ReplayOf | None = None) -> OtelRunSpan:
        values: dict[str, object] = {"run_id": run_id, "workflow": workflow, "resumed": resumed, SPAN_KIND: "CHAIN"}
        links: list[trace.Link] = []
        if replay_of is not None:
            values.update(replay_of.attributes())
            if isinstance(replay_of.within, _OtelSpan):  # the parent's replay step that runs this child's replay
                links.append(trace.Link(replay_of.within.span_context, {PREFIX + "link": "replayed within"}))
        with self.trace_ids.pinned(trace_id) as continued:
            if trace_id is not None and not continued:
                values["invalid_trace_id"] = trace_id  # a new trace; keep the bad value for whoever looks
            span = self._tracer.start_span(f"run {workflow}", context=otel_context.Context(),
                                           kind=SpanKind.INTERNAL, attributes=attributes(PREFIX, values), links=links)
        return OtelRunSpan(span, self._tracer)

    def decision_event(self, run_id: str, trace_id: str | None, decision: str, step_id: str | None,
                       reviewer: str | None, **values: object) -> str:
        who = {"run_id": run_id, "decision": decision, "step_id": step_id, "reviewer": reviewer, SPAN_KIND: "CHAIN"}
        with self.trace_ids.pinned(trace_id):
            span = self._tracer.start_span(f"review {decision}", context=otel_context.Context(),
                                           kind=SpanKind.INTERNAL, attributes=attributes(PREFIX, who))
        try:
            span.add_event("review", attributes(PREFIX, {"decision": decision, "step_id": step_id,
                                                         "reviewer": reviewer, **values}))
        finally:
            span.end()
        return trace.format_trace_id(span.get_span_context().trace_id)

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        return self.provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if self._on_shutdown is not None:
            self._on_shutdown()
        self.provider.shutdown()


__all__ = ["OtelLLMSpan", "OtelRunSpan", "OtelRunTracer", "OtelStepSpan", "OtelToolSpan", "make_resource",
           "StoredTraceIds"]
