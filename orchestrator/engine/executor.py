"""The scheduler: run ready steps concurrently on anyio until the run ends or pauses.

Failures come back as values (:class:`~orchestrator.engine.run_state.StepOutcome`), never as an
ExceptionGroup, so one bad step cannot tear down its independent siblings. A step whose gate
failed pauses only its descendants; independent branches finish. Running one step is
:mod:`orchestrator.engine.attempt`'s job, reading and writing the run's state is
:mod:`orchestrator.engine.run_state`'s; a run that succeeded is scored by the workflow's evaluator
before its end is written, under its lease (:mod:`orchestrator.engine.outcomes`).
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import os
import secrets
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, LeaseLostError, StoreError, StoreMismatchError
from orchestrator.engine.attempt import RunContext, StepRunner
from orchestrator.engine.children import ChildRuns
from orchestrator.engine.group_commit import GroupCommit
from orchestrator.engine.leases.holder import this_holder
from orchestrator.engine.leases.keeper import LeaseKeeper, keep_lease
from orchestrator.engine.looping import LoopRunner, LoopState
from orchestrator.engine.mapping import MapRunner, MapState, max_items
from orchestrator.engine.notices import RunNotices
from orchestrator.engine.outcomes import Scoring, score_run, scoring_event
from orchestrator.engine.run_state import (
    FAIR_SHARE_SECONDS,
    Done,
    PriorState,
    RunHandedBack,
    RunResult,
    StepOutcome,
    earliest,
    finish_run,
    pause_deadline,
)
from orchestrator.engine.tree import child_pause_deadline
from orchestrator.engine.waiting import WaitingUnits
from orchestrator.spec.events import EventHook, RunFinished, RunStarted, shielded
from orchestrator.spec.records import PATH_SEPARATOR, StepRecordView, parse_unit, path_head
from orchestrator.store import Lease, NewNotification, NewRun, NewStepRecord, RunEnd, Store
from orchestrator.store.base import lease_lost
from orchestrator.store.off_loop import store_call

DEFAULT_LEASE_SECONDS = 15.0
"""How long a run's lease lasts without a heartbeat (renewed every third of it): a process that
dies mid-run is taken over (by ``resume`` or a worker) at most this long after its last renewal."""


MAX_LEASE_SECONDS = 86400.0
"""The longest lease: a run whose process was killed waits out its lease before anyone takes it over,
so a lease that never expires (``inf``) would keep it stuck for ever."""


def owner_token() -> str:
    """Who executes a run: ``host:pid`` and, where known, the process's start time and machine
    (:mod:`orchestrator.engine.leases.holder`), so a ``resume`` on the same machine knows when it died."""
    return this_holder()


def lease_seconds() -> float:
    """``ORCHESTRATOR_LEASE_SECONDS``, else the default."""
    text = os.environ.get("ORCHESTRATOR_LEASE_SECONDS")
    try:
        value = float(text) if text else DEFAULT_LEASE_SECONDS
    except ValueError:
        raise InputError(f"ORCHESTRATOR_LEASE_SECONDS={text!r} is not a number of seconds") from None
    if not 0 < value <= MAX_LEASE_SECONDS:  # inf and nan included: a lease that never expires strands a killed run
        raise InputError(f"ORCHESTRATOR_LEASE_SECONDS={text!r} must be a number of seconds above 0 and at most "
                         f"{MAX_LEASE_SECONDS:g} (a day)")
    return value


def new_lease(run_id: str = "") -> Lease:
    """A fresh lease for this process (``run_id`` empty when the run is yet to be created). Whatever executes
    takes one first, so the execution settings are checked here, before anything is written: a bad one is an
    InputError (exit 2) rather than a step failing halfway through a run."""
    max_items()
    return Lease(run_id, owner_token(), secrets.token_hex(8), lease_seconds(), issued_at=time.monotonic())


def release_lease(store: Store, lease: Lease) -> None:
    """Hand a run's lease back without ending the run, when its execution stops early (Ctrl-C, a
    worker's SIGTERM drain, a quitting TUI): the lease expires now, so the run shows as
    ``interrupted`` and ``resume`` or any worker takes it over at once, not after the lease's duration.
    Nothing happens when the lease was already taken over or ended."""
    store.hand_back_lease(lease)


class Drain:
    """A request, shared by the executions of one process, to wind down: start no new step, let
    the steps in flight finish and be recorded, then hand each unfinished run's lease back."""

    def __init__(self) -> None:
        self.requested = False

    def request(self) -> None:
        self.requested = True


