"""OpenTelemetry traces of runs: one span per run execution, per step attempt, per LLM and tool call; and a
worker's metrics, for Prometheus and over OpenTelemetry (:mod:`orchestrator.telemetry.metrics`).

Why this module looks the way it does:

* **Optional and lazy.** Tracing needs the ``otel`` extra (``pip install 'orchestrator[otel]'``).
  Importing this package never imports ``opentelemetry``: the CLI's start-up must stay fast and
  most runs are not traced. The SDK is imported by :func:`get_tracer` only when telemetry is on.
* **Off unless asked for.** Telemetry is on when an endpoint is passed (the CLI's ``--otel URL``)
  or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Otherwise
  :func:`get_tracer` returns a :class:`NoopRunTracer` whose spans do nothing, so the executor
  calls the same API either way and never branches on "is tracing on".
* **Standard wire format.** Spans go over OTLP/HTTP (protobuf) to any collector: Jaeger, Phoenix,
  Langfuse, an OpenTelemetry Collector. LLM and tool spans follow the OpenTelemetry GenAI semantic
  conventions (``gen_ai.*``), so GenAI-aware backends show models, token counts and tools.
* **Telemetry never breaks a run.** A bad stored trace id, an attribute of an odd type or an
  unreachable collector is logged (by the SDK) and ignored; only asking for telemetry without the
  extra installed, or with an endpoint that cannot work, raises :class:`TelemetryError`, at start.

Usage, as the executor calls it::

    tracer = get_tracer(endpoint)                       # NoopRunTracer when disabled
    with tracer.run(run_id, workflow, trace_id=stored, resumed=stored is not None) as run:
        store_trace_id(run.trace_id)                    # a resumed run continues this trace
        with run.step_attempt("summarize", agent="writer", attempt=1, step_type="llm") as step:
            with step.llm_call(provider="openai", model="gpt-4o") as llm:
                llm.record(input_tokens=120, output_tokens=40, finish_reason="stop")
            step.gate("length", passed=True, score=1.0, reason="ok", severity="blocking")
            step.set_status("succeeded")
        run.event("paused", step_id="review_me")
    tracer.shutdown()                                   # export before the process exits

Every span object is a context manager; it starts when created and ends when its ``with`` block
exits (or on :meth:`end`), so code that cannot nest ``with`` blocks can still end it explicitly.
An exception leaving a ``with`` block is recorded on the span and marks it as an error.
"""

from __future__ import annotations

import threading

from orchestrator.telemetry.metrics import MetricsRecorder, ReadingsSource
from orchestrator.telemetry.spans import (
    INSTALL_HINT,
    LLMSpan,
    NoopRunTracer,
    ReplayOf,
    RunSpan,
    RunTracer,
    StepSpan,
    TelemetryError,
    ToolSpan,
    check_protocol,
    resolve_endpoint,
    resolve_metrics_endpoint,
    service_name,
)

__all__ = [
    "LLMSpan",
    "NoopRunTracer",
    "ReplayOf",
    "RunSpan",
    "RunTracer",
    "StepSpan",
    "TelemetryError",
    "ToolSpan",
    "get_tracer",
    "otel_recorder",
    "resolve_endpoint",
    "resolve_metrics_endpoint",
    "service_name",
]

# --- choosing the implementation ------------------------------------------------------------------

_lock = threading.Lock()
_tracers: dict[tuple[str, str], RunTracer] = {}


def get_tracer(endpoint: str | None = None) -> RunTracer:
    """The tracer to use: a real one if telemetry is configured (see :func:`resolve_endpoint`),
    else a :class:`NoopRunTracer`.

    One tracer (one exporter thread) is shared per endpoint and service name, so a worker that
    executes many runs does not start a thread per run. Raises :class:`TelemetryError` when
    telemetry is requested but the ``otel`` extra is not installed or the endpoint is unusable.
    """
    url = resolve_endpoint(endpoint)
    if url is None:
        return NoopRunTracer()
    check_protocol()
    key = (url, service_name())
    with _lock:
        tracer = _tracers.get(key)
        if tracer is None:
            try:
                from orchestrator.telemetry import otel_sdk
            except ImportError as exc:
                raise TelemetryError(f"telemetry was requested (exporting to {url}) but OpenTelemetry is not "
                                     f"installed: {INSTALL_HINT} ({exc})") from exc
            tracer = otel_sdk.OtelRunTracer(url, key[1], on_shutdown=lambda: _forget(key))
            _tracers[key] = tracer
        return tracer


def _forget(key: tuple[str, str]) -> None:
    """Drop a shut-down tracer from the cache so the next :func:`get_tracer` makes a live one."""
    with _lock:
        _tracers.pop(key, None)


def otel_recorder(endpoint: str | None, read: ReadingsSource) -> MetricsRecorder | None:
    """An :class:`~orchestrator.telemetry.otel_metrics.OtelRecorder` when metrics are to be exported (``endpoint``,
    the ``--otel URL``, or the variables :func:`~orchestrator.telemetry.spans.resolve_metrics_endpoint` reads),
    else None. Raises :class:`~orchestrator.telemetry.spans.TelemetryError` when they are asked for but cannot
    be sent (the ``otel`` extra is missing, a URL that is not http(s), a protocol other than http/protobuf),
    before the worker claims anything."""
    url = resolve_metrics_endpoint(endpoint)
    if url is None:
        return None
    check_protocol("METRICS")
    try:
        from orchestrator.telemetry.otel_metrics import OtelRecorder
    except ImportError as exc:
        raise TelemetryError(f"metrics export was requested (to {url}) but OpenTelemetry is not installed: "
                             f"{INSTALL_HINT} ({exc})") from exc
    return OtelRecorder(url, service_name(), read)
