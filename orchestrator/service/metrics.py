"""Prometheus metrics of a worker: what the people who operate workers watch.

A worker that runs a backlog on PostgreSQL logs its runs and nothing else; an operator wants rates
and gauges: how many runs and steps finish and how, how long steps take, how deep the queue is, how many
runs wait for a person and since when, how often a run is taken over from a dead executor, how often the
database made the store retry, what the models cost. ``orchestrator worker --metrics-port N`` serves
them at ``http://HOST:N/metrics`` in the Prometheus text format (``prometheus-client``), names after
Prometheus conventions (``orchestrator_..._total`` for counters, ``_seconds`` for durations).

Counters and the step-duration histogram are fed by the worker's events (a listener: cheap, on the
loop, never failing a run). The gauges (queue depth, paused runs, the oldest paused run's age) and the
store's retry tallies are read when Prometheus scrapes, from the store (two small queries per scrape,
off the worker's event loop, in the metrics server's thread) and from :mod:`orchestrator.store.transient`.
Each worker has its own registry, so two workers in one test process never share counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from orchestrator.spec.events import Event, RunFinished, RunStarted, StepFinished
from orchestrator.store import Store, transient
from orchestrator.store.triage import RunQuery

STEP_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
"""From a cached lookup (milliseconds) to a long model call or tool (minutes)."""


class WorkerMetrics:
    """The metrics of one worker process: a listener for its events, and a collector read at each scrape."""

    def __init__(self, store: Store) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.store = store
        self.registry = CollectorRegistry()
        self.runs_started = Counter("orchestrator_runs_started", "Executions of runs started (a queued run's, a "
                                    "taken-over run's, a continued one's)", ["workflow"], registry=self.registry)
        self.runs_finished = Counter("orchestrator_runs_finished", "Executions of runs that ended or paused",
                                     ["workflow", "status"], registry=self.registry)
        self.steps = Counter("orchestrator_steps", "Step attempts by how they ended (instances and iterations "
                             "each count)", ["workflow", "status"], registry=self.registry)
        self.step_seconds = Histogram("orchestrator_step_duration_seconds", "How long a step attempt took",
                                      ["workflow"], buckets=STEP_SECONDS_BUCKETS, registry=self.registry)
        self.takeovers = Counter("orchestrator_lease_takeovers", "Interrupted runs this worker took over (their "
                                 "executor died)", registry=self.registry)
        self.model_calls = Counter("orchestrator_model_calls", "Model calls made by steps, judges and ctx.llm",
                                   ["provider", "model"], registry=self.registry)
        self.tokens = Counter("orchestrator_model_tokens", "Tokens of model calls", ["provider", "model",
                                                                                        "direction"],
                              registry=self.registry)
        self.cost = Counter("orchestrator_model_cost_dollars", "What model calls cost, where the price is known",
                            ["provider", "model"], registry=self.registry)
        self.workflows: dict[str, str] = {}
        """The workflow of each run whose execution is in progress here (events name runs, not workflows)."""
        self.registry.register(_StoreGauges(store))

    def listen(self, event: Event) -> None:
        """The worker's event listener: count what happened."""
        if isinstance(event, RunStarted):
            self.workflows[event.run_id] = event.workflow
            self.runs_started.labels(event.workflow).inc()
        elif isinstance(event, StepFinished):
            workflow = self.workflows.get(event.run_id, "")
            self.steps.labels(workflow, event.shown_status).inc()
            self.step_seconds.labels(workflow).observe(max(0.0, event.duration))
            for call in event.model_calls:
                self.model_calls.labels(call.provider, call.model).inc()
                self.tokens.labels(call.provider, call.model, "input").inc(call.input_tokens)
                self.tokens.labels(call.provider, call.model, "output").inc(call.output_tokens)
                if call.cost:
                    self.cost.labels(call.provider, call.model).inc(call.cost)
        elif isinstance(event, RunFinished):
            self.runs_finished.labels(self.workflows.pop(event.run_id, ""), event.status).inc()

    def took_over(self, _run_id: str) -> None:
        """The worker took an interrupted run over (``on_takeover``)."""
        self.takeovers.inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread; the server (``shutdown()`` stops it)."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server


class _StoreGauges:
    """A custom collector: what the store and the retry tallies say at the moment of a scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def describe(self) -> Iterable[Any]:
        return []  # collected at scrape time only: nothing is read from the store on registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        retries = transient.TALLY
        yield CounterMetricFamily("orchestrator_store_transient_errors", "Transient database errors the store "
                                  "met (a lost connection, a restart, a lock)", value=retries.transient_errors)
        yield CounterMetricFamily("orchestrator_store_retries", "Store calls tried again after a transient error",
                                  value=retries.retries)
        try:
            queued = self.store.triage_runs(RunQuery(status="queued", kind=None, limit=1)).total
            paused = self.store.triage_runs(RunQuery(status="paused", kind="run", limit=1))
            oldest = self.store.triage_runs(RunQuery(status="paused", kind="run", limit=1,
                                                     offset=max(0, paused.total - 1))) if paused.total else None
        except Exception:  # the database is away: the gauges are left out of this scrape, the rest is served
            return
        yield GaugeMetricFamily("orchestrator_queue_depth", "Runs queued for a worker", value=queued)
        yield GaugeMetricFamily("orchestrator_runs_awaiting_review", "Runs paused for a person", value=paused.total)
        age = time.time() - oldest.rows[0].run.updated_at if oldest is not None and oldest.rows else 0.0
        yield GaugeMetricFamily("orchestrator_oldest_paused_run_age_seconds", "How long the run paused the "
                                "longest has waited for a person", value=max(0.0, age))
