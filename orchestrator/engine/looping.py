"""A ``repeat:`` step: run it again, one iteration after another, until its condition holds.

Each iteration is a unit of its own (``improve#2``, ``summarize[3]#2`` in a map): its records carry the
iteration's number, and it has its own attempts, retries, timeout, gates, pause, idempotency key, model
call record and span, exactly like a step, because :class:`~orchestrator.engine.attempt.StepRunner` runs it.
This module decides which iteration comes next, evaluates ``until`` on each iteration's output, and once
the loop is over writes one record of the step itself (no iteration, ``origin: collected``) holding the
last iteration's output: what consumers, ``show`` and a resumed run read as the step's output. Its gate
``repeat`` says how the loop ended: ``until`` held, or ``max`` iterations passed with it still false (a
failed gate, to which the step's ``on_gate_fail`` applies; under ``retry`` it pauses, since the loop
already was the retry).

A retry of that pause runs a new round of up to ``max`` more iterations, numbered on from the last
(``improve#4`` after ``improve#3``): the first of them gets the failed verdict (and the reviewer's
comment) as gate feedback and the last iteration's output as ``$previous``. Where a round began is read
from the verdict itself (``details.iterations``), so a resumed run knows it from its records alone.

A loop never runs an iteration twice: the iterations already recorded are where a resumed run starts,
``until`` is evaluated again on the last of them (it reads stored values only), and the next one runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.bind.binding import BoundStep
from orchestrator.core import jsonio
from orchestrator.core.errors import LeaseLostError, StoreError
from orchestrator.engine.attempt import RunContext, StepRunner, exception_text, gate_policy, gate_row, skip_reason
from orchestrator.engine.run_state import Done, StepOutcome
from orchestrator.engine.waiting import WaitingUnits
from orchestrator.spec import conditions
from orchestrator.spec.conditions import ConditionError
from orchestrator.spec.events import StepFinished, StepStarted, Verdict
from orchestrator.spec.model import GateResult
from orchestrator.spec.records import parse_unit, path_head, unit_name

REPEAT_GATE = "repeat"
"""The name of the gate that says how a loop ended (``until`` held, or ``max`` came first)."""


@dataclass
class LoopState:
    """What the scheduler shares with the loops of one execution (keyed by unit)."""

    iterations: dict[str, dict[int, Done]]
    """Completed iterations of each loop (by the loop's unit: ``improve``, ``summarize[3]``), by number."""
    waiting: WaitingUnits
    """Units waiting for review: an iteration (``improve#2``) or a loop's ``repeat`` pause (``improve``)."""
    next_attempt: dict[str, int]
    retry_feedback: dict[str, list[GateResult]]
    stop_reason: Callable[[], str | None]
    """Why no new work may start: ``"drain"``, ``"failed"``, else None."""


def round_start(feedback: list[GateResult]) -> int:
    """How many iterations came before the current round: those of the ``repeat`` verdict a reviewer sent
    back for a new round (0 for a loop's first round)."""
    for verdict in feedback:
        if verdict.details.get("gate") == REPEAT_GATE and isinstance(verdict.details.get("iterations"), int):
            return int(verdict.details["iterations"])
    return 0


class LoopRunner:
    """Runs a loop's iterations one after another and writes the loop's record; the scheduler (or a map,
    for one of its instances) sees one unit."""

    def __init__(self, run: RunContext, step: BoundStep, state: LoopState, *, index: int | None = None,
                 item: Any = None) -> None:
        assert step.spec.repeat is not None
        self.run = run
        self.step = step
        self.state = state
        self.index = index
        self.item = item
        self.unit = unit_name(step.id, index)
        self.repeat = step.spec.repeat
        self.fields: dict[str, Any] = {} if index is None else {"item_index": index}

    async def run_step(self, first_attempt: int, feedback: list[GateResult]) -> StepOutcome:
        """Same contract as :meth:`StepRunner.run_step`; ``first_attempt`` numbers the loop's record and
        ``feedback``, when a reviewer sent the loop's ``repeat`` pause back, starts a new round."""
        step, run = self.step, self.run
        started = time.time()
        if step.may_skip:
            try:
                reason = skip_reason(step, run.done, run.inputs, index=self.index, item=self.item,
                                     per_instance=self.index is not None)
            except ConditionError as exc:
                return await self.end(first_attempt, started, "failed", error=("ConditionError", str(exc)))
            if reason is not None:
                return await self.end(first_attempt, started, "skipped", skip=reason)
        waiting = self.waiting_iteration()
        if waiting is not None:
            return StepOutcome(step.id, "gate_failed", -1, units=(waiting,))
        self.emit_started(first_attempt, started)
        done = self.state.iterations.setdefault(self.unit, {})
        start = round_start(feedback)
        limit = start + self.repeat.max
        n = max(done, default=0)
        while True:
            if n > start:  # the round has an iteration: does it end the loop?
                values = self.until_values(n, done)
                try:
                    holds = conditions.until_holds(self.repeat.until, values)
                except ConditionError as exc:
                    return await self.end(first_attempt, started, "failed", error=("ConditionError", str(exc)),
                                          last=(n, done[n]))
                if holds:
                    verdict = GateResult(True, 1.0, f"until {self.repeat.until} held after {_count(n)}",
                                         self.details(n))
                    return await self.end(first_attempt, started, "succeeded", last=(n, done[n]), verdict=verdict)
                if n >= limit:
                    read = conditions.parse(self.repeat.until).explain(values)
                    verdict = GateResult(False, 0.0, f"until {self.repeat.until} still false after {_count(n)}",
                                         {**self.details(n), "values": read})
                    status, message = gate_policy(step.on_gate_fail, [verdict], is_last=True)
                    return await self.end(first_attempt, started, status, last=(n, done[n]), verdict=verdict,
                                          error=("GateFailed", message) if message else None)
            if self.state.stop_reason() is not None:
                return StepOutcome(step.id, "held", -1)  # a drain, or a failure elsewhere: no new iteration
            n += 1
            outcome = await self.iteration(n, done.get(n - 1), feedback if n == start + 1 else [])
            if outcome.status == "succeeded":
                done[n] = Done(outcome.record_id, outcome.output, outcome.ended_at)
            elif outcome.status == "gate_failed":
                self.state.waiting.add(outcome.units[0])
                return StepOutcome(step.id, "gate_failed", -1, units=outcome.units)
            else:
                return StepOutcome(step.id, "failed", outcome.record_id, error=outcome.error, units=outcome.units)

    async def iteration(self, n: int, previous: Done | None, round_feedback: list[GateResult]) -> StepOutcome:
        """Run iteration ``n``; the first of a new round learns from the verdict it was sent back with."""
        runner = StepRunner(self.run, self.step, index=self.index, item=self.item, iteration=n, previous=previous)
        unit = runner.unit
        feedback = self.state.retry_feedback.pop(unit, []) or list(round_feedback)
        try:
            return await runner.run_step(self.state.next_attempt.get(unit, 1), feedback)
        except (LeaseLostError, StoreError):
            raise  # the scheduler stops the execution, as for a plain step
        except Exception as exc:  # broke outside the step's code: recorded like the scheduler does for a step
            return await runner.unforeseen_failure(exc)

    def waiting_iteration(self) -> str | None:
        """This loop's iteration waiting for review, if one is."""
        for unit in sorted(self.state.waiting.of_instance(self.step.id, self.index)):
            if parse_unit(path_head(unit))[2] is not None:  # a path: a pause inside the iteration's child run
                return unit
        return None

    def until_values(self, n: int, done: dict[int, Done]) -> dict[str, Any]:
        """What ``until`` reads of iteration ``n``: its output, number and the output before it, the workflow's
        inputs, the upstream outputs it names, and an instance's item and index."""
        names = conditions.parse(self.repeat.until).names
        values: dict[str, Any] = {name: self.run.done[name].output for name in names if name in self.run.done}
        values.update(inputs=self.run.inputs, output=done[n].output, iteration=n,
                      previous=done[n - 1].output if n - 1 in done else None)
        if self.index is not None:
            values.update(item=self.item, index=self.index)
        return values

    def details(self, n: int) -> dict[str, Any]:
        return {"until": self.repeat.until, "iterations": n, "max": self.repeat.max}

    async def unforeseen_failure(self, exc: Exception) -> StepOutcome:
        """The loop itself broke (not one of its iterations): its own record says how."""
        return await self.end(1, time.time(), "failed", error=(type(exc).__name__, exception_text(exc)))

    async def end(self, attempt: int, started: float, status: str, *, last: tuple[int, Done] | None = None,
                  verdict: GateResult | None = None, skip: str | None = None,
                  error: tuple[str, str] | None = None) -> StepOutcome:
        """The loop's own record: the last iteration's output, linked to it, with the ``repeat`` verdict."""
        ended = time.time()
        fields: dict[str, Any] = dict(self.fields)
        output = None
        if last is not None:
            n, final = last
            output = final.output
            fields.update(origin="collected", output=jsonio.dumps(output),
                          consumed=jsonio.dumps([[final.record_id, unit_name(self.step.id, self.index, n), 0.0]]))
        if verdict is not None:
            fields["gates"] = [gate_row(REPEAT_GATE, verdict, 0.0, "block")]
        if error is not None:
            fields["error_type"], fields["error_message"] = error
        rid = await self.run.record(self.step, attempt, started, status=status, ended_at=ended, skip_reason=skip,
                                    **fields)
        message = f"{error[0]}: {error[1]}" if error else None
        if self.run.on_event is not None:
            self.run.on_event(StepFinished(run_id=self.run.run_id, step_id=self.step.id, status=status,  # type: ignore[arg-type]
                                           attempt=attempt, index=self.index, duration=ended - started,
                                           error=message, gates=1 if verdict else 0,
                                           failed_gates=0 if verdict is None or verdict.passed else 1,
                                           verdicts=() if verdict is None else (
                                               Verdict(REPEAT_GATE, verdict.passed, verdict.score, verdict.reason,
                                                       "block"),)))
        units = () if self.index is None else (self.unit,)
        if status == "failed":
            return StepOutcome(self.step.id, status, rid, error=message, units=units)
        return StepOutcome(self.step.id, status, rid, output=output, ended_at=ended, error=message, units=units)

    def emit_started(self, attempt: int, started: float) -> None:
        if self.run.on_event is not None:
            spec = self.step.spec
            self.run.on_event(StepStarted(run_id=self.run.run_id, step_id=spec.id, attempt=attempt,
                                          started_at=started, agent=spec.agent_name, step_type=spec.type,
                                          index=self.index))


def _count(n: int) -> str:
    return f"{n} iteration" if n == 1 else f"{n} iterations"
