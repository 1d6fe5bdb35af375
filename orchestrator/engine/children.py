"""Child runs: a ``workflow:`` step runs another workflow as a run of its own, inside its parent's execution.

The child is a run (kind ``child``, ``parent_run_id``, ``parent_step`` = the parent's unit, such as
``research`` or ``per_ticket[3]``) with its own records and its own lease, executed here by an executor of
its own on the parent's event loop and under the parent's lease token: one process holds the whole tree,
and whoever takes the parent over (``resume``, a worker) takes its children over with it. The child's
output is the step's output (its gates judge it); a pause inside the child pauses the step, and the
parent waits at ``research > retrieve``; the child's failure fails the step, naming the child run.

Which child run a unit continues, so that no completed step of a child ever runs again: the unit's
latest child run, when it was started with the same inputs, unless the parent already recorded a result
of it and now runs the unit again (a fix upstream superseded that record, or the step's gates or a
reviewer sent the output back), or a fix upstream superseded the unit while it waited at a pause inside the
child (the fix ended that child): then a new child run starts. A child left behind before it ended is
marked failed, naming the one that replaced it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import anyio

from orchestrator.bind.binding import BoundStep, BoundWorkflow
from orchestrator.core import jsonio
from orchestrator.core.errors import LeaseLostError, OrchestratorError
from orchestrator.engine.leases.holder import executed_by
from orchestrator.engine.run_state import RunResult, in_order
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.engine.tree import OpenPause, pauses_of_runs
from orchestrator.spec.inputs import resolve_inputs
from orchestrator.spec.records import CHILD_KIND, RunView, StepRecordView
from orchestrator.store import Lease, Store
from orchestrator.store.off_loop import store_call

CHILD_WAIT = "ChildPaused"
"""``error_type`` of a parent's record of a unit's wait at a pause inside its child run, written (superseded at
once) by a fix upstream that ended that child: the unit runs again in a new child run."""

RESUMABLE_CHILD = ("paused", "failed", "running", "queued")
"""A child run's states from which its parent's execution continues it (``running`` once its lease lapsed,
or when it holds the parent's token already)."""


class ChildPaused(Exception):
    """The child run paused for review: the step waits, at the child's waiting units."""

    def __init__(self, run_id: str, units: Sequence[str]) -> None:
        super().__init__(f"child run {run_id} paused at {', '.join(units)}")
        self.run_id = run_id
        self.units = tuple(units)


class ChildRunFailed(OrchestratorError):
    """The child run failed (or was rejected): the step fails with the child's error and run id."""

    exit_code = 1
    type_name = "ChildRunFailed"

    def __init__(self, run_id: str, status: str, error: str | None) -> None:
        super().__init__(f"child run {run_id} {status}: {error or 'no error recorded'}; "
                         f"see `orchestrator show {run_id}`")
        self.run_id = run_id


class ChildExecutor(Protocol):
    """What runs a child workflow: an :class:`~orchestrator.engine.executor.Executor` made for it."""

    lease: Lease | None

    async def start(self, inputs: dict[str, Any], *, kind: str = "run", reference: Any = None,
                    parent_run_id: str | None = None, parent_step: str | None = None) -> RunResult: ...

    async def resume(self, lease: Lease) -> RunResult: ...

    async def execute(self, run_id: str, inputs: dict[str, Any]) -> RunResult: ...


ExecutorFactory = Callable[[BoundWorkflow, int], ChildExecutor]
"""(the child workflow, its stored workflow id) -> an executor sharing the parent's store, listeners, drain
and concurrency."""


class ChildRuns:
    """The child runs of one execution of a parent run, by the parent's unit."""

    KIND = CHILD_KIND

    def __init__(self, store: Store, parent_run_id: str, lease: Lease | None, make_executor: ExecutorFactory,
                 records: Sequence[StepRecordView] = ()) -> None:
        """``lease``: the parent's (children are leased with its token; None for an execution without one).
        ``records``: the parent's records when this execution began."""
        self.store = store
        self.parent_run_id = parent_run_id
        self.lease = lease
        self.make_executor = make_executor
        self.last_record: dict[str, StepRecordView] = {}
        """Each unit's latest record (superseded or not) when this execution began."""
        for rec in records:
            self.last_record[rec.unit] = rec
        self.latest: dict[str, RunView] | None = None
        """Each unit's latest child run (read once, then kept as children start)."""
        self.loading = anyio.Lock()
        """Held while :attr:`latest` is read: the units of a map ask at once, and every one of them must
        see the children already started (an empty answer would start each a second child)."""
        self.delivered: set[str] = set()
        """Units whose child output this execution handed to the step: asked again, the step wants a new one."""
        self.workflow_ids: dict[int, int] = {}
        self.paused: dict[str, list[OpenPause]] | None = None
        """The open pauses of the child runs paused when this execution first asked (read together, once)."""

    async def run(self, step: BoundStep, unit: str, given: dict[str, Any]) -> Any:
        """The child's output for ``unit`` of the parent; ChildPaused or ChildRunFailed otherwise."""
        workflow = step.child
        assert workflow is not None
        inputs = resolve_inputs(workflow.spec, given)
        children = await self.children()
        child = await store_call(self.reusable, children.get(unit), unit, inputs)
        if child is not None and child.status == "paused":  # no decision since it paused: nothing of it can run
            waiting = await store_call(self.paused_units, child, workflow, children)
            if waiting:
                raise ChildPaused(child.run_id, waiting)
        if child is None:
            result = await self.start(workflow, unit, inputs)
        else:
            result = await self.resume(child, workflow)
        # as it is now, should the unit ask again
        children[unit] = await store_call(self.store.get_run, result.run_id)
        if result.status == "succeeded":
            self.delivered.add(unit)
            return result.output
        if result.status == "paused":
            raise ChildPaused(result.run_id, result.paused_steps)
        raise ChildRunFailed(result.run_id, result.status, result.error)

    async def children(self) -> dict[str, RunView]:
        """Each unit's latest child run, read from the store by the first unit to ask; the others wait for
        that read to finish rather than see it half done."""
        async with self.loading:
            if self.latest is None:
                self.latest = await store_call(self.read_children)
        return self.latest

    def read_children(self) -> dict[str, RunView]:
        latest: dict[str, RunView] = {}
        for run in self.store.child_runs(self.parent_run_id):
            if run.kind == CHILD_KIND and run.parent_step is not None:
                latest[run.parent_step] = run  # oldest first: the last one stays
        return latest

    def paused_units(self, child: RunView, workflow: BoundWorkflow, children: dict[str, RunView]) -> list[str]:
        """Where a paused child run waits (its units, and paths into its own paused children), read from its
        records, as executing it again would find them. The pauses of all the paused children are read at
        once, on the first one asked about: a continuation of a tree of many paused children (one of them
        just decided) executes each of the others only to find it paused again, once per child read one by
        one."""
        if self.paused is None:
            self.paused = pauses_of_runs(self.store, [c for c in children.values() if c.status == "paused"])
        pauses = self.paused.get(child.run_id)
        if pauses is None:  # paused during this execution
            pauses = pauses_of_runs(self.store, [child])[child.run_id]
        return in_order([pause.path for pause in pauses], workflow.order)

    def reusable(self, child: RunView | None, unit: str, inputs: dict[str, Any]) -> RunView | None:
        """The unit's child run to continue (``child``: its latest one), or None when a new one must start
        (see the module docstring)."""
        if child is None:
            return None
        same_inputs = jsonio.loads(jsonio.dumps(inputs)) == child.inputs
        if same_inputs and child.status != "rejected" and unit not in self.delivered \
                and not self.result_recorded(unit, child) and not self.superseded_since(unit, child):
            return child
        self.leave(child)
        return None

    def result_recorded(self, unit: str, child: RunView) -> bool:
        """Whether the parent recorded the succeeded child's output (so running the unit again means a new
        child): its latest record of the unit ended after the child began, with the child's output (taken,
        or judged by its gates)."""
        if child.status != "succeeded":
            return False
        rec = self.last_record.get(unit)
        return rec is not None and rec.ended_at >= child.created_at and (
            rec.status in ("succeeded", "gate_failed") or rec.error_type == "GateFailed")

    def superseded_since(self, unit: str, child: RunView) -> bool:
        """Whether a fix upstream ended the child while the unit waited at its pause (the parent's record of that
        wait, superseded by the fix): the unit runs again, in a new child run."""
        rec = self.last_record.get(unit)
        return rec is not None and rec.superseded and rec.error_type == CHILD_WAIT and rec.ended_at >= child.created_at

    def leave(self, child: RunView) -> None:
        """A child left behind by a new one: ended as failed unless it already ended."""
        if child.status in ("succeeded", "failed", "rejected"):
            return
        reason = (f"left behind: step {child.parent_step!r} of run {self.parent_run_id} ran again and started a new "
                  "child run")
        self.store.set_run_status(child.run_id, "failed", expect=("paused", "running", "queued"), error=reason,
                                  holder=None)

    def workflow_id(self, workflow: BoundWorkflow) -> int:
        key = id(workflow)
        if key not in self.workflow_ids:
            self.workflow_ids[key] = self.store.register_workflow(
                workflow.name, str(workflow.spec.version), dict(workflow.definition), workflow.source,
                workflow.content_hash)
        return self.workflow_ids[key]

    async def start(self, workflow: BoundWorkflow, unit: str, inputs: dict[str, Any]) -> RunResult:
        executor = self.make_executor(workflow, await store_call(self.workflow_id, workflow))
        executor.lease = None if self.lease is None else replace(self.lease, run_id="", issued_at=time.monotonic())
        return await executor.start(inputs, kind=CHILD_KIND, parent_run_id=self.parent_run_id, parent_step=unit)

    async def resume(self, child: RunView, workflow: BoundWorkflow) -> RunResult:
        if child.status == "succeeded":  # ended before the parent recorded its output (a kill in between)
            return RunResult(child.run_id, "succeeded", output=child.output)
        if child.workflow_id != await store_call(self.workflow_id, workflow):  # started from another version
            workflow, _ = await store_call(load_run_workflow, self.store, child.run_id)
        executor = self.make_executor(workflow, child.workflow_id)
        if self.lease is None:
            executor.lease = None
            return await executor.execute(child.run_id, child.inputs)
        return await executor.resume(await self.claim(child))

    async def claim(self, child: RunView) -> Lease:
        """The child's lease under the parent's token. A lease another token still holds belongs to an
        executor of the tree that died (whoever executes the tree holds the parent, which this execution
        holds): wait for it to lapse, at most one lease's duration."""
        assert self.lease is not None
        lease = replace(self.lease, run_id=child.run_id, issued_at=time.monotonic())
        deadline = time.monotonic() + self.lease.seconds + 1.0
        while True:
            lease = replace(lease, issued_at=time.monotonic())
            if await store_call(self.store.acquire_lease, lease, statuses=RESUMABLE_CHILD):
                return lease
            current = await store_call(self.store.get_run, child.run_id)
            if time.monotonic() > deadline or current.status not in ("running", "interrupted"):
                state = executed_by(current.owner, current.lease_expires_at) \
                    if current.status in ("running", "interrupted") else current.status
                raise LeaseLostError(f"child run {child.run_id} of run {self.parent_run_id} is {state}; stopped "
                                     "without running it")
            await anyio.sleep(0.1)