@dataclass
class _Handoff:
    """The next step a finishing step's task runs itself instead of starting a new task."""

    step_id: str
    first_attempt: int
    feedback: list[Any]


class Executor:
    """Runs one bound workflow against one store."""

    def __init__(self, store: Store, workflow: BoundWorkflow, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                 on_event: EventHook | None = None, workflow_id: int | None = None, leased: bool = True,
                 drain: Drain | None = None, notify: bool = True, stream_tokens: bool = False) -> None:
        """``leased``: hold the run's lease while executing (replays, private to one process, do not).
        ``drain``: when requested, the execution starts no new step and ends with RunHandedBack.
        ``notify``: write the workflow's notifications with the run's end (a child run's pause is told
        through its root's).
        ``stream_tokens``: every LLM step's answer reaches ``on_event`` piece by piece as ``Token`` events (without
        it, the answers of the steps with ``stream: true`` do)."""
        self.store = store
        self.workflow = workflow
        self.max_concurrency = max(1, max_concurrency)
        self.on_event = shielded(on_event)  # a listener's error never changes what happened
        max_items()  # a bad setting stops before any write, a replay's too
        self.lease: Lease | None = new_lease() if leased else None  # a bad lease setting stops before any write
        self.notices = RunNotices.of(workflow.spec) if notify and leased else None  # a bad setting: before any write
        self.workflow_id = workflow_id if workflow_id is not None else store.register_workflow(
            workflow.name, str(workflow.spec.version), dict(workflow.definition), workflow.source,
            workflow.content_hash)
        self.position = {sid: i for i, sid in enumerate(workflow.order)}
        self.drain = drain
        self.stream_tokens = stream_tokens
        self.runs_children = any(step.child is not None for step in workflow.steps.values())

    async def start(self, inputs: dict[str, Any], *, kind: str = "run", reference: Any = None,
                    parent_run_id: str | None = None, parent_step: str | None = None) -> RunResult:
        """Create a run, held under this executor's lease, for already-converted inputs and execute it.
        ``reference`` (JSON data) is stored with the run, for the outcome evaluator. ``parent_run_id`` and
        ``parent_step``: the run and unit that start this one as a child run."""
        run = NewRun(self.workflow_id, self.workflow.name, inputs, kind=kind, owner=owner_token(),
                     reference=reference, parent_run_id=parent_run_id, parent_step=parent_step)
        run_id = await store_call(self.store.create_run, run, lease=self.lease)
        if self.lease is not None:
            self.lease = replace(self.lease, run_id=run_id)
        if self.on_event is not None:
            self.on_event(RunStarted(run_id=run_id, workflow=self.workflow.name, steps=self.workflow.order,
                                     parent_run_id=parent_run_id, parent_step=parent_step))
        return await self.run_from(run_id, inputs, PriorState())  # a new run has no records yet

    async def resume(self, lease: Lease) -> RunResult:
        """Continue a run whose lease the caller has just acquired, from its stored records."""
        self.lease = lease
        run = await store_call(self.store.get_run, lease.run_id)
        if self.on_event is not None:
            child = run.kind == ChildRuns.KIND
            self.on_event(RunStarted(run_id=lease.run_id, workflow=self.workflow.name, steps=self.workflow.order,
                                     resumed=True, parent_run_id=run.parent_run_id if child else None,
                                     parent_step=run.parent_step if child else None))
        return await self.execute(lease.run_id, run.inputs)

    async def execute(self, run_id: str, inputs: dict[str, Any]) -> RunResult:
        """Run every step that can run, starting from the run's stored records."""
        records = await store_call(self.store.step_records, run_id)
        unknown = sorted({r.step_id for r in records} - set(self.workflow.steps))
        if unknown:
            raise StoreMismatchError(
                f"run {run_id} has records for step(s) {unknown} that workflow {self.workflow.name!r} does not "
                "define; it was started from a different version of the workflow")
        latest = {r.unit: r for r in records}
        # reviews only matter for records waiting on one
        waiting = any(r.status == "gate_failed" for r in latest.values())
        reviews = await store_call(self.store.reviews, run_id) if waiting else []
        return await self.run_from(run_id, inputs, PriorState.from_records(records, reviews), records)

    async def run_from(self, run_id: str, inputs: dict[str, Any], prior: PriorState,
                       records: Sequence[StepRecordView] = ()) -> RunResult:
        """Execute the run from ``prior`` (what its ``records`` say)."""
        lease = self.lease if self.lease is not None and self.lease.run_id == run_id else None
        children = ChildRuns(self.store, run_id, lease, self.child_executor, records) if self.runs_children else None
        run = RunContext(self.store, run_id, self.workflow.name, self.workflow_id, inputs, prior.done, self.on_event,
                         self.workflow.spec.llm, lease.token if lease else None, previous=prior.retry_previous,
                         children=children, tool_resumes=prior.tool_resumes, stream_tokens=self.stream_tokens)
        schedule = _Schedule(self, run, prior, lease)
        try:
            await schedule.run()
        except BaseException:
            # stopped from outside (Ctrl-C, a listener that stops it): hand the lease back at once so
            # `resume` can continue the run now rather than after the lease expires
            if lease is not None and not schedule.lost:
                await store_call(release_lease, self.store, lease)
            raise
        if schedule.renewal_error is not None:  # the store failed (a write, a renewal): hand the lease back if it can
            if lease is not None:
                with contextlib.suppress(Exception):
                    await store_call(release_lease, self.store, lease)
            error = schedule.renewal_error
            if isinstance(error, StoreError):
                raise type(error)(f"run {run_id} stopped, its steps' records intact; `orchestrator resume {run_id}` "
                                  f"or any worker continues it: {error}", driver_error=error.driver_error,
                                  detail=error.detail) from None
            raise error
        if schedule.lost:
            raise lease_lost(run_id)
        if schedule.held_back:  # drained with steps left to run
            if lease is not None:
                await store_call(release_lease, self.store, lease)
            raise RunHandedBack(run_id)
        scoring = schedule.scoring
        result = await store_call(
            finish_run, self.store, run_id, output_step=self.workflow.output_step, order=self.workflow.order,
            done=run.done, waiting=schedule.waiting, failed=schedule.failed, errors=schedule.errors, lease=lease,
            ended=schedule.writer.ended is not None, outcome=scoring.outcome if scoring else None,
            evaluator_error=scoring.error if scoring else None,
            review_deadline=lambda: self.review_deadline(run_id, schedule.waiting),
            notifications=self.end_notifications)
        if self.on_event is not None:
            if scoring is not None:  # before the end, so a listener can put the score on the run's span
                self.on_event(scoring_event(run_id, scoring))
            self.on_event(RunFinished(run_id=run_id, status=result.status, paused_steps=tuple(result.paused_steps),
                                      failed_steps=tuple(result.failed_steps), error=result.error))
        return result

    def end_notifications(self, result: RunResult) -> list[NewNotification]:
        """Who is told of the run's end or pause (written in the end's transaction)."""
        return self.notices.for_end(self.store, result) if self.notices is not None else []

    def review_deadline(self, run_id: str, waiting: AbstractSet[str]) -> float | None:
        """When the first of the run's pauses times out: its own steps' ``review_timeout`` and, for pauses
        inside its child runs (``research > retrieve``), the child steps' (so the root, which a worker polls,
        carries the deadline of a pause deep in its tree)."""
        own = pause_deadline(self.store, run_id, {u for u in waiting if PATH_SEPARATOR not in u},
                             self.workflow.spec.review_timeouts())
        inside = child_pause_deadline(self.store, run_id) if any(PATH_SEPARATOR in u for u in waiting) else None
        return earliest(own, inside)

    def child_executor(self, workflow: BoundWorkflow, workflow_id: int) -> Executor:
        """The executor of a child run this execution starts or continues: same store, listeners, drain, token
        streaming and concurrency (its lease is set by :class:`~orchestrator.engine.children.ChildRuns`)."""
        return Executor(self.store, workflow, max_concurrency=self.max_concurrency, on_event=self.on_event,
                        workflow_id=workflow_id, leased=self.lease is not None, drain=self.drain, notify=False,
                        stream_tokens=self.stream_tokens)


