"""Run bookkeeping: what a run's stored records say about it, and how a run's end is written.

The executor starts from a :class:`PriorState` (which steps are done, waiting for review, or
to be retried with gate feedback), keeps completed outputs in :class:`Done` entries, and ends
with :func:`finish_run`, which stores the run's status and says what it came to as a
:class:`RunResult`. Nothing here schedules or executes a step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bind.approvals import TOOL_CHECKPOINT, ToolResume, is_approval, tool_resume
from orchestrator.core.errors import OrchestratorError
from orchestrator.spec.model import GATE_ERROR, GateResult, RunStatus
from orchestrator.spec.records import ReviewView, StepRecordView, live_records, parse_unit, path_head, unit_name
from orchestrator.store import Lease, NewNotification, NewOutcome
from orchestrator.store.base import RecordStore, RunStore, lease_lost

FAIR_SHARE_SECONDS = 0.05
"""The longest a run's task runs steps (or instances of a mapped step) back to back before giving the
event loop a turn."""

class RunHandedBack(OrchestratorError):
    """A drained execution stopped before the run ended; the run is left resumable (``interrupted``)."""

    exit_code = 1

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} was handed back before it finished; `orchestrator resume {run_id}` "
                         "or any worker continues it")
        self.run_id = run_id


@dataclass
class RunResult:
    """What a run came to."""

    run_id: str
    status: RunStatus
    output: Any = None
    paused_steps: list[str] = field(default_factory=list)
    failed_steps: list[str] = field(default_factory=list)
    error: str | None = None
    correct: bool | None = None
    """The evaluator's verdict stored with the run's end by this execution (None: not scored here)."""


@dataclass(slots=True)
class StepOutcome:
    """One step's result, sent back to the scheduler as a value (never an exception)."""

    step_id: str
    status: str  # succeeded | failed | gate_failed
    record_id: int
    output: Any = None
    ended_at: float = 0.0
    error: str | None = None
    units: tuple[str, ...] = ()
    """A mapped step's instances (``summarize[7]``) that are waiting for review or failed: the scheduler
    reports those, not the step."""


@dataclass(slots=True)
class Done:
    """A completed step's output, as its consumers read it."""

    record_id: int
    output: Any
    ended_at: float
    seq: int = 0
    """Completion order within this execution: the done map only grows, one entry per step."""
    skipped: bool = False
    """The step did not run (its ``when`` was false, or an upstream step was skipped); its output is null."""


class UpstreamView(Mapping[str, Any]):
    """``ctx.upstream``: the outputs of the steps completed when the attempt started.

    A snapshot without the copy: the done map only grows and numbers its entries, so
    "completed before this attempt" is ``seq < limit``, and a 1000-step run does not copy up to
    1000 outputs into every context. Lookups are safe from worker threads.
    """

    __slots__ = ("done", "limit")

    def __init__(self, done: dict[str, Done]) -> None:
        self.done = done
        self.limit = len(done)

    def __getitem__(self, key: str) -> Any:
        entry = self.done.get(key)
        if entry is None or entry.seq >= self.limit:
            raise KeyError(key)
        return entry.output

    def __contains__(self, key: object) -> bool:
        entry = self.done.get(key) if isinstance(key, str) else None
        return entry is not None and entry.seq < self.limit

    def __iter__(self) -> Iterator[str]:
        return iter(list(itertools.islice(self.done, self.limit)))  # one C-level copy of the keys

    def __len__(self) -> int:
        return self.limit

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class PriorState:
    """Where a run stands according to its records, before an execution continues it."""

    done: dict[str, Done] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    """Steps whose gate failed and that no decision has released."""
    retry_feedback: dict[str, list[GateResult]] = field(default_factory=dict)
    """Steps a reviewer sent back for another attempt, with the verdicts to learn from (and the
    reviewer's comment, as a verdict of gate ``reviewer``)."""
    retry_previous: dict[str, Any] = field(default_factory=dict)
    """The output each of those steps was sent back with."""
    next_attempt: dict[str, int] = field(default_factory=dict)
    instances: dict[str, dict[int, Done]] = field(default_factory=dict)
    """The completed (or skipped) instances of each mapped step, by item index."""
    iterations: dict[str, dict[int, Done]] = field(default_factory=dict)
    """The completed iterations of each loop (by its unit: ``improve``, ``summarize[3]``), by number."""
    tool_resumes: dict[str, ToolResume] = field(default_factory=dict)
    """LLM steps whose tool loop continues where it stopped: a decided tool call, or a checkpoint."""

    @classmethod
    def from_records(cls, records: Sequence[StepRecordView], reviews: Sequence[ReviewView]) -> PriorState:
        """Read the latest record of each step; a retry decision releases its step for a new attempt.

        A superseded latest record (a reviewer fixed a step upstream of it) leaves its step to run
        again with the new upstream output; the record is kept, only its attempt number counts.
        """
        latest = {rec.unit: rec for rec in records}
        decided = {r.record_id: r for r in reviews}
        state = cls()
        for sid, rec in latest.items():
            state.next_attempt[sid] = rec.attempt + 1
            if rec.superseded:
                continue
            if rec.status == "succeeded" and rec.iteration is not None:
                state.iterations.setdefault(unit_name(rec.step_id, rec.index), {})[rec.iteration] = Done(
                    rec.id, rec.output, rec.ended_at)
            elif rec.status in ("succeeded", "skipped") and rec.index is not None:
                state.instances.setdefault(rec.step_id, {})[rec.index] = Done(
                    rec.id, rec.output, rec.ended_at, skipped=rec.status == "skipped")
            elif rec.status in ("succeeded", "skipped"):
                state.done[sid] = Done(rec.id, rec.output, rec.ended_at, len(state.done),
                                       skipped=rec.status == "skipped")
            elif rec.status == "running" and rec.error_type == TOOL_CHECKPOINT:
                resume = tool_resume(rec.output, None, None)  # the process stopped inside the step's tool loop
                if resume is not None:
                    state.tool_resumes[sid] = resume
            elif rec.status == "gate_failed":
                review = decided.get(rec.id)
                if review is not None and review.decision == "retry":
                    state.retry_feedback[sid] = [GateResult(g.passed, g.score, g.reason, {**g.details, "gate": g.gate})
                                                 for g in rec.failed_gates if not g.details.get(GATE_ERROR)]
                    if review.comment:
                        state.retry_feedback[sid].append(GateResult(False, None, review.comment, {"gate": "reviewer"}))
                    state.retry_previous[sid] = rec.output
                elif review is not None and is_approval(rec.error_type) and rec.step_type != "approval" and \
                        (resume := tool_resume(rec.output, rec.llm, review.decision, output_after=review.output_after,
                                               comment=review.comment)) is not None:
                    state.tool_resumes[sid] = resume  # a decided tool call: the step's loop goes on
                elif review is not None and review.decision == "reject":
                    pass  # a rejected iteration of an instance: the instance's own record says it ended
                else:
                    state.waiting.add(sid)  # approve/edit add a newer record; anything else keeps it waiting
        return state


