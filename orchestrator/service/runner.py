"""Start, resume and continue runs: the functions every face (CLI, TUI, worker, Python) calls.

Each function executes a run to its end or its first pause (the executor scores a run that
succeeded, with its end), then traces an outcome scored incorrect. Waiting for a pause's review
timeout lives here too, once.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.to_thread

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.side_effects import without_side_effects
from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core.errors import LeaseHeldError
from orchestrator.engine.event_loops import run_blocking
from orchestrator.engine.executor import Drain, Executor, new_lease
from orchestrator.engine.leases.holder import executed_by, holder_is_gone
from orchestrator.engine.outcomes import trace_incorrect_outcome
from orchestrator.engine.run_state import RunResult
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.engine.tree import is_child, root_of
from orchestrator.spec.events import EventHook, shielded
from orchestrator.spec.inputs import resolve_inputs
from orchestrator.store import Lease, NewRun, Store
from orchestrator.store.off_loop import store_call, store_calls
from orchestrator.telemetry import get_tracer
from orchestrator.telemetry.listener import TracingListener


def start_run(store: Store, workflow: BoundWorkflow, given_inputs: dict[str, Any], *,
              max_concurrency: int = DEFAULT_CONCURRENCY, on_event: EventHook | None = None,
              otel: str | None = None, reference: Any = None, stream_tokens: bool = False) -> RunResult:
    """Convert inputs, create the run and execute it to its end or first pause.

    ``otel`` (else ``OTEL_EXPORTER_OTLP_ENDPOINT``) exports the run's spans over OTLP/HTTP.
    ``reference`` (JSON data) is stored as the run's reference answer, for an evaluator that reads it.
    ``stream_tokens``: every LLM step's answer reaches ``on_event`` piece by piece as it is generated (``Token``
    events); without it, only the answers of steps with ``stream: true`` do.
    Inside a running event loop, use :func:`start_run_async` (this raises InsideEventLoopError).
    """
    refuse_inside_event_loop("start_run()", "await start_run_async(...)")
    inputs = resolve_inputs(workflow.spec, given_inputs)
    with Tracing(store, otel, on_event) as tracing:
        executor = Executor(store, workflow, max_concurrency=max_concurrency, on_event=tracing.hook,
                            stream_tokens=stream_tokens)
        result = run_blocking(functools.partial(executor.start, inputs, reference=reference))
        tracing.keep(result.run_id)
    trace_incorrect_outcome(store, workflow, result, on_event)
    notify(store, executor, result)
    return result


async def start_run_async(store: Store, workflow: BoundWorkflow, given_inputs: dict[str, Any], *,
                          max_concurrency: int = DEFAULT_CONCURRENCY, on_event: EventHook | None = None,
                          otel: str | None = None, off_loop: bool = True, stream_tokens: bool = False) -> RunResult:
    """:func:`start_run` on the caller's event loop (a notebook, a web server): inputs are checked,
    converted and given their defaults exactly as there, then the run executes without blocking the
    loop; the outcome evaluator runs in a worker thread. ``off_loop``: each store call that may wait is made
    on a worker thread, so a database that makes it wait (a lock, a slow server) does not stop the loop's
    other tasks; the embedded SQLite store's calls are tried on the loop first, without waiting
    (:mod:`orchestrator.store.off_loop`). False keeps them all on the loop, as a loop that runs nothing
    else can afford."""
    inputs = resolve_inputs(workflow.spec, given_inputs)
    with store_calls(off_loop=off_loop, store=store), Tracing(store, otel, on_event) as tracing:
        executor = await store_call(Executor, store, workflow, max_concurrency=max_concurrency, on_event=tracing.hook,
                                    stream_tokens=stream_tokens)
        result = await executor.start(inputs)
        await store_call(tracing.keep, result.run_id)
    await anyio.to_thread.run_sync(trace_incorrect_outcome, store, workflow, result, on_event)
    await anyio.to_thread.run_sync(notify, store, executor, result)
    return result


class InsideEventLoopError(RuntimeError):
    """A blocking entry point was called from a running event loop, where it cannot start its own."""


def refuse_inside_event_loop(call: str, twin: str) -> None:
    """Raise InsideEventLoopError naming the async twin when an event loop runs in this thread.

    A blocking call there would fail deep inside anyio with a message that names neither.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise InsideEventLoopError(f"{call} cannot run inside a running event loop (a notebook cell, an async "
                               f"function); use {twin} instead")


