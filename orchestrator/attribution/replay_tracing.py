"""Replay runs as traces of their own, when telemetry is on (see :mod:`orchestrator.telemetry`).

A replay (a fork, a counterfactual, a Shapley coalition, a child run's replay inside one) is a new run, so
it gets the span tree a run gets (run span, step spans with their gates, model and tool calls) in a new
trace: it never adds spans to the original's trace, which stays what the original run did. Its run span
names what it replays (:class:`~orchestrator.telemetry.ReplayOf`), and its trace id is stored on the
replay run as a run's is.

One replay engine executes all its replays through one executor; this hook routes each event to the
listener of the replay run it belongs to, so replays of one engine never share a trace.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace

from orchestrator.spec.events import Event, EventHook, RunStarted
from orchestrator.store import Store
from orchestrator.telemetry import ReplayOf, StepSpan, get_tracer
from orchestrator.telemetry.listener import TracingListener

_within: ContextVar[StepSpan | None] = ContextVar("orchestrator_replay_within", default=None)
"""The step span of a parent's replay whose unit is replaying its child run, in the task doing it."""


class ReplayTracing:
    """The tracing of one attribution's (or one fork's) replay runs; does nothing when telemetry is off.

    Created before any replay runs, so a telemetry setting that cannot work (no ``otel`` extra, a bad
    ``--otel`` URL) stops the command at once with TelemetryError, as it stops ``run``."""

    def __init__(self, store: Store, endpoint: str | None) -> None:
        self.store = store
        self.tracer = get_tracer(endpoint)
        self._listeners: dict[str, TracingListener] = {}
        self._lock = threading.Lock()

    @property
    def hook(self) -> EventHook | None:
        """The replay executor's event hook: None when telemetry is off, so the executor reports nothing."""
        return self if self.tracer.enabled else None

    def __call__(self, event: Event) -> None:
        run_id = getattr(event, "run_id", None)
        with self._lock:
            listener = self._listeners.get(run_id) if run_id is not None else None
        if listener is not None:
            listener(event)

    @contextlib.contextmanager
    def replay(self, run_id: str, workflow: str, steps: Sequence[str], replay_of: ReplayOf) -> Iterator[None]:
        """Trace the replay run ``run_id`` while the block executes it: its run span starts here (the executor
        reports no start for a run it is handed) and ends with the run's finish, or here if the block raises."""
        if not self.tracer.enabled:
            yield
            return
        listener = TracingListener(self.tracer, replay_of=replace(replay_of, within=_within.get()))
        with self._lock:
            self._listeners[run_id] = listener
        listener(RunStarted(run_id=run_id, workflow=workflow, steps=tuple(steps)))
        try:
            yield
        except BaseException as exc:
            listener.interrupt(type(exc).__name__)
            raise
        finally:
            with self._lock:
                self._listeners.pop(run_id, None)
            if listener.trace_id:
                with contextlib.suppress(Exception):  # telemetry never fails a replay
                    self.store.set_trace_id(run_id, listener.trace_id)
            self.tracer.force_flush()

    @contextlib.contextmanager
    def within(self, run_id: str, unit: str) -> Iterator[None]:
        """A child run's replay started in the block runs for ``unit`` of the replay run ``run_id``: its run
        span links to that unit's step span, so a backend leads from one trace to the other."""
        with self._lock:
            listener = self._listeners.get(run_id)
        span = None if listener is None else next(
            (s for (r, u, _), s in reversed(listener.steps.items()) if r == run_id and u == unit), None)
        token = _within.set(span)
        try:
            yield
        finally:
            _within.reset(token)
