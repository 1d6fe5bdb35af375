"""Start, resume and continue runs: the functions every face (CLI, TUI, worker, Python) calls.

Each function executes a run to its end or its first pause, then finishes it (scores the
outcome of a succeeded run). Waiting for a pause's review timeout lives here too, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from orchestrator.binding import BoundWorkflow
from orchestrator.errors import LeaseHeldError, LeaseLostError, SpecError, StoreMismatchError
from orchestrator.events import EventHook
from orchestrator.executor import Executor, new_lease
from orchestrator.inputs import resolve_inputs
from orchestrator.outcomes import score_outcome
from orchestrator.review import apply_review_timeouts, next_review_deadline
from orchestrator.runstate import RunResult
from orchestrator.store import Lease, Store
from orchestrator.stored_workflow import load_run_workflow
from orchestrator.telemetry import get_tracer
from orchestrator.telemetry.listener import TracingListener
from orchestrator.threads import DEFAULT_CONCURRENCY


def start_run(store: Store, workflow: BoundWorkflow, given_inputs: dict[str, Any], *,
              max_concurrency: int = DEFAULT_CONCURRENCY, on_event: EventHook | None = None,
              otel: str | None = None) -> RunResult:
    """Convert inputs, create the run and execute it to its end or first pause.

    ``otel`` (else ``OTEL_EXPORTER_OTLP_ENDPOINT``) exports the run's spans over OTLP/HTTP.
    """
    inputs = resolve_inputs(workflow.spec, given_inputs)
    with Tracing(store, otel, on_event) as tracing:
        executor = Executor(store, workflow, max_concurrency=max_concurrency, on_event=tracing.hook)
        result = anyio.run(executor.start, inputs)
        tracing.keep(result.run_id)
    score_outcome(store, workflow, result, on_event)
    return result


class Tracing:
    """Spans for one execution when telemetry is on (see :mod:`orchestrator.telemetry`); else nothing.

    The run's trace id is stored on the run, so a later resume continues the same trace.
    """

    def __init__(self, store: Store, endpoint: str | None, on_event: EventHook | None,
                 trace_id: str | None = None) -> None:
        self.store = store
        self.tracer = get_tracer(endpoint)
        self.listener = TracingListener(self.tracer, trace_id=trace_id, inner=on_event) if self.tracer.enabled \
            else None
        self.hook: EventHook | None = self.listener if self.listener is not None else on_event
        self.stored = trace_id

    def __enter__(self) -> Tracing:
        return self

    def keep(self, run_id: str) -> None:
        """Store the run's trace id if this execution started the trace."""
        if self.listener is not None and self.listener.trace_id and self.listener.trace_id != self.stored:
            self.store.set_trace_id(run_id, self.listener.trace_id)

    def __exit__(self, *exc: object) -> None:
        if self.listener is not None:
            self.tracer.force_flush()


RESUMABLE = ("paused", "failed", "running", "queued")
"""Stored statuses a run may be continued from (``running`` only once its lease has expired)."""


def claim(store: Store, run_id: str) -> Lease:
    """This process's lease on the run, or LeaseHeldError naming whoever holds it."""
    lease = new_lease(run_id)
    if store.acquire_lease(lease, statuses=RESUMABLE):
        return lease
    run = store.get_run(run_id)
    if run.status in ("running", "interrupted") and run.lease_expires_at is not None:
        left = max(0.0, run.lease_expires_at - time.time())
        raise LeaseHeldError(f"run {run_id} is being executed by {run.owner} (its lease runs {left:.1f} s more); "
                             "wait for it to finish, or for the lease to expire if that process died")
    raise LeaseHeldError(f"run {run_id} is {run.status}; there is nothing to continue")


def continue_run(store: Store, run_id: str, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                 on_event: EventHook | None = None, otel: str | None = None, lease: Lease | None = None) -> RunResult:
    """Resume a run from its stored records (after a crash, a pause or a review decision).

    The run's lease is taken first (``lease`` when the caller already holds it, as a worker that
    claimed a queued run does): of any number of processes resuming one run, exactly one
    executes it; the others get LeaseHeldError (exit 2) naming the holder. A run whose executor
    died is taken over once its lease has expired. Completed steps are never executed again.
    """
    run = store.get_run(run_id)
    if run.status in ("succeeded", "rejected"):
        return RunResult(run_id, run.status, output=run.output, error=run.error)
    workflow, workflow_id = load_run_workflow(store, run_id)  # a workflow that no longer loads claims nothing
    lease = lease or claim(store, run_id)
    with Tracing(store, otel, on_event, trace_id=run.trace_id) as tracing:
        executor = Executor(store, workflow, max_concurrency=max_concurrency, on_event=tracing.hook,
                            workflow_id=workflow_id)
        result = anyio.run(executor.resume, lease)
        tracing.keep(run_id)
    score_outcome(store, workflow, result, on_event)
    return result


