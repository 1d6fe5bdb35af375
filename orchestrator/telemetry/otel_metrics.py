"""The OpenTelemetry side of a worker's metrics: the metrics SDK, pushed over OTLP/HTTP (protobuf).

Imported only when a worker exports metrics (``--otel`` or the ``OTEL_EXPORTER_OTLP_*`` variables), as the
tracer is. The same metrics as the Prometheus endpoint, under OpenTelemetry's names (dotted, the unit as
metadata; see :data:`~orchestrator.telemetry.metrics.CATALOGUE`): counters and the step-duration histogram
are recorded as things happen; the queue, the paused runs and the store's retry tallies are observable
instruments, read from the :class:`~orchestrator.telemetry.metrics.ReadingsSource` when the periodic reader
collects (every ``OTEL_METRIC_EXPORT_INTERVAL`` milliseconds, 60 s by default, in the reader's thread) and
once more when the recorder is closed, so a worker that stops exports its last counts.

The provider is the recorder's own, not the global one, as for the tracer: a program embedding the
orchestrator may have its own, and tests make several in one process. Temporality, headers, compression
and timeouts are the exporter's standard ``OTEL_EXPORTER_OTLP_*`` settings.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

from orchestrator.telemetry.metrics import (
    AWAITING_REVIEW,
    MODEL_CALLS,
    MODEL_COST,
    MODEL_TOKENS,
    OLDEST_PAUSED_AGE,
    QUEUE_DEPTH,
    RETRIES,
    RUNS_FINISHED,
    RUNS_STARTED,
    STEP_DURATION,
    STEP_SECONDS_BUCKETS,
    STEPS,
    TAKEOVERS,
    TRANSIENT_ERRORS,
    MetricsRecorder,
    ReadingsSource,
)
from orchestrator.telemetry.otel_sdk import make_resource

SHUTDOWN_MILLIS = 10_000
"""How long closing waits for the last export: a collector that is away does not hold a stopping worker."""


class OtelRecorder(MetricsRecorder):
    """Records with OpenTelemetry instruments and exports them over OTLP/HTTP from a background thread."""

    def __init__(self, endpoint: str, service: str, read: ReadingsSource, *,
                 exporter: MetricExporter | None = None) -> None:
        self.endpoint = endpoint
        reader = PeriodicExportingMetricReader(exporter if exporter is not None
                                               else OTLPMetricExporter(endpoint=endpoint))
        buckets = View(instrument_name=STEP_DURATION.otel,
                       aggregation=ExplicitBucketHistogramAggregation(boundaries=STEP_SECONDS_BUCKETS))
        self.provider = MeterProvider(resource=make_resource(service), metric_readers=[reader], views=[buckets])
        meter = self.provider.get_meter("orchestrator")
        self.runs_started = meter.create_counter(RUNS_STARTED.otel, RUNS_STARTED.unit, RUNS_STARTED.description)
        self.runs_finished = meter.create_counter(RUNS_FINISHED.otel, RUNS_FINISHED.unit, RUNS_FINISHED.description)
        self.steps = meter.create_counter(STEPS.otel, STEPS.unit, STEPS.description)
        self.step_seconds = meter.create_histogram(STEP_DURATION.otel, STEP_DURATION.unit, STEP_DURATION.description)
        self.takeovers = meter.create_counter(TAKEOVERS.otel, TAKEOVERS.unit, TAKEOVERS.description)
        self.takeovers.add(0)  # reported from the start, as Prometheus does, so a rate over it begins at 0
        self.model_calls = meter.create_counter(MODEL_CALLS.otel, MODEL_CALLS.unit, MODEL_CALLS.description)
        self.tokens = meter.create_counter(MODEL_TOKENS.otel, MODEL_TOKENS.unit, MODEL_TOKENS.description)
        self.cost = meter.create_counter(MODEL_COST.otel, MODEL_COST.unit, MODEL_COST.description)
        readings = _Callbacks(read)
        meter.create_observable_counter(TRANSIENT_ERRORS.otel, [readings.transient_errors], TRANSIENT_ERRORS.unit,
                                        TRANSIENT_ERRORS.description)
        meter.create_observable_counter(RETRIES.otel, [readings.retries], RETRIES.unit, RETRIES.description)
        meter.create_observable_gauge(QUEUE_DEPTH.otel, [readings.queue_depth], QUEUE_DEPTH.unit,
                                      QUEUE_DEPTH.description)
        meter.create_observable_gauge(AWAITING_REVIEW.otel, [readings.awaiting_review], AWAITING_REVIEW.unit,
                                      AWAITING_REVIEW.description)
        meter.create_observable_gauge(OLDEST_PAUSED_AGE.otel, [readings.oldest_paused_age], OLDEST_PAUSED_AGE.unit,
                                      OLDEST_PAUSED_AGE.description)

    def run_started(self, workflow: str) -> None:
        self.runs_started.add(1, {"workflow": workflow})

    def run_finished(self, workflow: str, status: str) -> None:
        self.runs_finished.add(1, {"workflow": workflow, "status": status})

    def step_finished(self, workflow: str, step: str, status: str, seconds: float) -> None:
        self.steps.add(1, {"workflow": workflow, "status": status})
        self.step_seconds.record(max(0.0, seconds), {"workflow": workflow, "step": step})

    def model_call(self, provider: str, model: str, input_tokens: int, output_tokens: int,
                   cost: float | None) -> None:
        self.model_calls.add(1, {"provider": provider, "model": model})
        self.tokens.add(input_tokens, {"provider": provider, "model": model, "direction": "input"})
        self.tokens.add(output_tokens, {"provider": provider, "model": model, "direction": "output"})
        if cost:
            self.cost.add(cost, {"provider": provider, "model": model})

    def lease_takeover(self) -> None:
        self.takeovers.add(1)

    def close(self) -> None:
        """Collect and export once more, then stop the reader's thread."""
        self.provider.shutdown(timeout_millis=SHUTDOWN_MILLIS)


class _Callbacks:
    """The observable instruments' callbacks. Each gauge asks the database when it is collected (three small
    reads a minute at the default interval); the tallies are in memory."""

    def __init__(self, read: ReadingsSource) -> None:
        self.read = read

    def transient_errors(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.read.retry_tallies().transient_errors)]

    def retries(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.read.retry_tallies().retries)]

    def queue_depth(self, _options: CallbackOptions) -> Iterable[Observation]:
        queue = self.read.queue()
        return [] if queue is None else [Observation(queue.queue_depth)]

    def awaiting_review(self, _options: CallbackOptions) -> Iterable[Observation]:
        queue = self.read.queue()
        return [] if queue is None else [Observation(queue.awaiting_review)]

    def oldest_paused_age(self, _options: CallbackOptions) -> Iterable[Observation]:
        queue = self.read.queue()
        return [] if queue is None else [Observation(queue.oldest_paused_age)]


__all__ = ["OtelRecorder"]