def in_order(units: Iterable[str], order: Sequence[str]) -> list[str]:
    """Units (steps, ``STEP[i]`` instances, ``STEP#n`` iterations, ``STEP > CHILD_UNIT`` paths into child
    runs) in the workflow's order, instances by index, iterations by number."""
    position = {sid: i for i, sid in enumerate(order)}

    def key(unit: str) -> tuple[int, int, int]:
        step_id, index, iteration = parse_unit(path_head(unit))  # a path into a child: by its parent's unit
        return (position.get(step_id, len(position)), -1 if index is None else index,
                -1 if iteration is None else iteration)

    return sorted(units, key=key)


def earliest(*deadlines: float | None) -> float | None:
    """The first of the deadlines that are set; None when none is."""
    return min((d for d in deadlines if d is not None), default=None)


def review_deadline(waiting: Iterable[StepRecordView], timeouts: Mapping[str, float]) -> float | None:
    """When the earliest of these waiting records times out (its end plus its step's ``review_timeout``,
    ``timeouts`` giving them by step); None when none of their steps has one."""
    return min((rec.ended_at + timeouts[rec.step_id] for rec in waiting
                if rec.step_id in timeouts and rec.ended_at is not None), default=None)


def pause_deadline(store: RecordStore, run_id: str, waiting: AbstractSet[str],
                   timeouts: Mapping[str, float]) -> float | None:
    """The review deadline of a run pausing at ``waiting`` (units): read from its records only when one of
    those steps has a ``review_timeout``."""
    if not any(parse_unit(path_head(unit))[0] in timeouts for unit in waiting):
        return None
    records = live_records(store.step_records(run_id))
    return review_deadline((records[unit] for unit in waiting if unit in records), timeouts)


def finish_run(store: RunStore, run_id: str, *, output_step: str, order: Sequence[str], done: Mapping[str, Done],
               waiting: AbstractSet[str], failed: list[str], errors: list[str], lease: Lease | None = None,
               ended: bool = False, outcome: NewOutcome | None = None, evaluator_error: str | None = None,
               review_deadline: Callable[[], float | None] | None = None,
               notifications: Callable[[RunResult], Sequence[NewNotification]] | None = None) -> RunResult:
    """Store how an execution ended (failed, paused or succeeded) and release the run's lease.

    Under a lease the end is written only while the lease is still this execution's; a stalled
    executor whose lease was taken over gets LeaseLostError and writes nothing. ``ended``: the end
    was already committed with the last record (:mod:`orchestrator.engine.group_commit`). A succeeded run's
    evaluator ``outcome`` is stored in the end's transaction; ``evaluator_error`` is kept as the
    succeeded run's error when the evaluator gave none. A paused run's ``review_deadline()`` is stored with
    its pause, for the workers that decide timed-out reviews. ``notifications(result)``: who is told of the
    end, written in its transaction (under a lease only: an unleased execution is a private replay).
    """
    if failed:
        result = RunResult(run_id, "failed", failed_steps=failed, error="; ".join(errors))
    elif waiting:
        result = RunResult(run_id, "paused", paused_steps=in_order(waiting, order))
    else:
        result = RunResult(run_id, "succeeded", output=done[output_step].output,
                           correct=None if outcome is None else bool(outcome.correct))
    if ended:
        return result
    error = result.error or evaluator_error  # only a succeeded run was scored
    if lease is None:
        store.set_run_status(run_id, result.status, output=result.output, error=error, holder=None)
    else:
        deadline = review_deadline() if result.status == "paused" and review_deadline is not None else None
        notes = notifications(result) if notifications is not None else ()
        if not store.end_lease(lease, result.status, output=result.output, error=error, outcome=outcome,
                               review_due=deadline, notifications=notes):
            raise lease_lost(run_id)
    return result