def wait_for_review_timeouts(store: Store, result: RunResult, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                             on_event: EventHook | None = None) -> RunResult:
    """An unattended pause with ``review_timeout`` waits here and continues when the default applies."""
    while result.status == "paused":
        workflow, _ = load_run_workflow(store, result.run_id)
        deadline = next_review_deadline(store, result.run_id, workflow.spec)
        if deadline is None:
            return result
        while time.time() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.time())))
            status = store.get_run(result.run_id).status
            if status != "paused":  # someone decided meanwhile and continues the run in their process
                return RunResult(result.run_id, status)
        decisions = apply_review_timeouts(store, result.run_id, workflow.spec)
        if not decisions:
            return result
        if any(d.decision == "reject" for d in decisions):
            return RunResult(result.run_id, "rejected")
        result = continue_run(store, result.run_id, max_concurrency=max_concurrency, on_event=on_event)
    return result


def enqueue_run(store: Store, workflow: BoundWorkflow, given_inputs: dict[str, Any]) -> str:
    """Store a ``queued`` run for a worker to claim; inputs are checked now, not later."""
    inputs = resolve_inputs(workflow.spec, given_inputs)
    workflow_id = store.register_workflow(workflow.name, str(workflow.spec.version), dict(workflow.definition),
                                          workflow.source, workflow.content_hash)
    return store.create_run(workflow_id, workflow.name, inputs, status="queued", owner=None)


def _decide_timed_out_reviews(store: Store) -> None:
    """Paused runs whose review timed out are decided, and queued again when they continue."""
    for paused in store.list_runs(status="paused"):
        try:
            workflow, _ = load_run_workflow(store, paused.run_id)
            decided = apply_review_timeouts(store, paused.run_id, workflow.spec)
        except (SpecError, StoreMismatchError):
            continue
        if decided and store.get_run(paused.run_id).status == "running":
            store.set_run_status(paused.run_id, "queued", expect=["running"])


def recover_one(store: Store, lease: Lease) -> str | None:
    """Take over one interrupted run (its executor died, whoever started it), as DBOS recovers pending
    workflows: the same path as a resume, so completed steps are not executed again."""
    for run in store.list_runs(status="interrupted", kind=None, limit=20):
        if store.acquire_lease(replace(lease, run_id=run.run_id), statuses=("running",)):
            return run.run_id
    return None


def work(store: Store, *, once: bool = False, poll: float = 1.0, max_runs: int | None = None,
         max_concurrency: int = DEFAULT_CONCURRENCY, on_event: EventHook | None = None,
         on_result: Callable[[RunResult], None] | None = None, recover: bool = True) -> int:
    """Claim and execute queued runs until the queue is empty (``once``) or ``max_runs`` are done.

    Several workers may share one database (PostgreSQL, or a SQLite file on one host): each run
    is claimed by exactly one of them. With ``recover``, workers also take over interrupted runs
    (a process died mid-run). Paused runs whose review timed out are decided here too.
    """
    done = 0
    while max_runs is None or done < max_runs:
        lease = new_lease()
        run_id = store.claim_queued_run(lease) or (recover_one(store, lease) if recover else None)
        if run_id is None:
            _decide_timed_out_reviews(store)
            if store.list_runs(status="queued", limit=1):
                continue
            if once:
                break
            time.sleep(poll)
            continue
        lease = replace(lease, run_id=run_id)
        try:
            result = continue_run(store, run_id, max_concurrency=max_concurrency, on_event=on_event, lease=lease)
        except (SpecError, StoreMismatchError) as exc:
            store.end_lease(lease, "failed", error=str(exc))
            result = RunResult(run_id, "failed", error=str(exc))
        except LeaseLostError:
            continue  # this worker stalled and another took the run over; it wrote nothing more
        done += 1
        if on_result is not None:
            on_result(result)
    return done
