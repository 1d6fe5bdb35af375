"""A worker's metrics: one catalogue, one recording interface, two ways out (Prometheus and OpenTelemetry).

Operators watch a worker as rates and gauges: runs and steps and how they end, step latency, queue depth,
runs waiting for a person and since when, lease takeovers, database retries, what the models cost. The
worker records each thing once, through :class:`MetricsRecorder`; where it goes is the recorder's business:

* :class:`~orchestrator.telemetry.prometheus_metrics.PrometheusRecorder` serves them for a scrape
  (``orchestrator worker --metrics-port``), named after Prometheus conventions (``orchestrator_..._total``,
  ``_seconds``);
* :class:`~orchestrator.telemetry.otel_metrics.OtelRecorder` pushes them over OTLP/HTTP with the
  OpenTelemetry metrics SDK (``--otel``), named after OpenTelemetry's (dotted, no ``_total``, the unit beside
  the name rather than in it);
* :class:`RecorderFanOut` feeds both when both are asked for.

:func:`orchestrator.telemetry.otel_recorder` makes the OpenTelemetry one when telemetry is configured.

Both take their names, help, units and labels from :data:`CATALOGUE`, so the two never drift apart. What is
read rather than recorded (the queue, the paused runs, the store's retry tallies) comes from a
:class:`ReadingsSource` the caller provides, called when a scrape or an export collects: this layer knows no
store. Nothing here imports ``prometheus_client`` or ``opentelemetry``: the recorders do, when made.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

MetricKind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True)
class MetricInfo:
    """One metric as both exports name it."""

    prometheus: str
    """The Prometheus name; a counter's samples get ``_total`` added (``orchestrator_runs_started_total``)."""
    otel: str
    """The OpenTelemetry instrument name (``orchestrator.runs.started``)."""
    unit: str
    """UCUM unit for OpenTelemetry (``s``, ``{run}``); Prometheus carries it in the name instead."""
    kind: MetricKind
    description: str
    labels: tuple[str, ...] = ()
    """Label names in Prometheus, attribute keys in OpenTelemetry: the same."""


RUNS_STARTED = MetricInfo("orchestrator_runs_started", "orchestrator.runs.started", "{run}", "counter",
                          "Executions of runs started (a queued run's, a taken-over run's, a continued one's)",
                          ("workflow",))
RUNS_FINISHED = MetricInfo("orchestrator_runs_finished", "orchestrator.runs.finished", "{run}", "counter",
                           "Executions of runs that ended or paused", ("workflow", "status"))
STEPS = MetricInfo("orchestrator_steps", "orchestrator.steps", "{attempt}", "counter",
                   "Step attempts by how they ended (instances and iterations each count)", ("workflow", "status"))
STEP_DURATION = MetricInfo("orchestrator_step_duration_seconds", "orchestrator.step.duration", "s", "histogram",
                           "How long a step attempt took", ("workflow", "step"))
QUEUE_DEPTH = MetricInfo("orchestrator_queue_depth", "orchestrator.queue.depth", "{run}", "gauge",
                         "Runs queued for a worker")
AWAITING_REVIEW = MetricInfo("orchestrator_runs_awaiting_review", "orchestrator.runs.awaiting_review", "{run}",
                             "gauge", "Runs paused for a person")
OLDEST_PAUSED_AGE = MetricInfo("orchestrator_oldest_paused_run_age_seconds", "orchestrator.oldest_paused_run.age",
                               "s", "gauge", "How long the run paused the longest has waited for a person")
TAKEOVERS = MetricInfo("orchestrator_lease_takeovers", "orchestrator.lease.takeovers", "{run}", "counter",
                       "Interrupted runs this worker took over (their executor died)")
TRANSIENT_ERRORS = MetricInfo("orchestrator_store_transient_errors", "orchestrator.store.transient_errors",
                              "{error}", "counter",
                              "Transient database errors the store met (a lost connection, a restart, a lock)")
RETRIES = MetricInfo("orchestrator_store_retries", "orchestrator.store.retries", "{retry}", "counter",
                     "Store calls tried again after a transient error")
MODEL_CALLS = MetricInfo("orchestrator_model_calls", "orchestrator.model.calls", "{call}", "counter",
                         "Model calls made by steps, judges and ctx.llm", ("provider", "model"))
