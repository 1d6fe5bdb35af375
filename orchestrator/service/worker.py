"""The worker loop: claim queued runs (and take over interrupted ones) and execute them, several at once.

Every run executes under its own lease and heartbeat, on one event loop (``concurrency`` runs at
most), so a worker is one process however many runs it holds. Stopping is graceful: the first
SIGTERM (or SIGINT) stops claiming and drains, letting the steps in flight finish and be recorded,
then hands each unfinished run's lease back (the run shows as ``interrupted``; ``resume`` or any
worker continues it at once). A second signal stops at once: the steps in flight are abandoned
(unrecorded, so they run again on resume) and the leases are still handed back.

Beside its runs, a worker delivers the notification outbox (:mod:`orchestrator.service.notifications`): a
sender in a thread every ``poll`` seconds and after each run, and one last round before the worker returns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from pydantic import ValidationError

from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core.errors import (
    DatabaseUnreachableError,
    LeaseLostError,
    SpecError,
    StoreError,
    StoreFullError,
    StoreMismatchError,
)
from orchestrator.engine.executor import Drain, new_lease, release_lease
from orchestrator.engine.leases.holder import holder_is_gone, holder_name
from orchestrator.engine.run_state import RunHandedBack, RunResult, earliest, review_deadline
from orchestrator.engine.tree import child_pause_deadline, root_of
from orchestrator.service.notifications import NotificationSender, SendSettings, tell_review_timeouts
from orchestrator.service.review import apply_review_timeouts, waiting_records
from orchestrator.service.runner import continue_run_async
from orchestrator.spec.events import EventHook
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import CHILD_KIND
from orchestrator.store import Lease, Store
from orchestrator.store.off_loop import store_call, store_calls
from orchestrator.store.transient import retry_within

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("orchestrator.worker")

P = ParamSpec("P")
T = TypeVar("T")


class DatabaseWait:
    """A worker's back-off while its database does not answer (or is full): claims pause, from 0.5 s
    doubling to 30 s between tries, each try logged, until the database answers or the worker is told
    to stop. The runs it holds go on meanwhile, each on its own retries."""

    FIRST = 0.5
    LONGEST = 30.0

    def __init__(self) -> None:
        self.tries = 0

    async def wait(self, error: StoreError, stopping: anyio.Event) -> None:
        pause = min(self.FIRST * 2 ** self.tries, self.LONGEST)
        self.tries += 1
        what = "disk full" if isinstance(error, StoreFullError) else "database unavailable"
        log.warning("%s; claims paused, try %d in %.1f s: %s", what, self.tries + 1, pause, error)
        with anyio.move_on_after(pause):
            await stopping.wait()

    def answered(self) -> None:
        if self.tries:
            log.warning("the database answers again; claiming runs")
        self.tries = 0


@dataclass
class WorkSummary:
    """What a worker did before it stopped."""

    executed: int = 0
    """Runs executed to their end or a pause."""
    handed_back: list[str] = field(default_factory=list)
    """Runs it stopped before their end, left resumable."""
    signal: str | None = None
    """The signal that stopped it (``SIGTERM``), if one did."""
    forced: bool = False
    """A second signal stopped it at once, abandoning the steps in flight."""


@dataclass
class WorkOptions:
    """How a worker claims and executes runs (the ``worker`` command's options)."""

    once: bool = False
    poll: float = 1.0
    max_runs: int | None = None
    concurrency: int = 1
    max_concurrency: int = DEFAULT_CONCURRENCY
    recover: bool = True
    store_calls_off_loop: bool | None = None
    """True: each store call of a run that may wait leaves the event loop for a worker thread, so the other runs
    in flight go on while one waits on the database (a server's round trip, a restart waited out; the embedded
    SQLite store's calls are tried on the loop first and leave it only when they meet a lock). False keeps them on the
    loop: a thread hand-over less per call (~100-200 µs), and every run waits while one does. None (the
    default) decides by the store: on the loop for an embedded one (SQLite: its calls cost less than the
    hand-over and wait on nothing but this host), off it for a server (``benchmarks/bench_off_loop.py``)."""
    otel: str | None = None
    """Where the runs' spans are exported (``--otel URL``); None: the ``OTEL_EXPORTER_OTLP_*`` variables decide."""


def work(store: Store, *, once: bool = False, poll: float = 1.0, max_runs: int | None = None,
         concurrency: int = 1, max_concurrency: int = DEFAULT_CONCURRENCY, on_event: EventHook | None = None,
         on_result: Callable[[RunResult], None] | None = None, recover: bool = True,
         stop_on_signals: bool = False, on_stopping: Callable[[str, int], None] | None = None,
         on_takeover: Callable[[str], None] | None = None, notify: SendSettings | None = None,
         otel: str | None = None) -> WorkSummary:
    """Claim and execute queued runs until the queue is empty (``once``) or ``max_runs`` were claimed.

    Several workers may share one database (PostgreSQL, or a SQLite file on one host): each run
    is claimed by exactly one of them. With ``recover``, workers also take over interrupted runs
    (a process died mid-run). Paused runs whose review timed out are decided here too.
    ``stop_on_signals`` (the CLI's worker; needs the main thread) drains on SIGTERM or SIGINT as the
    module docstring says, calling ``on_stopping(signal name, runs in flight)`` when the drain starts.
    ``on_takeover(run id)`` is called for each interrupted run the worker takes over. ``notify``: how the
    worker's notification sender tries (default: :meth:`SendSettings.from_environment`). ``otel``: where the
    runs' spans go (see :attr:`WorkOptions.otel`).
    """
    options = WorkOptions(once, poll, max_runs, max(1, concurrency), max_concurrency, recover, otel=otel)
    worker = Worker(store, options, on_event=on_event, on_result=on_result, on_stopping=on_stopping,
                    on_takeover=on_takeover, notify=notify)
    try:
        anyio.run(worker.run, stop_on_signals)
    except BaseExceptionGroup as group:  # one run's internal error: report it, not the task group
        raise _first_leaf(group) from None
    return worker.summary


class Worker:
    """One worker process's loop; see the module docstring."""

    def __init__(self, store: Store, options: WorkOptions, *, on_event: EventHook | None = None,
                 on_result: Callable[[RunResult], None] | None = None,
                 on_stopping: Callable[[str, int], None] | None = None,
                 on_takeover: Callable[[str], None] | None = None, notify: SendSettings | None = None) -> None:
        self.store = store
        self.on_takeover = on_takeover
        self.options = options
        self.on_event = on_event
        self.on_result = on_result
        self.on_stopping = on_stopping
        self.drain = Drain()
        self.summary = WorkSummary()
        self.in_flight: set[str] = set()
        self.review_timeouts = ReviewTimeouts(store)
        self.sender = NotificationSender(store, notify)
        self.notifications_due = anyio.Event()
        """Set when a run of this worker ended or paused: its notifications are sent now, not at the next poll."""
        self.database_wait = DatabaseWait()
        self.runs_scope: anyio.CancelScope | None = None
        """Cancels every run of this worker at once (a second signal)."""

    async def run(self, stop_on_signals: bool) -> None:
        self.stopping = anyio.Event()
        async with anyio.create_task_group() as everything:
            if stop_on_signals:
                await everything.start(self.watch_signals)
            everything.start_soon(self.send_notifications)
            async with anyio.create_task_group() as runs:
                self.runs_scope = runs.cancel_scope
                await self.claim_runs(runs)
            if not self.summary.forced:  # a last round: what the runs just wrote, and what is due
                await anyio.to_thread.run_sync(self.send_round)
            self.sender.stop()
            everything.cancel_scope.cancel()  # done: stop watching for signals and sending

    async def send_notifications(self) -> None:
        """The worker's sender: a round every ``poll`` seconds, or as soon as one of its runs ends or pauses. In a
        thread: a receiver that is slow or down never holds up the event loop that renews leases and starts steps."""
        while not self.stopping.is_set():
            await anyio.to_thread.run_sync(self.send_round)
            with anyio.move_on_after(self.options.poll):
                await self.notifications_due.wait()
            self.notifications_due = anyio.Event()

    def send_round(self) -> None:
        try:
            self.sender.send_due()
        except StoreError as exc:  # the database is away: the rows wait for the next round
            log.warning("notifications not sent this round: %s", exc)

    async def claim_runs(self, runs: TaskGroup) -> None:
        """Claim runs while a slot is free, until told to stop (or ``once`` finds nothing to claim)."""
        options = self.options
        slots = anyio.Semaphore(options.concurrency)
        claimed = 0
        # ``once``: the next claim is the one after an idle check that found nothing. A dead executor's lease
        # can lapse between a claim and the idle check (its run turns interrupted, and the check has no lease
        # left to release), so the queue is empty only when a claim made after the check finds nothing too.
        last_look = False
        while not self.drain.requested and (options.max_runs is None or claimed < options.max_runs):
            await slots.acquire()
            if self.drain.requested:
                slots.release()
                break
            lease = new_lease()
            try:
                # off the loop (a claim may wait on a database lock); shielded, so a claim that succeeds is
                # always executed or handed back, even when a second signal cancels everything meanwhile
                with anyio.CancelScope(shield=True):
                    run_id = await anyio.to_thread.run_sync(self.claim_one, lease)
            except StoreError as exc:  # the database is away (or full): no claim until it answers again
                slots.release()
                await self.database_wait.wait(exc, self.stopping)
                continue
            if run_id is None:
                slots.release()
                if options.once and last_look:
                    break
                try:
                    more = await anyio.to_thread.run_sync(self.idle_checks)
                except StoreError as exc:
                    await self.database_wait.wait(exc, self.stopping)
                    continue
                self.database_wait.answered()
                last_look = not more
                if more or options.once:
                    continue
                with anyio.move_on_after(options.poll):
                    await self.stopping.wait()
                continue
            self.database_wait.answered()
            last_look = False
            claimed += 1
            self.in_flight.add(run_id)
            runs.start_soon(self.execute, replace(lease, run_id=run_id), slots)

    def store_calls_off_loop(self) -> bool:
        """Where a run's store calls are made (see :attr:`WorkOptions.store_calls_off_loop`)."""
        chosen = self.options.store_calls_off_loop
        return not self.store.embedded if chosen is None else chosen

    async def store_call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """A store call of a run's execution made by the worker itself (ending or handing back its lease when
        the execution failed): where the run's own store calls are made, so that on a database that makes
        calls wait the other runs go on meanwhile. Shielded off the loop: a lease is handed back even when
        a second signal cancels everything meanwhile."""
        with store_calls(off_loop=self.store_calls_off_loop()):
            return await store_call(fn, *args, **kwargs)

    def claim_one(self, lease: Lease) -> str | None:
        """Claim a run under ``lease``, interrupted runs first: a run whose executor died is taken over within
        about a lease, not after the whole backlog of queued runs. In a thread, off the event loop."""
        if self.options.recover:
            taken = recover_one(self.store, lease)
            if taken is not None:
                if self.on_takeover is not None:
                    self.on_takeover(taken)
                return taken
        return self.store.claim_queued_run(lease)

    def idle_checks(self) -> bool:
        """Nothing to claim: decide the reviews that timed out (an approval queues its run), end the leases of
        holders on this machine that are known dead (their runs are then recovered at once), then say whether
        anything is claimable now. In a thread: none of it runs on the loop that starts steps."""
        self.review_timeouts.decide()
        released = release_dead_holders(self.store) if self.options.recover else 0
        return released > 0 or bool(self.store.list_runs(status="queued", limit=1))

    async def execute(self, lease: Lease, slots: anyio.Semaphore) -> None:
        """Execute one claimed run; whatever stops it, its lease is ended or handed back."""
        run_id = lease.run_id
        try:
            result = await continue_run_async(self.store, run_id, lease=lease, on_event=self.on_event,
                                              max_concurrency=self.options.max_concurrency, drain=self.drain,
                                              off_loop=self.store_calls_off_loop(), send_notifications=False,
                                              otel=self.options.otel)
        except (SpecError, StoreMismatchError) as exc:
            await self.store_call(self.store.end_lease, lease, "failed", error=str(exc))
            result = RunResult(run_id, "failed", error=str(exc))
        except LeaseLostError:
            return  # this worker stalled and another took the run over; it wrote nothing more
        except StoreError as exc:  # this run's store call failed past its retries; the other runs go on
            log.warning("run %s handed back: %s", run_id, exc)
            with contextlib.suppress(Exception):  # the lease expires by itself if the database is still away
                await self.store_call(release_lease, self.store, lease)
            self.summary.handed_back.append(run_id)
            return
        except RunHandedBack:
            self.summary.handed_back.append(run_id)
            return
        except BaseException:  # stopped at once (a second signal), possibly before the run began
            await self.store_call(release_lease, self.store, lease)
            self.summary.handed_back.append(run_id)
            raise
        finally:
            self.in_flight.discard(run_id)
            slots.release()
        self.summary.executed += 1
        self.notifications_due.set()
        if self.on_result is not None:
            self.on_result(result)

    async def watch_signals(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The first SIGTERM/SIGINT drains; a second one cancels the runs (their leases are still handed
        back, and further signals wait for that); once the runs are over, a signal ends the process (130)."""
        try:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                task_status.started()
                async for signum in signals:
                    if self.summary.signal is None:
                        self.summary.signal = signal.Signals(signum).name
                        self.drain.request()
                        self.stopping.set()
                        if self.on_stopping is not None:
                            self.on_stopping(self.summary.signal, len(self.in_flight))
                    elif not self.summary.forced:
                        self.summary.forced = True
                        if self.runs_scope is not None:
                            self.runs_scope.cancel()
        finally:
            if self.summary.signal is not None:
                # the loop put the default actions back; a second signal while the drained worker winds
                # down (its summary, its store) still means "stop at once": exit 130, not death by SIGTERM
                for stop_signal in STOP_SIGNALS:
                    signal.signal(stop_signal, _stop_at_once)


def open_when_answering(open_store: Callable[[], Store]) -> Store | None:
    """``open_store()``, retried with :class:`DatabaseWait`'s back-off (each try logged) while the
    database does not answer, as for a worker started before its database; None when SIGTERM or
    SIGINT came first (needs the main thread, as the CLI's worker has)."""
    stop = threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        tries = 0
        while True:
            try:
                with retry_within(0):  # this loop is the back-off: each try is one attempt, and a signal ends it
                    return open_store()
            except DatabaseUnreachableError as exc:
                pause = min(DatabaseWait.FIRST * 2 ** tries, DatabaseWait.LONGEST)
                tries += 1
                log.warning("database unavailable; waiting for it, try %d in %.1f s: %s", tries + 1, pause, exc)
                if stop.wait(pause):
                    return None
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def recover_one(store: Store, lease: Lease) -> str | None:
    """Take over one interrupted run (its executor died, whoever started it), as DBOS recovers pending
    workflows: the same path as a resume, so completed steps are not executed again. A child run is
    never taken on its own: its root (interrupted with it) is, and continues it."""
    for run in store.list_runs(status="interrupted", kind=None, limit=20):
        # a child's root instead (a map's many children may fill the list before their root shows)
        run_id = root_of(store, run.run_id).run_id if run.kind == CHILD_KIND else run.run_id
        if store.acquire_lease(replace(lease, run_id=run_id), statuses=("running",)):
            return run_id
    return None


def release_dead_holders(store: Store) -> int:
    """End the leases that processes of this machine held when they died (SIGKILL, out of memory), as
    ``resume`` does for the run it is asked about: their runs show as interrupted at once, for a worker to
    take over now rather than when the leases run out. A holder on another host, or in another pid namespace,
    is never judged from here. Returns how many leases were ended."""
    released = 0
    for run in store.list_runs(status="running", kind=None):
        if run.owner and holder_is_gone(run.owner) and store.expire_lease(run.run_id, run.owner):
            log.warning("run %s: its holder %s is gone; taking it over", run.run_id, holder_name(run.owner))
            released += 1
    return released


class ReviewTimeouts:
    """Decides paused runs whose review timed out, asking the store only for the ones that are due.

    Each paused run carries its review deadline (its earliest ``review_timeout``, stored with the pause),
    so a worker's idle poll is one indexed query, whatever the number of runs waiting for a person. A due
    run's workflow is read from its stored definition (once per version) and bound (its modules imported)
    only to approve; then the run's next deadline is stored (None once no waiting pause times out). A pause
    that is due but cannot be decided (its workflow no longer binds) is looked at again a minute later, not
    on every poll. The worker calls this in a thread: nothing here runs on the event loop that renews leases
    and starts steps.
    """

    BATCH = 100
    """Due runs decided per poll (earliest first); more wait for the next poll."""
    RETRY_SECONDS = 60.0
    """How long a due pause that could not be decided waits before it is tried again."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.specs: dict[int, WorkflowSpec | None] = {}
        """Per stored workflow version: its spec (None when the stored definition no longer validates)."""

    def decide(self, now: float | None = None) -> None:
        """Decide every pause due at ``now`` (default: the clock's time; a caller may ask about another moment,
        as a test does instead of sleeping past a timeout)."""
        now = time.time() if now is None else now
        for run_id, deadline in self.store.due_reviews(now, limit=self.BATCH):
            self.decide_run(run_id, deadline, now)

    def decide_run(self, run_id: str, deadline: float, now: float) -> None:
        run = self.store.get_run(run_id)
        if run.kind == CHILD_KIND:  # a child's pause is its root's; decisions on it go through the root
            self.store.set_review_deadline(run_id, None, was=deadline)
            return
        spec = self.spec(run.workflow_id)
        if spec is None:
            log.warning("run %s: its stored workflow no longer validates; its review timeouts are not applied", run_id)
            self.store.set_review_deadline(run_id, None, was=deadline)
            return
        self.apply(run_id, spec, now)
        next_deadline = earliest(review_deadline(waiting_records(self.store, run_id), spec.review_timeouts()),
                                 child_pause_deadline(self.store, run_id))
        if next_deadline is not None and next_deadline <= now:  # due, yet not decided: the workflow does not bind
            log.warning("run %s: a timed-out review could not be decided; trying again in %g s", run_id,
                        self.RETRY_SECONDS)
            next_deadline = now + self.RETRY_SECONDS
        self.store.set_review_deadline(run_id, next_deadline, was=deadline)  # False: decided, no longer paused

    def apply(self, run_id: str, spec: WorkflowSpec, now: float) -> None:
        """Decide the run's timed-out pauses, its own and those inside its child runs. An approval takes the
        run's lease with the decision (a pause inside a child must: the tree is continued from its root, under
        one token); the run is then handed to the queue for any worker, and the child runs the decisions
        landed in are let go at once, so the worker that claims the root takes them over without waiting for
        their leases to lapse. A rejection ends the run. Pauses are judged at the poll's ``now``, the moment
        the store was asked about."""
        lease = new_lease(run_id)
        decisions = apply_review_timeouts(self.store, run_id, spec, now=now, lease=lease)
        tell_review_timeouts(self.store, run_id, spec, [(d.path or d.step_id, d.decision) for d in decisions])
        if not any(d.continue_run for d in decisions):
            return
        for decision in decisions:
            if decision.run_id != run_id:
                release_lease(self.store, replace(lease, run_id=decision.run_id))
        self.store.end_lease(lease, "queued")

    def spec(self, workflow_id: int) -> WorkflowSpec | None:
        if workflow_id not in self.specs:
            try:
                self.specs[workflow_id] = WorkflowSpec.model_validate(self.store.workflow_definition(workflow_id)[0])
            except ValidationError:
                self.specs[workflow_id] = None
        return self.specs[workflow_id]


def _stop_at_once(_signum: int, _frame: FrameType | None) -> None:
    """A signal after the drain: everything is recorded and every lease handed back, so the process ends
    here with 130, whatever it still waits for (a thread a step left running, an exporter's flush at
    exit). Raising SystemExit would not do: Python ignores it while joining threads at exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the main thread may be writing to it right now
            stream.flush()
    os._exit(130)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
