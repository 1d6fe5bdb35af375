"""A private in-memory store for probing replays: whether a plan's replay would execute anything new.

A Shapley game asks for 2^n coalitions; most of them, once a few replays have run, need no step executed
at all (every unit's output under the plan is the original's or a replay's, from the cache). Such a
coalition is computed by running its replay against this scratch store with executing forbidden: the
replay engine's steps answer from the cache or stop the probe. Only a plan whose probe stopped is replayed
against the real store, as a run of its own; the rest leave nothing behind (the scratch store is dropped
with its engine, and opened anew every :data:`PROBES_PER_STORE` probes so its memory stays bounded).

Pure bookkeeping over :func:`~orchestrator.store.open_store`: the engine decides what a probe runs.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.spec.model import RetryPolicy
from orchestrator.store import Store, open_store

PROBES_PER_STORE = 256
"""Probe runs one scratch store holds before the next probe opens a fresh one."""


def probing_workflow(workflow: BoundWorkflow) -> BoundWorkflow:
    """The replay workflow as a probe runs it: no gates (a verdict never changes a replay's output, and a
    judge could call a model) and one attempt per step (a stopped probe is no error worth a backoff)."""
    return workflow.with_steps({
        sid: replace(step, gates=(), spec=step.spec.model_copy(update={"retry": RetryPolicy()}))
        for sid, step in workflow.steps.items()})


class ScratchStore:
    """One engine's in-memory store for probe runs, with the workflow registered in it."""

    def __init__(self, workflow: BoundWorkflow) -> None:
        self.workflow = workflow
        self._store: Store | None = None
        self._workflow_id = 0
        self._runs = 0
        self._in_flight = 0

    def open(self) -> tuple[Store, int]:
        """The store for the next probe run and the workflow's id in it (a fresh store once the current one
        holds :data:`PROBES_PER_STORE` runs and no probe is using it)."""
        if self._store is not None and self._runs >= PROBES_PER_STORE and self._in_flight == 0:
            self._store.close()
            self._store = None
        if self._store is None:
            self._store = open_store("memory://")
            self._workflow_id = self._store.register_workflow(
                self.workflow.name, str(self.workflow.spec.version), dict(self.workflow.definition),
                self.workflow.source, self.workflow.content_hash)
            self._runs = 0
        self._runs += 1
        self._in_flight += 1
        return self._store, self._workflow_id

    def done(self) -> None:
        """A probe run ended (its records may be dropped with the store)."""
        self._in_flight -= 1