MODEL_TOKENS = MetricInfo("orchestrator_model_tokens", "orchestrator.model.tokens", "{token}", "counter",
                          "Tokens of model calls", ("provider", "model", "direction"))
MODEL_COST = MetricInfo("orchestrator_model_cost_dollars", "orchestrator.model.cost", "USD", "counter",
                        "What model calls cost, where the price is known", ("provider", "model"))

CATALOGUE: tuple[MetricInfo, ...] = (RUNS_STARTED, RUNS_FINISHED, STEPS, STEP_DURATION, QUEUE_DEPTH, AWAITING_REVIEW,
                                     OLDEST_PAUSED_AGE, TAKEOVERS, TRANSIENT_ERRORS, RETRIES, MODEL_CALLS,
                                     MODEL_TOKENS, MODEL_COST)
"""Every metric a worker reports, in the order the docs list them."""

STEP_SECONDS_BUCKETS: Sequence[float] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                                         600)
"""From a cached lookup (milliseconds) to a long model call or tool (minutes)."""


@dataclass(frozen=True)
class QueueReadings:
    """What the database says about the queue at the moment of a collection."""

    queue_depth: int
    awaiting_review: int
    oldest_paused_age: float
    """Seconds; 0 when no run is paused."""


@dataclass(frozen=True)
class RetryReadings:
    """This process's store retry tallies so far."""

    transient_errors: int
    retries: int


class ReadingsSource(Protocol):
    """What is read, not recorded, when metrics are collected (a scrape, an export)."""

    def retry_tallies(self) -> RetryReadings:
        """Cheap: counters kept in memory."""

    def queue(self) -> QueueReadings | None:
        """Asks the database; None when it did not answer (the gauges are then left out of that collection,
        the rest is reported)."""


class MetricsRecorder(ABC):
    """Where a worker records what happened; see the module docstring. Every method is cheap and never raises
    into the worker: the run goes on whatever the metrics backend does."""

    @abstractmethod
    def run_started(self, workflow: str) -> None:
        """An execution of a run of ``workflow`` began."""

    @abstractmethod
    def run_finished(self, workflow: str, status: str) -> None:
        """An execution ended with the run's ``status`` (``succeeded``, ``failed``, ``paused``...)."""

    @abstractmethod
    def step_finished(self, workflow: str, step: str, status: str, seconds: float) -> None:
        """A step attempt ended with ``status`` after ``seconds``."""

    @abstractmethod
    def model_call(self, provider: str, model: str, input_tokens: int, output_tokens: int,
                   cost: float | None) -> None:
        """A model call was made; ``cost`` None where its price is unknown."""

    @abstractmethod
    def lease_takeover(self) -> None:
        """The worker took over a run whose executor died."""

    @abstractmethod
    def close(self) -> None:
        """Stop reporting (a server stops serving; an exporter sends what it has first)."""


class RecorderFanOut(MetricsRecorder):
    """Records into every recorder it is given (Prometheus and OpenTelemetry at once)."""

    def __init__(self, recorders: Sequence[MetricsRecorder]) -> None:
        self.recorders = tuple(recorders)

    def run_started(self, workflow: str) -> None:
        for recorder in self.recorders:
            recorder.run_started(workflow)

    def run_finished(self, workflow: str, status: str) -> None:
        for recorder in self.recorders:
            recorder.run_finished(workflow, status)

    def step_finished(self, workflow: str, step: str, status: str, seconds: float) -> None:
        for recorder in self.recorders:
            recorder.step_finished(workflow, step, status, seconds)

    def model_call(self, provider: str, model: str, input_tokens: int, output_tokens: int,
                   cost: float | None) -> None:
        for recorder in self.recorders:
            recorder.model_call(provider, model, input_tokens, output_tokens, cost)

    def lease_takeover(self) -> None:
        for recorder in self.recorders:
            recorder.lease_takeover()

    def close(self) -> None:
        for recorder in self.recorders:
            recorder.close()


__all__ = ["CATALOGUE", "STEP_SECONDS_BUCKETS", "MetricInfo", "MetricsRecorder", "QueueReadings", "ReadingsSource",
           "RecorderFanOut", "RetryReadings"]
