"""A ``for_each`` step: one instance per item of a list known only at run time.

Each instance is a unit of its own (``summarize[7]``): its records carry the item's index, and it
has its own attempts, retries, timeout, gates, pause, idempotency key, model call record and span,
exactly like a step, because :class:`~orchestrator.engine.attempt.StepRunner` runs it. This module only
decides which instances still have to run, runs them at most ``max_parallel`` at a time, and once
every instance has a result collects their outputs, in item order, into one record of the step
(no index, ``origin: collected``): what consumers, ``show`` and attribution read as the step's
output, and what a resumed run finds done. A map that a pause or a failure leaves unfinished has
no collected record: a resume runs only the instances without a completed record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from orchestrator.bind.binding import BoundStep
from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, LeaseLostError
from orchestrator.engine.attempt import RunContext, StepRunner, exception_text, skip_reason
from orchestrator.engine.looping import LoopRunner, LoopState
from orchestrator.engine.run_state import FAIR_SHARE_SECONDS, Done, StepOutcome, in_order
from orchestrator.engine.waiting import WaitingUnits
from orchestrator.spec.conditions import ConditionError
from orchestrator.spec.events import StepFinished, StepStarted
from orchestrator.spec.model import GateResult, field_value, parse_reference
from orchestrator.spec.records import unit_name

DEFAULT_MAX_ITEMS = 10_000
MAX_MAX_ITEMS = 1_000_000
"""The highest ``ORCHESTRATOR_MAX_ITEMS``: each instance is a stored record of its own."""


def max_items() -> int:
    """``ORCHESTRATOR_MAX_ITEMS``, else 10 000: the most instances one mapped step may have. A bad setting is
    an InputError; executing anything checks it first (:func:`~orchestrator.engine.executor.new_lease`), so it
    is refused up front, with exit 2, rather than failing a mapped step halfway through a run."""
    text = os.environ.get("ORCHESTRATOR_MAX_ITEMS")
    if not text:
        return DEFAULT_MAX_ITEMS
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"ORCHESTRATOR_MAX_ITEMS={text!r} is not a whole number") from None
    if not 0 <= value <= MAX_MAX_ITEMS:
        raise InputError(f"ORCHESTRATOR_MAX_ITEMS={text!r} must be a whole number from 0 to {MAX_MAX_ITEMS}")
    return value


@dataclass
class MapState:
    """What the scheduler shares with the maps of one execution (all keyed by unit, ``STEP[i]``)."""

    instances: dict[str, dict[int, Done]]
    """Completed or skipped instances of each mapped step, by index (from the records, then as they finish)."""
    waiting: WaitingUnits
    """Units waiting for review: not run again until a decision releases them."""
    next_attempt: dict[str, int]
    retry_feedback: dict[str, list[GateResult]]
    stop_reason: Callable[[], str | None]
    """Why no new work may start: ``"drain"`` (hand the run back), ``"failed"`` (a step failed), else None."""
    concurrency: int
    loops: LoopState | None = None
    """The loops of the execution: an instance of a ``repeat:`` step is a loop of its own."""
    running: int = 0
    """Workers of the maps running now: a finishing instance's record may share a commit with the records
    of theirs."""


@dataclass
class _Batch:
    """The instances one :meth:`MapRunner.run_step` runs: the items, the indexes not yet taken (shared by
    its workers), and what the taken ones gave."""

    items: list[Any]
    todo: Iterator[int]
    outcomes: list[StepOutcome] = field(default_factory=list)
    failed: bool = False
    """Whether an outcome failed: no new instance starts (kept apart so workers need not scan the outcomes)."""
    lost: list[LeaseLostError] = field(default_factory=list)
    """The lease was taken over: the map raises this once its workers are cancelled."""
    scope: anyio.CancelScope | None = None
    """The workers' task group's scope: a lost lease cancels the siblings of the instance that found it."""


class ItemsError(Exception):
    """The ``for_each`` value is not a list, or holds too many items."""


class MapRunner:
    """Runs a mapped step's instances and collects their outputs; the scheduler sees one step."""

    def __init__(self, run: RunContext, step: BoundStep, state: MapState) -> None:
        self.run = run
        self.step = step
        self.state = state

    async def run_step(self, first_attempt: int, feedback: list[GateResult]) -> StepOutcome:
        """Same contract as :meth:`StepRunner.run_step`; ``first_attempt`` numbers the collected record."""
        del feedback  # instances carry their own feedback, by unit
        step, run = self.step, self.run
        started = time.time()
        if step.may_skip:
            try:
                reason = skip_reason(step, run.done, run.inputs)
            except ConditionError as exc:
                return await self.end(first_attempt, started, "failed", error=("ConditionError", str(exc)))
            if reason is not None:
                return await self.end(first_attempt, started, "skipped", skip=reason)
        try:
            items = self.items()
        except ItemsError as exc:
            return await self.end(first_attempt, started, "failed", error=("ItemsError", str(exc)))
        self.emit_started(first_attempt, started)
        done = self.state.instances.setdefault(step.id, {})
        todo = [i for i in range(len(items)) if i not in done and unit_name(step.id, i) not in self.state.waiting]
        batch = _Batch(items, iter(todo))
        workers = min(step.spec.max_parallel or self.state.concurrency, len(todo))
        self.state.running += workers  # counted before they start, so the first record waits for theirs
        try:
            async with anyio.create_task_group() as group:
                batch.scope = group.cancel_scope
                for _ in range(workers):
                    group.start_soon(self.work, batch)
        finally:
            self.state.running -= workers
        if batch.lost:  # the lease was taken over: the scheduler stops the execution, as for a plain step
            raise batch.lost[0]
        outcomes = batch.outcomes
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            units = tuple(u for o in failed for u in o.units)
            return StepOutcome(step.id, "failed", failed[0].record_id, error=failed[0].error, units=units)
        waiting = tuple(in_order(self.waiting_units(len(items)), [step.id]))
        if waiting:
            return StepOutcome(step.id, "gate_failed", -1, units=waiting)
        if len(done) < len(items):  # stopped before every instance ran: a drain, or another step failed
            return StepOutcome(step.id, "held", -1)
        return await self.collect(first_attempt, started, [done[i] for i in range(len(items))])

    def waiting_units(self, count: int) -> list[str]:
        """The step's units waiting for review: instances, iterations of instances that loop, or paths into
        the child runs of instances (``per_ticket[3] > classify``)."""
        return [unit for index, units in self.state.waiting.of_instances(self.step.id).items()
                if index is not None and index < count for unit in units]

    async def unforeseen_failure(self, exc: Exception) -> StepOutcome:
        """The map itself broke (not one of its instances): the step's own record says how."""
        return await self.end(1, time.time(), "failed", error=(type(exc).__name__, exception_text(exc)))

    def items(self) -> list[Any]:
        """The list to map over, from the upstream output or the workflow input ``for_each`` names."""
        spec = self.step.spec
        assert spec.for_each is not None
        parsed = parse_reference(spec.for_each)
        assert parsed is not None
        if parsed[0] == "input":
            value = self.run.inputs.get(parsed[1])
        else:
            value = self.run.done[parsed[1]].output
            if parsed[2]:
                try:
                    value = field_value(value, parsed[2])
                except KeyError:
                    raise ItemsError(f"for_each {spec.for_each}: the output of step {parsed[1]!r} has no field "
                                     f"{parsed[2]!r}") from None
        if not isinstance(value, list):
            raise ItemsError(f"for_each {spec.for_each} is {_kind(value)}, not a list")
        limit = max_items()
        if len(value) > limit:
            raise ItemsError(f"for_each {spec.for_each} has {len(value)} items, more than the "
                             f"{limit} allowed (ORCHESTRATOR_MAX_ITEMS)")
        return value

    async def work(self, batch: _Batch) -> None:
        """One of at most ``max_parallel`` workers: runs the next instance nobody has taken, in item order,
        until none is left. Like the scheduler, once an instance or a step fails, or a drain asks, it
        starts nothing new. (A worker per slot, not a task and a semaphore turn per instance: those
        were about 40% of a no-op instance's cost.)"""
        turn_began = time.monotonic()
        for index in batch.todo:
            if batch.failed or batch.lost or self.state.stop_reason() is not None:
                return
            if time.monotonic() - turn_began > FAIR_SHARE_SECONDS:  # instances that never suspend
                await anyio.lowlevel.checkpoint()
                turn_began = time.monotonic()
            await self.instance(index, batch.items[index], batch)

    async def instance(self, index: int, item: Any, batch: _Batch) -> None:
        """Run one instance; a lost lease cancels its siblings and is raised by the map as one error
        (raised from here, the task group would wrap it in an exception group the scheduler cannot read)."""
        unit = unit_name(self.step.id, index)
        runner: StepRunner | LoopRunner
        if self.state.loops is not None and self.step.spec.loops:
            runner = LoopRunner(self.run, self.step, self.state.loops, index=index, item=item)
        else:
            runner = StepRunner(self.run, self.step, index=index, item=item)
        try:
            outcome = await runner.run_step(self.state.next_attempt.get(unit, 1),
                                            self.state.retry_feedback.pop(unit, []))
        except LeaseLostError as exc:
            batch.lost.append(exc)
            if batch.scope is not None:
                batch.scope.cancel()
            return
        except Exception as exc:  # broke outside the step's code: recorded like the scheduler does for a step
            outcome = await runner.unforeseen_failure(exc)
        if outcome.status in ("succeeded", "skipped"):
            self.state.instances[self.step.id][index] = Done(outcome.record_id, outcome.output, outcome.ended_at,
                                                             skipped=outcome.status == "skipped")
        elif outcome.status == "gate_failed":  # its units: iterations of a loop, or paths into its child run
            self.state.waiting.update(outcome.units or (unit,))
        elif outcome.status == "failed":
            batch.failed = True
        batch.outcomes.append(outcome)

    async def collect(self, attempt: int, started: float, results: list[Done]) -> StepOutcome:
        """The step's own record: the instances' outputs in item order (null for a skipped one)."""
        output = [r.output for r in results]
        consumed = [[r.record_id, unit_name(self.step.id, i), 0.0] for i, r in enumerate(results)]
        return await self.end(attempt, started, "succeeded", output=output,
                              consumed=jsonio.dumps(consumed) if consumed else None)

    async def end(self, attempt: int, started: float, status: str, *, output: Any = None,
                  consumed: str | None = None, skip: str | None = None,
                  error: tuple[str, str] | None = None) -> StepOutcome:
        ended = time.time()
        fields: dict[str, Any] = {"origin": "collected"} if status == "succeeded" else {}
        if status == "succeeded":
            fields["output"] = jsonio.dumps(output)
        if error is not None:
            fields["error_type"], fields["error_message"] = error
        rid = await self.run.record(self.step, attempt, started, status=status, ended_at=ended, consumed=consumed,
                                    skip_reason=skip, **fields)
        message = f"{error[0]}: {error[1]}" if error else None
        if self.run.on_event is not None:
            self.run.on_event(StepFinished(run_id=self.run.run_id, step_id=self.step.id, status=status,  # type: ignore[arg-type]
                                           attempt=attempt, duration=ended - started, error=message))
        return StepOutcome(self.step.id, status, rid, output=output, ended_at=ended, error=message)

    def emit_started(self, attempt: int, started: float) -> None:
        if self.run.on_event is not None:
            spec = self.step.spec
            self.run.on_event(StepStarted(run_id=self.run.run_id, step_id=spec.id, attempt=attempt,
                                          started_at=started, agent=spec.agent_name, step_type=spec.type))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {dict: "an object", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")
