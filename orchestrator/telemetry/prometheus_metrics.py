"""The Prometheus side of a worker's metrics: a registry of its own, served at ``/metrics`` for a scrape.

Counters and the histogram are updated as things happen; the gauges and the store's retry tallies are read
from the :class:`~orchestrator.telemetry.metrics.ReadingsSource` when Prometheus scrapes, in the metrics
server's thread. Each recorder has its own registry, so two workers in one process never share counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

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
    MetricInfo,
    MetricsRecorder,
    ReadingsSource,
)


def _counter(info: MetricInfo, registry: CollectorRegistry) -> Counter:
    return Counter(info.prometheus, info.description, info.labels, registry=registry)


class PrometheusRecorder(MetricsRecorder):
    """Records into a Prometheus registry; :meth:`serve` exposes it over HTTP."""

    def __init__(self, read: ReadingsSource) -> None:
        self.registry = CollectorRegistry()
        self.runs_started = _counter(RUNS_STARTED, self.registry)
        self.runs_finished = _counter(RUNS_FINISHED, self.registry)
        self.steps = _counter(STEPS, self.registry)
        self.step_seconds = Histogram(STEP_DURATION.prometheus, STEP_DURATION.description, STEP_DURATION.labels,
                                      buckets=STEP_SECONDS_BUCKETS, registry=self.registry)
        self.takeovers = _counter(TAKEOVERS, self.registry)
        self.model_calls = _counter(MODEL_CALLS, self.registry)
        self.tokens = _counter(MODEL_TOKENS, self.registry)
        self.cost = _counter(MODEL_COST, self.registry)
        self.registry.register(_ReadAtScrape(read))
        self.server: Any = None

    def run_started(self, workflow: str) -> None:
        self.runs_started.labels(workflow).inc()

    def run_finished(self, workflow: str, status: str) -> None:
        self.runs_finished.labels(workflow, status).inc()

    def step_finished(self, workflow: str, step: str, status: str, seconds: float) -> None:
        self.steps.labels(workflow, status).inc()
        self.step_seconds.labels(workflow, step).observe(max(0.0, seconds))

    def model_call(self, provider: str, model: str, input_tokens: int, output_tokens: int,
                   cost: float | None) -> None:
        self.model_calls.labels(provider, model).inc()
        self.tokens.labels(provider, model, "input").inc(input_tokens)
        self.tokens.labels(provider, model, "output").inc(output_tokens)
        if cost:
            self.cost.labels(provider, model).inc(cost)

    def lease_takeover(self) -> None:
        self.takeovers.inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread until :meth:`close`; OSError when the port
        cannot be bound."""
        self.server, _thread = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _ReadAtScrape(Collector):
    """What the readings say at the moment of a scrape: the retry tallies, and the gauges when the database
    answered (otherwise they are left out of that scrape and the rest is served)."""

    def __init__(self, read: ReadingsSource) -> None:
        self.read = read

    def describe(self) -> Iterable[Any]:
        return []  # collected at scrape time only: nothing is read on registration

    def collect(self) -> Iterator[Any]:
        tallies = self.read.retry_tallies()
        yield CounterMetricFamily(TRANSIENT_ERRORS.prometheus, TRANSIENT_ERRORS.description,
                                  value=tallies.transient_errors)
        yield CounterMetricFamily(RETRIES.prometheus, RETRIES.description, value=tallies.retries)
        queue = self.read.queue()
        if queue is None:
            return
        yield GaugeMetricFamily(QUEUE_DEPTH.prometheus, QUEUE_DEPTH.description, value=queue.queue_depth)
        yield GaugeMetricFamily(AWAITING_REVIEW.prometheus, AWAITING_REVIEW.description, value=queue.awaiting_review)
        yield GaugeMetricFamily(OLDEST_PAUSED_AGE.prometheus, OLDEST_PAUSED_AGE.description,
                                value=queue.oldest_paused_age)


__all__ = ["PrometheusRecorder"]