def step_of(unit: str) -> str:
    """The step a unit belongs to (``summarize[7]`` -> ``summarize``, ``research > retrieve`` -> ``research``)."""
    return parse_unit(path_head(unit))[0]


class _NoKeeper:
    """The keeper of an execution without a lease (a replay): nothing to renew."""

    def still_held(self) -> bool:
        return True

    def stop(self) -> None:
        pass


_NO_KEEPER = _NoKeeper()


class _Schedule:
    """One execution's readiness bookkeeping.

    A step is ready once its count of unfinished dependencies hits 0; ready steps wait in a heap
    keyed by topological position, so they start in the order a scan of the order would give,
    without rescanning every step each time. One successor per finishing step is run by that
    step's own task (see :meth:`report`): on a chain this saves starting a task per step
    (~20-40 µs, a third of a step's overhead).
    """

    def __init__(self, executor: Executor, run: RunContext, prior: PriorState, lease: Lease | None) -> None:
        self.executor = executor
        self.lease = lease
        self.workflow = executor.workflow
        self.run_context = run
        self.done: dict[str, Done] = run.done
        self.waiting = WaitingUnits(prior.waiting)
        """Units (steps, ``STEP[i]`` instances of mapped steps, ``STEP#n`` iterations of loops) waiting for review."""
        self.retry_feedback = prior.retry_feedback
        self.next_attempt = prior.next_attempt
        self.blocked = self.workflow.descendants(step_of(u) for u in self.waiting) if self.waiting else set()
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.in_flight: set[str] = set()
        steps = self.workflow.steps
        self.pending = {sid: sum(1 for d in steps[sid].dependencies if d not in self.done)
                        for sid in self.workflow.order}
        self.ready = [i for i, sid in enumerate(self.workflow.order) if self.pending[sid] == 0]  # already a heap
        self.loops = LoopState(prior.iterations, self.waiting, self.next_attempt, self.retry_feedback,
                               self.stop_reason)
        self.maps = MapState(prior.instances, self.waiting, self.next_attempt, self.retry_feedback,
                             self.stop_reason, self.executor.max_concurrency, loops=self.loops)
        self.runners: dict[str, StepRunner | MapRunner | LoopRunner] = {
            sid: MapRunner(run, step, self.maps) if step.spec.mapped
            else LoopRunner(run, step, self.loops) if step.spec.loops else StepRunner(run, step)
            for sid, step in steps.items()}
        self.writer = run.writer = GroupCommit(run.store, self.others_running, self.ending)
        self.keeper: LeaseKeeper = _NO_KEEPER
        self.lost = False
        """The lease was taken over: nothing more may be written or started."""
        self.renewal_error: Exception | None = None
        """Why the store failed the execution (a record's write, a renewal): it stopped with this error."""
        self.held_back = False
        """A drain kept ready steps from starting: the run did not end."""
        self.scoring: Scoring | None = None
        """The evaluator's verdict on a run that succeeded, stored with its end (see :meth:`score`)."""

    async def run(self) -> None:
        # New tasks are spawned from a copy of this task's context, as if from here, even when the
        # spawn happens in the task of the step that just finished; a handed-over step sees the
        # context its predecessor's task had, so an async step's contextvar changes are visible to
        # the step it hands over to, as in a plain sequential program.
        self.spawn_context = contextvars.copy_context()
        try:
            async with anyio.create_task_group() as self.tg:
                if self.lease is not None:  # renewed while steps run; on losing it, stop at once
                    self.keeper = keep_lease(self.executor.store, self.lease, self.stop, self.tg)
                    self.run_context.lease_held = self.keeper.still_held  # asked before every attempt
                self.spawn_context.run(self.schedule, None)
                await self.finish_when_idle()
        finally:
            self.keeper.stop()

    async def finish_when_idle(self) -> None:
        """Once nothing is in flight and nothing more will start: score a run that succeeded, then let
        the lease go unrenewed (a keeper that is a task would otherwise hold the task group open).

        The score is taken here, under the lease and still renewed (an evaluator may call a model
        for a while), and stored with the run's end: a process that dies meanwhile leaves the run
        resumable, and whoever resumes it scores it; no run ends without its score."""
        if self.in_flight:
            return
        if self.scoring_due():
            await self.score()
        self.keeper.stop()

    def scoring_due(self) -> bool:
        return (self.lease is not None and self.workflow.outcome is not None and self.scoring is None
                and not (self.failed or self.waiting or self.lost or self.held_back)
                and self.writer.ended is None and len(self.done) == len(self.workflow.order))

    async def score(self) -> None:
        """Call the evaluator in a worker thread (it may block), on the run's stored inputs and reference."""
        run_id = self.run_context.run_id
        stored = await store_call(self.executor.store.get_run, run_id)
        output = self.done[self.workflow.output_step].output
        self.scoring = await anyio.to_thread.run_sync(
            lambda: score_run(self.workflow, run_id, output, inputs=stored.inputs, reference=stored.reference),
            abandon_on_cancel=True)

    def others_running(self) -> bool:
        """Whether a finishing step has company: other steps, or instances of a mapped step, in flight
        whose records may join its commit."""
        return len(self.in_flight) > 1 or self.maps.running > 1

    def ending(self, record: NewStepRecord) -> RunEnd | None:
        """The run's end, if this record, the only one in flight, completes the last step of a leased
        run: then :func:`~orchestrator.engine.run_state.finish_run` would write the end right after it, so
        it is committed with it. Any other end (paused, failed, handed back) is written as before.

        Not for a workflow with an outcome evaluator: an execution stopped right after its last
        record (a quitting TUI) must leave such a run resumable, so that ``resume`` ends it and
        scores it; a run that ended with its record would stay unscored."""
        if (self.lease is None or self.workflow.outcome is not None or record.status != "succeeded"
                or record.item_index is not None or record.iteration is not None
                or self.failed or self.waiting or self.lost
                or self.ready or self.in_flight != {record.step_id}
                or len(self.done) != len(self.workflow.order) - 1):
            return None
        output_step = self.workflow.output_step
        output = jsonio.loads(record.output) if output_step == record.step_id else self.done[output_step].output
        notices = self.executor.notices
        notes = notices.for_event(self.lease.run_id, "succeeded", status="succeeded") if notices is not None else []
        return RunEnd(self.lease, "succeeded", output, notes)

    def stop(self, error: Exception | None = None) -> None:
        """The lease is lost (taken over, or ``error`` kept it from being renewed): cancel the steps in
        flight and start none."""
        self.lost = True
        self.renewal_error = self.renewal_error or error
        self.tg.cancel_scope.cancel()

    def stop_reason(self) -> str | None:
        """Why no new step (or instance of a mapped step) may start now, if any."""
        if self.failed or self.lost:
            return "failed"
        if self.executor.drain is not None and self.executor.drain.requested:
            return "drain"
        return None

    def schedule(self, handoff: list[_Handoff] | None) -> None:
        if self.failed or self.lost:
            return
        order = self.workflow.order
        while self.ready and len(self.in_flight) < self.executor.max_concurrency:
            sid = order[heapq.heappop(self.ready)]
            if sid in self.done or sid in self.waiting or sid in self.blocked or sid in self.in_flight:
                continue
            if self.executor.drain is not None and self.executor.drain.requested:
                heapq.heappush(self.ready, self.executor.position[sid])
                self.held_back = True
                return
            self.in_flight.add(sid)
            job = _Handoff(sid, self.next_attempt.get(sid, 1), self.retry_feedback.pop(sid, []))
            if handoff is not None and not handoff:
                handoff.append(job)  # the finishing task runs this one itself: no new task
            else:
                self.tg.start_soon(self.run_steps, job)

    async def run_steps(self, job: _Handoff) -> None:
        """Run a step, then any step the scheduler hands back to this task.

        Steps that never suspend (quick ones whose records commit at once) would run one after
        another without the event loop getting a turn: the lease's renewal timer, other runs of
        the process and a Ctrl-C would wait for the whole chain. The task yields to the loop once
        it has run ``FAIR_SHARE_SECONDS`` without doing so. No step starts unless the lease is still
        held (:meth:`~orchestrator.engine.leases.keeper.LeaseKeeper.still_held`: free while a renewal is fresh)."""
        next_job: _Handoff | None = job
        turn_began = time.monotonic()
        while next_job is not None:
            if time.monotonic() - turn_began > FAIR_SHARE_SECONDS:
                await anyio.lowlevel.checkpoint()
                turn_began = time.monotonic()
            if not self.keeper.still_held():  # a process that stalled starts nothing once its lease is gone
                return  # the keeper has stopped the execution
            try:
                outcome = await self.runners[next_job.step_id].run_step(next_job.first_attempt, next_job.feedback)
            except LeaseLostError:
                self.stop()
                return
            except StoreError as exc:  # the database failed, not the step: stop, leave the run resumable
                self.stop(exc)
                return
            except Exception as exc:  # a bug in the executor itself: still record the attempt, report a value
                try:
                    outcome = await self.runners[next_job.step_id].unforeseen_failure(exc)
                except Exception:
                    outcome = StepOutcome(next_job.step_id, "failed", -1, error=f"{type(exc).__name__}: {exc}")
            next_job = self.report(outcome)
        try:
            await self.finish_when_idle()
        except StoreError as exc:  # reading the run to score it
            self.stop(exc)

    def report(self, outcome: StepOutcome) -> _Handoff | None:
        """Called by a step's task when it has its outcome (its record is committed)."""
        handoff: list[_Handoff] = []
        self.spawn_context.run(self.settle, outcome, handoff)
        return handoff[0] if handoff else None

    def settle(self, outcome: StepOutcome, handoff: list[_Handoff]) -> None:
        self.in_flight.discard(outcome.step_id)
        status = outcome.status
        if status == "succeeded" or status == "skipped":
            self.done[outcome.step_id] = Done(outcome.record_id, outcome.output, outcome.ended_at, len(self.done),
                                              skipped=status == "skipped")
            for user in self.workflow.steps[outcome.step_id].consumers:
                self.pending[user] -= 1
                if self.pending[user] == 0:
                    heapq.heappush(self.ready, self.executor.position[user])
        elif status == "gate_failed":
            self.waiting.update(outcome.units or (outcome.step_id,))
            self.blocked.update(self.workflow.descendants([outcome.step_id]))
        elif status == "held":  # a map stopped before all its instances ran (a drain, or a failure elsewhere)
            self.held_back = self.held_back or self.stop_reason() == "drain"
        else:
            for unit in outcome.units or (outcome.step_id,):
                self.failed.append(unit)
            self.errors.append(f"step {(outcome.units or (outcome.step_id,))[0]!r} failed: {outcome.error}")
        self.schedule(handoff)