class Tracing:
    """Spans for one execution when telemetry is on (see :mod:`orchestrator.telemetry`); else nothing.

    The run's trace id is stored on the run, so a later resume continues the same trace.
    """

    def __init__(self, store: Store, endpoint: str | None, on_event: EventHook | None,
                 trace_id: str | None = None) -> None:
        self.store = store
        self.tracer = get_tracer(endpoint)
        on_event = shielded(on_event)  # the spans are kept when the caller's own listener raises
        self.listener = TracingListener(self.tracer, trace_id=trace_id, inner=on_event) if self.tracer.enabled \
            else None
        self.hook: EventHook | None = self.listener if self.listener is not None else on_event
        self.stored = trace_id

    def __enter__(self) -> Tracing:
        return self

    def keep(self, run_id: str) -> None:
        """Store the run's trace id if this execution started the trace, and the trace of each child run it
        started (its parent's)."""
        if self.listener is None:
            return
        if self.listener.trace_id and self.listener.trace_id != self.stored:
            self.store.set_trace_id(run_id, self.listener.trace_id)
        for child, trace_id in self.listener.child_traces.items():
            self.store.set_trace_id(child, trace_id)
        self.listener.child_traces.clear()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self.listener is not None:
            if exc is not None:  # stopped from outside: keep this segment's spans and the trace for a resume
                self.listener.interrupt(type(exc).__name__)
                if self.listener.run_id is not None:
                    with contextlib.suppress(Exception):  # the store may be what failed
                        self.keep(self.listener.run_id)
            self.tracer.force_flush()


RESUMABLE = ("paused", "failed", "running", "queued")
"""Stored statuses a run may be continued from (``running`` only once its lease has expired)."""


def claim(store: Store, run_id: str) -> Lease:
    """This process's lease on the run, or LeaseHeldError naming whoever holds it."""
    lease = new_lease(run_id)
    if store.acquire_lease(lease, statuses=RESUMABLE):
        return lease
    run = store.get_run(run_id)
    # a holder killed on this machine holds nothing: its lease is ended now instead of waited out (ending it
    # fails when it has just lapsed by itself); either way, and for a lease of anyone's that lapsed since the
    # first try, a second try takes the run
    if run.status == "running" and run.owner and holder_is_gone(run.owner):
        store.expire_lease(run_id, run.owner)
    if store.acquire_lease(lease, statuses=RESUMABLE):
        return lease
    run = store.get_run(run_id)
    if run.status in ("running", "interrupted") and run.lease_expires_at is not None:
        raise LeaseHeldError(f"run {run_id} is {executed_by(run.owner, run.lease_expires_at)}; wait for it to "
                             "finish, or for the lease to expire if that process died")
    raise LeaseHeldError(f"run {run_id} is {run.status}; there is nothing to continue")


def continue_run(store: Store, run_id: str, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                 on_event: EventHook | None = None, otel: str | None = None, lease: Lease | None = None,
                 stream_tokens: bool = False) -> RunResult:
    """Resume a run from its stored records (after a crash, a pause or a review decision). For a child
    run (a ``workflow:`` step's), its root is resumed, which continues the child: the result is the root's.

    The run's lease is taken first (``lease`` when the caller already holds it, as a worker that
    claimed a queued run does): of any number of processes resuming one run, exactly one
    executes it; the others get LeaseHeldError (exit 2) naming the holder. A run whose executor
    died is taken over once its lease has expired. Completed steps are never executed again.
    """
    refuse_inside_event_loop("continue_run()", "await continue_run_async(...)")
    found = _continuation(store, run_id, lease)
    if isinstance(found, RunResult):
        return found
    with Tracing(store, otel, on_event, trace_id=found.trace_id) as tracing:
        executor = Executor(store, found.workflow, max_concurrency=max_concurrency, on_event=tracing.hook,
                            workflow_id=found.workflow_id, stream_tokens=stream_tokens)
        result = run_blocking(executor.resume, found.lease)
        tracing.keep(found.lease.run_id)
    trace_incorrect_outcome(store, found.workflow, result, on_event)
    notify(store, executor, result)
    return result


async def continue_run_async(store: Store, run_id: str, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                             on_event: EventHook | None = None, otel: str | None = None, lease: Lease | None = None,
                             drain: Drain | None = None, off_loop: bool = True, send_notifications: bool = True,
                             stream_tokens: bool = False) -> RunResult:
    """:func:`continue_run` on the caller's event loop (a worker executing several runs at once, a
    notebook); the outcome evaluator runs in a worker thread. With ``drain`` requested, it raises
    RunHandedBack once the steps in flight are recorded, leaving the run resumable. ``off_loop``: as
    for :func:`start_run_async`. ``send_notifications``: deliver the run's notifications before returning
    (a worker leaves them to its own sender instead)."""
    with store_calls(off_loop=off_loop, store=store):
        found = await store_call(_continuation, store, run_id, lease)
        if isinstance(found, RunResult):
            return found
        with Tracing(store, otel, on_event, trace_id=found.trace_id) as tracing:
            executor = Executor(store, found.workflow, max_concurrency=max_concurrency, on_event=tracing.hook,
                                workflow_id=found.workflow_id, drain=drain, stream_tokens=stream_tokens)
            result = await executor.resume(found.lease)
            await store_call(tracing.keep, found.lease.run_id)
    await anyio.to_thread.run_sync(trace_incorrect_outcome, store, found.workflow, result, on_event)
    if send_notifications:
        await anyio.to_thread.run_sync(notify, store, executor, result)
    return result


