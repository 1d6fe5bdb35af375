"""A worker's metrics: what the people who operate workers watch.

A worker that runs a backlog on PostgreSQL logs its runs and nothing else; an operator wants rates and
gauges: how many runs and steps finish and how, how long steps take, how deep the queue is, how many runs
wait for a person and since when, how often a run is taken over from a dead executor, how often the
database made the store retry, what the models cost. ``orchestrator worker --metrics-port N`` serves them
for Prometheus; ``--otel`` (or the ``OTEL_EXPORTER_OTLP_*`` variables) pushes the same through OpenTelemetry.

This module is the worker's side of :mod:`orchestrator.telemetry.metrics`: :class:`WorkerMetrics` turns the
worker's events and takeovers into calls on one :class:`~orchestrator.telemetry.metrics.MetricsRecorder`
(a listener: cheap, on the loop, never failing a run), and :class:`StoreReadings` answers what is read when
metrics are collected: the queue from the store (two or three small queries, in the scraping or exporting
thread, never on the worker's event loop) and the retry tallies of :mod:`orchestrator.store.transient`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from orchestrator.spec.events import Event, RunFinished, RunStarted, StepFinished
from orchestrator.store import Store, transient
from orchestrator.store.triage import RunQuery
from orchestrator.telemetry.metrics import (
    MetricsRecorder,
    QueueReadings,
    RecorderFanOut,
    RetryReadings,
)


class WorkerMetrics:
    """The metrics of one worker process: a listener for its events and its takeovers, recording into one or
    more recorders (Prometheus, OpenTelemetry)."""

    def __init__(self, recorders: Sequence[MetricsRecorder]) -> None:
        self.recorder: MetricsRecorder = recorders[0] if len(recorders) == 1 else RecorderFanOut(recorders)
        self.workflows: dict[str, str] = {}
        """The workflow of each run whose execution is in progress here (events name runs, not workflows)."""

    def listen(self, event: Event) -> None:
        """The worker's event listener: record what happened."""
        if isinstance(event, RunStarted):
            self.workflows[event.run_id] = event.workflow
            self.recorder.run_started(event.workflow)
        elif isinstance(event, StepFinished):
            workflow = self.workflows.get(event.run_id, "")
            self.recorder.step_finished(workflow, event.step_id, event.shown_status, event.duration)
            for call in event.model_calls:
                self.recorder.model_call(call.provider, call.model, call.input_tokens, call.output_tokens, call.cost)
        elif isinstance(event, RunFinished):
            self.recorder.run_finished(self.workflows.pop(event.run_id, ""), event.status)

    def took_over(self, _run_id: str) -> None:
        """The worker took an interrupted run over (``on_takeover``)."""
        self.recorder.lease_takeover()

    def close(self) -> None:
        """Stop serving and exporting (an exporter sends its last counts first)."""
        self.recorder.close()


class StoreReadings:
    """What the store and the retry tallies say at the moment metrics are collected."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def retry_tallies(self) -> RetryReadings:
        tally = transient.TALLY
        return RetryReadings(transient_errors=tally.transient_errors, retries=tally.retries)

    def queue(self) -> QueueReadings | None:
        try:
            queued = self.store.triage_runs(RunQuery(status="queued", kind=None, limit=1)).total
            paused = self.store.triage_runs(RunQuery(status="paused", kind="run", limit=1))
            oldest = self.store.triage_runs(RunQuery(status="paused", kind="run", limit=1,
                                                     offset=max(0, paused.total - 1))) if paused.total else None
        except Exception:  # the database is away: the gauges are left out of this collection, the rest reported
            return None
        age = time.time() - oldest.rows[0].run.updated_at if oldest is not None and oldest.rows else 0.0
        return QueueReadings(queue_depth=queued, awaiting_review=paused.total, oldest_paused_age=max(0.0, age))
