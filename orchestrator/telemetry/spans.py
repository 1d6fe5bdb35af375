"""The tracing API the executor calls, and its no-op implementation (see the package docstring)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from orchestrator.core.errors import OrchestratorError

INSTALL_HINT = "pip install 'orchestrator[otel]'"
DEFAULT_SERVICE_NAME = "orchestrator"
TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[bool] | Sequence[int] | Sequence[float]
"""What an OpenTelemetry attribute may hold; anything else is converted by :func:`attribute_value`."""

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


class TelemetryError(OrchestratorError):
    """Telemetry was asked for but cannot work (the ``otel`` extra is missing, or a bad endpoint).

    Raised when the tracer is created, before the run starts, so a user who asked for traces
    learns at once that none will be sent instead of finding an empty backend later.
    """


# --- configuration -----------------------------------------------------------------------------


def _env(name: str) -> str | None:
    """An environment variable, with an empty value meaning unset (as the OTel spec says)."""
    value = os.environ.get(name, "").strip()
    return value or None


def resolve_endpoint(endpoint: str | None = None) -> str | None:
    """The full OTLP/HTTP traces URL to export to, or None when telemetry is off.

    An explicit ``endpoint`` wins (the CLI's ``--otel URL``). Like ``OTEL_EXPORTER_OTLP_ENDPOINT``
    it is a base URL to which ``/v1/traces`` is added, unless it already ends with ``/v1/traces``
    (so both ``http://localhost:4318`` and ``http://localhost:6006/v1/traces`` work).
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as is; ``OTEL_EXPORTER_OTLP_ENDPOINT`` gets
    ``/v1/traces`` added. With no explicit endpoint, ``OTEL_SDK_DISABLED=true`` turns telemetry off.
    """
    return _resolve(endpoint, "TRACES", TRACES_PATH)


def resolve_metrics_endpoint(endpoint: str | None = None) -> str | None:
    """The full OTLP/HTTP metrics URL to export a worker's metrics to, or None when they are not exported.

    As :func:`resolve_endpoint` with ``/v1/metrics``: an explicit ``endpoint`` (``--otel URL``) gets it added
    (an endpoint given as a traces URL, ``.../v1/traces``, has that replaced), then
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as is, then ``OTEL_EXPORTER_OTLP_ENDPOINT`` plus ``/v1/metrics``.
    A traces-only setting (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) exports no metrics: the backend it names
    may take traces only. ``OTEL_METRICS_EXPORTER=none`` turns metrics off, whatever the endpoint.
    """
    if (_env("OTEL_METRICS_EXPORTER") or "").lower() == "none":
        return None
    if endpoint is not None and endpoint.strip() and endpoint.strip().rstrip("/").endswith(TRACES_PATH):
        endpoint = endpoint.strip().rstrip("/").removesuffix(TRACES_PATH)
    return _resolve(endpoint, "METRICS", METRICS_PATH)


def _resolve(endpoint: str | None, signal: str, path: str) -> str | None:
    if endpoint is not None and endpoint.strip():
        url = endpoint.strip()
        _check_url(url, "--otel")
        return url if url.rstrip("/").endswith(path) else url.rstrip("/") + path
    if (_env("OTEL_SDK_DISABLED") or "").lower() == "true":
        return None
    if specific := _env(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"):
        _check_url(specific, f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        return specific
    if base := _env("OTEL_EXPORTER_OTLP_ENDPOINT"):
        _check_url(base, "OTEL_EXPORTER_OTLP_ENDPOINT")
        return base.rstrip("/") + path
    return None


def _check_url(url: str, source: str) -> None:
    """Reject what the HTTP exporter would only fail on later, in a background thread, in a log line."""
    if not url.startswith(("http://", "https://")):
        raise TelemetryError(f"{source}: {url!r} is not an http(s) URL; OTLP over HTTP needs one such as "
                             "http://localhost:4318")


def check_protocol(signal: str = "TRACES") -> None:
    """Only OTLP over HTTP/protobuf is supported; a gRPC setting would silently send nothing. ``signal``:
    ``TRACES`` or ``METRICS``, whose own ``OTEL_EXPORTER_OTLP_{signal}_PROTOCOL`` wins over the general one."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = _env(name)
        if value is not None:
            if value != "http/protobuf":
                raise TelemetryError(f"{name}={value!r} is not supported: the orchestrator exports "
                                     f"{signal.lower()} over OTLP http/protobuf (port 4318 on most collectors); "
                                     "unset it or set 'http/protobuf'")
            return  # the signal-specific setting wins over the general one


def service_name() -> str:
    """``OTEL_SERVICE_NAME`` when set, otherwise ``orchestrator``."""
    return _env("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME


def attribute_value(value: object) -> AttributeValue | None:
    """``value`` as something OpenTelemetry accepts as an attribute; None means "leave it out".

    The SDK drops (and warns about) values of other types; converting here keeps a dict or an
    enum from vanishing silently and keeps telemetry from ever raising into the executor.
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items = [v for v in value if v is not None]
        if all(isinstance(v, str) for v in items):
            return [str(v) for v in items]
        if all(isinstance(v, bool) for v in items):
            return [bool(v) for v in items]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return [int(v) for v in items]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
            return [float(v) for v in items]
        return [str(v) for v in items]
    return str(value)


def attributes(prefix: str, values: Mapping[str, object]) -> dict[str, AttributeValue]:
    """``values`` with each key prefixed (``step_id`` -> ``orchestrator.step_id``), Nones left out."""
    out: dict[str, AttributeValue] = {}
    for key, value in values.items():
        converted = attribute_value(value)
        if converted is not None:
            out[key if "." in key else prefix + key] = converted
    return out


def valid_trace_id(trace_id: str | None) -> str | None:
    """A stored trace id normalised to 32 lowercase hex digits, or None if it is not one."""
    if trace_id is None:
        return None
    tid = trace_id.strip().lower()
    return tid if _TRACE_ID.match(tid) and tid != "0" * 32 else None


@dataclass(frozen=True, slots=True)
class ReplayOf:
    """What a replay run replays: its run span carries these as ``orchestrator.replay_of.*`` and
    ``orchestrator.replay.*`` attributes, so a backend finds the original from the replay's own trace.

    Only the original's trace id is stored (no span id), so the replay points at it by attribute, not by
    an OpenTelemetry span link: a link needs a span id, and a made-up one would point at nothing. A child
    run's replay does link to a span it knows: the step span of the parent's replay that ran it."""

    run_id: str
    """The run replayed (for a child run's replay, the original child run)."""
    trace_id: str | None
    """The trace stored on that run, when it was traced."""
    kind: str
    """``replay`` (a fork) or ``counterfactual`` (attribution's replays)."""
    changed: str | None = None
    """What the replay changed, as its run stores it (``parent_step``): a step, a unit or a path into a child
    run; None when it changes nothing or (a child run's replay inside a fork) names nothing."""
    within: StepSpan | None = None
    """For a child run's replay: the open span of the step of the parent's replay that runs it (linked)."""

    def attributes(self) -> dict[str, object]:
        return {"orchestrator.replay_of.run_id": self.run_id,
                "orchestrator.replay_of.trace_id": valid_trace_id(self.trace_id),
                "orchestrator.replay.kind": self.kind, "orchestrator.replay.changed": self.changed}


# --- the API; these base classes are the no-op implementation -------------------------------------


class _Span:
    """What every span object shares: it is a context manager and can be ended explicitly."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.end()

    def end(self) -> None:
        """End the span (idempotent); the ``with`` block does this for you."""

    @property
    def recording(self) -> bool:
        """True when this span is sent somewhere; lets a caller skip costly attribute computation."""
        return False


class ToolSpan(_Span):
    """One tool execution inside a step (``execute_tool {name}``)."""

    def set_result(self, **attributes: object) -> None:
        """Attach details of the call's outcome (``orchestrator.*`` attributes)."""

    def set_error(self, error: BaseException | str, *, error_type: str | None = None) -> None:
        """Mark the tool call as failed. ``error_type`` is a low-cardinality class of the failure
        (``error.type``); it defaults to the exception's class name."""


class LLMSpan(_Span):
    """One model call inside a step (``chat {model}``), in GenAI semantic-convention terms."""

    def record(self, input_tokens: int | None = None, output_tokens: int | None = None,
               finish_reason: str | Sequence[str] | None = None, response_model: str | None = None, *,
               response_id: str | None = None) -> None:
        """Record the response: token usage, why generation stopped, which model actually answered.

        Token counts feed cost and latency dashboards in GenAI-aware backends; ``response_model``
        matters when a provider resolves an alias (``gpt-4o`` -> ``gpt-4o-2024-08-06``).
        """

    def set_error(self, error: BaseException | str, *, error_type: str | None = None) -> None:
        """Mark the call as failed (rate limit, timeout, refusal...)."""

    def content(self, messages: Sequence[Mapping[str, Any]], response: str) -> None:
        """Attach what was sent and answered (only when content capture is on: it may be sensitive)."""

    def end_at(self, end_time: float) -> None:
        """End the span at ``end_time`` (epoch seconds): a call recorded after it happened keeps its real end."""


class StepSpan(_Span):
    """One attempt of one step (``step {step_id}``); retries are sibling spans under the run."""

    def set_status(self, status: str, error: BaseException | str | None = None, *,
                   error_type: str | None = None) -> None:
        """Record the attempt's step status (``orchestrator.status``).

        Only ``failed`` is an OpenTelemetry error: ``gate_failed`` means "waiting for a human",
        which is the orchestrator working as designed, not a fault to alert on.
        """

    def gate(self, name: str, passed: bool, score: float | None = None, reason: str | None = None,
             severity: str | None = None) -> None:
        """Add a ``gate`` event: which quality gate ran on the output and its verdict."""

    def event(self, name: str, **attributes: object) -> None:
        """Add any other event to the attempt (``orchestrator.*`` attributes)."""

    def llm_call(self, *, provider: str, model: str, operation: str = "chat", temperature: float | None = None,
                 max_tokens: int | None = None, start_time: float | None = None) -> LLMSpan:
        """Start a child span for one model call; ``provider`` is e.g. ``openai``, ``anthropic``.
        ``start_time`` (epoch seconds) backdates it to when the call really started."""
        return LLMSpan()

    def gate_span(self, name: str, *, passed: bool | None, score: float | None, start_time: float) -> StepSpan:
        """Start a child span for a gate that called a model (an evaluator), so its calls nest under it."""
        return StepSpan()

    def end_at(self, end_time: float) -> None:
        """End the span at ``end_time`` (epoch seconds)."""

    def tool_call(self, name: str, *, call_id: str | None = None) -> ToolSpan:
        """Start a child span for one tool execution."""
        return ToolSpan()

    def child_run(self, run_id: str, workflow: str, *, resumed: bool = False) -> RunSpan:
        """Start the span of an execution of a child run (a ``workflow:`` step's) under this attempt: the
        child's spans sit in its parent's trace, below the step that ran it."""
        return _NoopRunSpan(None)


class RunSpan(_Span):
    """One execution of a run (``run {workflow}``): the start, or one resume, of a run."""

    @property
    def trace_id(self) -> str | None:
        """The trace id as 32 hex digits, for the caller to store on the run so a resume continues
        the same trace. None when telemetry is off and no trace id was passed in; a passed-in one
        is handed back unchanged, so writing this value back never erases a stored id."""
        return None

    def step_attempt(self, step_id: str, *, agent: str | None = None, attempt: int = 1,
                     step_type: str | None = None) -> StepSpan:
        """Start a child span for one attempt of a step."""
        return StepSpan()

    def event(self, name: str, **attributes: object) -> None:
        """Add an event such as ``paused`` or ``review`` (attributes become ``orchestrator.*``)."""

    def set_status(self, status: str, error: str | None = None) -> None:
        """Record how this execution ended (``orchestrator.status``); ``failed`` is an error."""


class _NoopRunSpan(RunSpan):
    """A disabled run span that still hands back the trace id it was given (see ``trace_id``)."""

    def __init__(self, trace_id: str | None) -> None:
        self._trace_id = trace_id

    @property
    def trace_id(self) -> str | None:
        return self._trace_id


class RunTracer:
    """Makes run spans. This base class does nothing; :func:`get_tracer` picks the implementation."""

    enabled: bool = False
    """Whether spans are exported; the executor never needs to check, but the CLI may say so."""

    endpoint: str | None = None
    """The OTLP/HTTP traces URL spans go to, when enabled."""

    def run(self, run_id: str, workflow: str, *, trace_id: str | None = None, resumed: bool = False,
            replay_of: ReplayOf | None = None) -> RunSpan:
        """Start the span of one execution of a run.

        Pass the trace id stored on the run (``RunSpan.trace_id`` of an earlier execution) to put
        this execution in the same trace: a run paused for review and resumed later shows up as
        one trace with one ``run`` span per execution. ``replay_of``: the run is a replay, in a trace
        of its own, naming the run it replays.
        """
        return _NoopRunSpan(trace_id)

    def decision_event(self, run_id: str, trace_id: str | None, decision: str, step_id: str | None,
                       reviewer: str | None, **attributes: object) -> str | None:
        """Record a review decision taken outside an execution (e.g. ``orchestrator review``).

        Emits a short ``review {decision}`` span in the run's trace carrying a ``review`` event, so
        the human's decision sits between the execution that paused and the one that resumed.
        Returns the trace id used (a new one if the run had none), or None when disabled.
        """
        return trace_id

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        """Export finished spans now; True on success. Call before a long idle or a fork."""
        return True

    def shutdown(self) -> None:
        """Flush and stop exporting. A CLI process calls this before exit so no span is lost."""


class NoopRunTracer(RunTracer):
    """The tracer when telemetry is disabled: every span it makes does nothing."""