def notify(store: Store, executor: Executor, result: RunResult) -> None:
    """Deliver the notifications the run's end just wrote, if its workflow (or the environment) has targets for
    it: at most ``ORCHESTRATOR_NOTIFY_WAIT`` seconds, the rest left pending for a worker
    (:mod:`orchestrator.service.notifications`). Steps are over by now: this never holds a run up."""
    if executor.notices is not None and executor.notices.wants(result.status):
        from orchestrator.service.notifications import send_after_run  # only a run that tells someone sends

        send_after_run(store, result.run_id)


@dataclass(frozen=True, slots=True)
class _Continuation:
    """A run about to be continued: its workflow as stored, and the lease this process holds on it."""

    workflow: BoundWorkflow
    workflow_id: int
    lease: Lease
    trace_id: str | None


def _continuation(store: Store, run_id: str, lease: Lease | None) -> RunResult | _Continuation:
    """What continuing the run needs, or its result when it has already ended.

    A child run is continued through its root: one executor holds the whole tree, so the root is
    continued (under ``lease``'s token, when given) and continues the child from inside."""
    run = store.get_run(run_id)
    if is_child(run):
        run = root_of(store, run_id)
        run_id = run.run_id
        lease = replace(lease, run_id=run_id) if lease is not None else None
    if run.status in ("succeeded", "rejected"):
        return RunResult(run_id, run.status, output=run.output, error=run.error)
    workflow, workflow_id = load_run_workflow(store, run_id)  # a workflow that no longer loads claims nothing
    if run.kind == "experiment":  # an experiment's run never acts, whoever continues it (a worker, a review)
        workflow = without_side_effects(workflow)
    return _Continuation(workflow, workflow_id, lease or claim(store, run_id), run.trace_id)


LONG_REVIEW_WAIT = 5.0
"""A wait for a review timeout longer than this is announced (``on_wait``): a silent wait looks hung."""


def wait_for_review_timeouts(store: Store, result: RunResult, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                             on_event: EventHook | None = None,
                             on_wait: Callable[[RunResult, float], None] | None = None,
                             stream_tokens: bool = False) -> RunResult:
    """An unattended pause with ``review_timeout`` waits here and continues when the default applies.

    ``on_wait(paused result, deadline)`` is told of each wait longer than ``LONG_REVIEW_WAIT`` before it
    begins. An approval claims the run's lease in its own transaction and the run continues under it."""
    while result.status == "paused":
        from orchestrator.service.review import apply_review_timeouts, next_review_deadline  # only a paused run reviews

        workflow, _ = load_run_workflow(store, result.run_id)
        deadline = next_review_deadline(store, result.run_id, workflow.spec)
        if deadline is None:
            return result
        if on_wait is not None and deadline - time.time() > LONG_REVIEW_WAIT:
            on_wait(result, deadline)
        while time.time() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.time())))
            status = store.get_run(result.run_id).status
            if status != "paused":  # someone decided meanwhile and continues the run in their process
                return RunResult(result.run_id, status)
        lease = new_lease(result.run_id)
        decisions = apply_review_timeouts(store, result.run_id, workflow.spec, lease=lease)
        from orchestrator.service.notifications import tell_review_timeouts

        tell_review_timeouts(store, result.run_id, workflow.spec,
                             [(d.path or d.step_id, d.decision) for d in decisions])
        if not decisions:
            return result
        if any(not d.continue_run for d in decisions):  # a rejected run (a rejected tool call goes on)
            return RunResult(result.run_id, "rejected")
        result = continue_run(store, result.run_id, max_concurrency=max_concurrency, on_event=on_event, lease=lease,
                              stream_tokens=stream_tokens)
    return result


def enqueue_run(store: Store, workflow: BoundWorkflow, given_inputs: dict[str, Any], *, reference: Any = None) -> str:
    """Store a ``queued`` run for a worker to claim; inputs are checked now, not later. ``reference`` (JSON
    data, for the outcome evaluator) is stored in the same row, so no worker claims the run without it."""
    inputs = resolve_inputs(workflow.spec, given_inputs)
    workflow_id = store.register_workflow(workflow.name, str(workflow.spec.version), dict(workflow.definition),
                                          workflow.source, workflow.content_hash)
    return store.create_run(NewRun(workflow_id, workflow.name, inputs, status="queued", reference=reference))
