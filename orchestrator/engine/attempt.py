"""One step, attempt by attempt: resolve inputs, call, check gates, commit the record.

:class:`StepRunner` runs a step through its retry policy (tenacity, with the exceptions the
policy names) and its ``on_gate_fail`` policy, and returns a :class:`StepOutcome` value. Each
attempt is committed as its own record before the outcome is returned, so a step's consumers
never start before its record exists.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from gates.base import GateEvaluation, is_gate_error
from gates.base import evaluate as evaluate_gate
from gates.base import evaluate_async as evaluate_gate_async
from gates.base import normalize as normalize_verdict
from orchestrator.bind.approvals import (
    APPROVAL_MESSAGE,
    AWAITING_APPROVAL,
    TOOL_CHECKPOINT,
    ToolApprovalPending,
    ToolResume,
)
from orchestrator.bind.binding import BoundGate, BoundStep
from orchestrator.bind.invoke import call_step
from orchestrator.bind.isolation import out_of_memory_text
from orchestrator.bind.output_schema import OUTPUT_SCHEMA_ERROR, schema_errors
from orchestrator.bind.threads import POOL
from orchestrator.core import jsonio
from orchestrator.core.errors import LeaseLostError, StoreError
from orchestrator.engine.children import ChildPaused, ChildRuns
from orchestrator.engine.group_commit import GroupCommit
from orchestrator.engine.run_state import Done, RunHandedBack, StepOutcome, UpstreamView
from orchestrator.llm.client import LLMClient
from orchestrator.spec.conditions import ConditionError
from orchestrator.spec.context import CallLog, ModelCall, StepContext
from orchestrator.spec.events import EventHook, StepFinished, StepStarted, Token, Verdict
from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.llm_errors import LLMStepError
from orchestrator.spec.model import GateResult, field_value, parse_reference
from orchestrator.spec.records import join_path, unit_name
from orchestrator.store import GateRow, NewStepRecord, Store
from orchestrator.store.base import lease_lost
from orchestrator.store.off_loop import store_call

_JSON_SCALARS = frozenset({str, int, bool, type(None)})
"""Types whose JSON round trip gives back an equal value of the same type (not float: NaN)."""


def idempotency_key(run_id: str, unit: str) -> str:
    """Stable for a (run, step) across retries and resumes; an instance's unit (``summarize[7]``) gives
    each item its own key."""
    return hashlib.sha256(f"{run_id}/{unit}".encode()).hexdigest()[:24]


class AttemptFailed(Exception):
    """An attempt raised; carries the original so tenacity can decide whether to retry."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(exception_text(original))
        self.original = original


BLOCKED_LOOP_SECONDS = 1.0
"""A step that runs longer than this on the event loop without yielding is named in its timeout
message: no timeout can interrupt it, and every other step of the process waited meanwhile."""


class StepTimedOut(TimeoutError):
    """An attempt outlived its ``timeout``: cancelled at the deadline, or it returned after it
    (it ignored its cancellation, or blocked the event loop so the deadline could not fire)."""


class BlockTimer:
    """Awaits a coroutine while timing each stretch it runs without yielding to the event loop.

    A coroutine only gives the loop back at an ``await`` that suspends; one that calls
    ``time.sleep(3)`` holds every other task (and its own deadline) for 3 s. Driving the coroutine
    here, as ``await`` would, measures that stretch exactly, whichever step it belongs to.
    """

    __slots__ = ("coro", "longest")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.longest = 0.0
        """The longest stretch, in seconds, the coroutine ran without yielding."""

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            began = time.perf_counter()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.longest = max(self.longest, time.perf_counter() - began)
                return stop.value
            except BaseException:
                self.longest = max(self.longest, time.perf_counter() - began)
                raise
            self.longest = max(self.longest, time.perf_counter() - began)
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation delivered to this task: passed on to the step
                value, error = None, exc


class GateRetry(Exception):
    """Blocking gates failed under ``on_gate_fail: retry``: try again with the feedback."""


@dataclass
class AttemptState:
    """What one attempt leaves for the next: the verdicts to learn from, the last outcome."""

    feedback: list[GateResult]
    last: StepOutcome | None = None
    previous: Any = None
    """The output the feedback is about (the model sees it on its next attempt as ``previous``)."""


@dataclass
class RunContext:
    """What every attempt of one execution shares."""

    store: Store
    run_id: str
    workflow: str
    workflow_id: int
    inputs: dict[str, Any]
    done: dict[str, Done]
    on_event: EventHook | None = None
    llm_defaults: LLMConfig | None = None
    lease_token: str | None = None
    """Records are written only while the run's lease has this token (None: no lease, e.g. replays)."""
    writer: GroupCommit | None = None
    """Commits the records, grouping those of steps that finish together (None: each on its own)."""
    previous: Mapping[str, Any] = field(default_factory=dict)
    """Steps a reviewer sent back for another attempt: the output they were sent back with."""
    children: ChildRuns | None = None
    """Starts and continues the child runs of ``workflow:`` steps (None when the workflow has none)."""
    tool_resumes: Mapping[str, ToolResume] = field(default_factory=dict)
    """LLM steps (by unit) whose tool loop continues where it stopped: at a decided tool call, or at the
    checkpoint written around an approved call's execution."""
    stream_tokens: bool = False
    """Every LLM step streams its answer to the listener as ``Token`` events (else those with ``stream: true``)."""
    lease_held: Callable[[], bool] = field(default=lambda: True)
    """Whether the run's lease is still this execution's, asked before every attempt starts (the lease
    keeper's fenced check; always True without a lease). False: the keeper has stopped the execution."""

    def alone(self) -> bool:
        """Whether the calling step is the only one of the run in flight (unknown without a writer: no)."""
        return self.writer is not None and not self.writer.others_running()

    async def record(self, step: BoundStep, attempt: int, started: float, **fields: Any) -> int:
        """Commit an attempt's record; returns once it is durable, with its id. ``item_index`` among
        ``fields`` marks an instance's record."""
        spec = step.spec
        record = NewStepRecord(
            run_id=self.run_id, workflow_id=self.workflow_id, step_id=spec.id, step_type=spec.type,
            agent=spec.agent_name, attempt=attempt, started_at=started, lease_token=self.lease_token, **fields)
        if self.writer is None:
            return await store_call(self.store.insert_step_record, record)
        return await self.writer.write(record)


class StepRunner:
    """Runs one step (or one instance of a mapped step) of one execution through its retry and gate
    policies."""

    def __init__(self, run: RunContext, step: BoundStep, *, index: int | None = None, item: Any = None,
                 iteration: int | None = None, previous: Done | None = None) -> None:
        self.run = run
        self.step = step
        self.index = index
        """The item's position when this runs an instance of a mapped step; None for a plain step."""
        self.item = item
        self.iteration = iteration
        """The iteration when this runs one iteration of a ``repeat:`` step (1-based); None otherwise."""
        self.previous = previous
        """The iteration before this one (its record and output; None on the first): ``$previous``."""
        self.unit = unit_name(step.id, index, iteration)
        self.fields: dict[str, Any] = {} if index is None else {"item_index": index}
        """What every record of this runner carries besides the attempt's own fields."""
        if iteration is not None:
            self.fields["iteration"] = iteration
        function = step.function
        self.started_attempt = 1
        """The number of the attempt under way (or last begun)."""
        self.resume = run.tool_resumes.get(self.unit)
        """Where this step's tool loop continues (None: it starts afresh); moved on by each checkpoint."""
        self.needs_context = function.takes_ctx or function.isolated_ref is not None or bool(step.gates)
        """Whether anything reads the attempt's :class:`StepContext` (the function, a child process,
        a gate); a plain function without gates gets none built (about 1.5 µs a step)."""

    @functools.cached_property
    def idempotency_key(self) -> str:
        return idempotency_key(self.run.run_id, self.unit)

    def context(self, attempt: int, kwargs: dict[str, Any], state: AttemptState) -> StepContext:
        run, step = self.run, self.step
        calls = CallLog("critic" if step.spec.type == "critic" else "step")
        return StepContext(run_id=run.run_id, step_id=step.id, workflow=run.workflow, agent=step.spec.agent_name,
                           step_type=step.spec.type, attempt=attempt,
                           idempotency_key=self.idempotency_key, next_needs=list(step.next_needs),
                           gate_feedback=list(state.feedback), inputs=kwargs, upstream=UpstreamView(run.done),
                           workflow_inputs=run.inputs, llm_defaults=run.llm_defaults, calls=calls,
                           llm=LLMClient(run.llm_defaults, calls), previous=state.previous, index=self.index,
                           iteration=self.iteration,
                           previous_iteration=None if self.previous is None else self.previous.output,
                           tool_resume=self.resume,
                           checkpoint=functools.partial(self.checkpoint, attempt) if step.spec.tools else None,
                           on_token=None if run.on_event is None else functools.partial(self.emit_token, attempt),
                           stream_tokens=run.stream_tokens)

    def emit_token(self, attempt: int, call: int, text: str) -> None:
        """A piece of the step's model answer, to the run's listener (which is shielded: it cannot raise)."""
        if self.run.on_event is not None:
            self.run.on_event(Token(run_id=self.run.run_id, step_id=self.step.id, attempt=attempt, call=call,
                                    text=text, index=self.index, iteration=self.iteration))

    async def checkpoint(self, attempt: int, state: dict[str, Any],
                         calls: Sequence[ModelCall] = ()) -> None:
        """Commit the tool loop's ``state`` around an approved call as a ``running`` record: before the call
        runs (``phase: executing``; a process that stops now must not run it again unasked) and after, with
        its result (``phase: executed``; a resume answers the model with it instead of running it again).
        ``calls``: the model calls made since the attempt's last record, stored with this one."""
        now = time.time()
        phase = state.get("phase")
        call = state.get("call") or {}
        await self.run.record(self.step, attempt, now, status="running", ended_at=now, output=jsonio.dumps(state),
                              error_type=TOOL_CHECKPOINT, model_calls=list(calls),
                              error_message=f"tool call {call.get('name')!r} {phase}", **self.fields)
        self.resume = ToolResume(dict(state))

    async def unforeseen_failure(self, exc: Exception) -> StepOutcome:
        """Record an attempt that broke outside the step's own code (its failure could not be recorded
        the usual way): its type, message and traceback are kept for ``show``, ``trace`` and ``stats``."""
        message = exception_text(exc)
        try:
            rid = await self.run.record(self.step, self.started_attempt, time.time(), status="failed",
                                        ended_at=time.time(), error_type=type(exc).__name__, error_message=message,
                                        traceback=failure_traceback(exc), **self.fields)
        except Exception:  # the store itself refuses: nothing more can be kept than the run's error
            raise exc from None
        return StepOutcome(self.step.id, "failed", rid, error=f"{type(exc).__name__}: {message}", units=self.units())

    async def run_step(self, first_attempt: int, feedback: list[GateResult]) -> StepOutcome:
        if self.step.may_skip and self.iteration is None:  # a loop is skipped (or not) as a whole
            try:
                reason = skip_reason(self.step, self.run.done, self.run.inputs, index=self.index, item=self.item,
                                     per_instance=self.index is not None)
            except ConditionError as exc:
                return await self.condition_failed(first_attempt, exc)
            if reason is not None:
                return await self.skipped(first_attempt, reason)
        policy = self.step.spec.retry
        # the output the feedback is about: the one a reviewer sent back, else (the first iteration of a loop's
        # new round) the iteration before
        state = AttemptState(list(feedback), previous=self.run.previous.get(
            self.unit, None if self.previous is None else self.previous.output) if feedback else None)
        if policy.attempts == 1:  # what tenacity does with one attempt, without building it per step
            try:
                return await self.attempt(first_attempt, state, is_last=True)
            except (AttemptFailed, GateRetry):
                assert state.last is not None
                return state.last
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_none

        wait = wait_exponential(multiplier=policy.backoff, max=policy.max_backoff) if policy.backoff else wait_none()
        retrying = AsyncRetrying(stop=stop_after_attempt(policy.attempts), wait=wait,
                                 retry=retry_if_exception(self.should_retry), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    return await self.attempt(first_attempt + number - 1, state, is_last=number >= policy.attempts)
        except (AttemptFailed, GateRetry):
            pass
        assert state.last is not None
        return state.last

    async def skipped(self, attempt: int, reason: str) -> StepOutcome:
        """Record that the step (or instance) did not run, and why; its consumers read null from it."""
        now = time.time()
        rid = await self.run.record(self.step, attempt, now, status="skipped", ended_at=now, skip_reason=reason,
                                    **self.fields)
        self.emit_finished(attempt, "skipped", 0.0, None)
        return StepOutcome(self.step.id, "skipped", rid, ended_at=now, units=self.units())

    async def condition_failed(self, attempt: int, exc: ConditionError) -> StepOutcome:
        """A ``when`` that raised (a missing field, the sandbox refusing): the step fails with the error."""
        now = time.time()
        rid = await self.run.record(self.step, attempt, now, status="failed", ended_at=now,
                                    error_type="ConditionError", error_message=str(exc), **self.fields)
        self.emit_finished(attempt, "failed", 0.0, f"ConditionError: {exc}")
        return StepOutcome(self.step.id, "failed", rid, error=f"ConditionError: {exc}", units=self.units())

    def units(self) -> tuple[str, ...]:
        return () if self.unit == self.step.id else (self.unit,)

    def should_retry(self, exc: BaseException) -> bool:
        if isinstance(exc, GateRetry):
            return True
        if isinstance(exc, AttemptFailed) and isinstance(exc.original, LLMStepError):
            return False  # the step already re-asked the model ``retry`` times with the validation errors
        return isinstance(exc, AttemptFailed) and self.step.retries(exc.original)

    async def attempt(self, attempt: int, state: AttemptState, *, is_last: bool) -> StepOutcome:
        run, step = self.run, self.step
        if not run.lease_held():  # every attempt, a retry's too: a process that stalled in a backoff starts nothing
            raise lease_lost(run.run_id)
        self.started_attempt = attempt
        started = time.time()
        try:
            kwargs, stored, consumed = resolve_inputs(step, run.inputs, run.done, started, index=self.index,
                                                             item=self.item, iteration=self.iteration,
                                                             previous=self.previous)
        except KeyError as exc:
            message = str(exc.args[0]) if exc.args else str(exc)
            rid = await run.record(step, attempt, started, status="failed", ended_at=time.time(),
                                   error_type="InputError", error_message=message, **self.fields)
            return StepOutcome(step.id, "failed", rid, error=f"InputError: {message}", units=self.units())
        ctx = self.context(attempt, kwargs, state) if self.needs_context else None
        if run.on_event is not None:
            run.on_event(StepStarted(run_id=run.run_id, step_id=step.id, attempt=attempt, started_at=started,
                                     agent=step.spec.agent_name, step_type=step.spec.type, index=self.index,
                                     iteration=self.iteration))
        common: dict[str, Any] = {"inputs": jsonio.dumps(stored) if stored else None, "inputs_value": stored,
                                  "consumed": consumed, "injected": step.injected_json, **self.fields}
        try:
            output = await self.call(kwargs, ctx)
        except ToolApprovalPending as pending:  # the model called a tool that waits for a person's approval
            common.update(llm=llm_json(ctx), model_calls=logged_calls(ctx))
            return await self.await_approval(attempt, started, pending.proposal, common, ctx,
                                             f"waiting for approval of a call of tool {pending.tool!r}")
        except ChildPaused as paused:  # the step waits where its child run waits
            self.emit_finished(attempt, "gate_failed", time.time() - started, str(paused), ctx=ctx,
                               waiting_in_child=True)
            return StepOutcome(step.id, "gate_failed", -1, units=tuple(join_path(self.unit, u) for u in paused.units))
        except RunHandedBack:  # a drain stopped the child run before it ended: so is this step
            self.emit_finished(attempt, "failed", time.time() - started, "handed back", ctx=ctx)
            return StepOutcome(step.id, "held", -1)
        except (LeaseLostError, StoreError):  # a child run's lease or store failed: the whole tree stops
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt from a step are step failures too
            if is_cancellation(exc):
                raise
            if isinstance(exc, LLMStepError):  # no answer fit the schema: a failed check a person can fix
                common.update(llm=llm_json(ctx), model_calls=logged_calls(ctx))
                return await self.settle(attempt, started, invalid_output(exc), ctx, state, common, is_last=is_last,
                                         schema_failure=schema_verdict(exc))
            state.last = await self.failed(attempt, started, exc, {**common, "llm": llm_json(ctx)}, ctx)
            raise AttemptFailed(exc) from exc
        common["llm"] = llm_json(ctx)
        common["model_calls"] = logged_calls(ctx)
        return await self.settle(attempt, started, output, ctx, state, common, is_last=is_last)

    async def await_approval(self, attempt: int, started: float, proposal: Any, common: dict[str, Any],
                             ctx: StepContext | None, message: str) -> StepOutcome:
        """Pause the step for a person's approval of ``proposal``: a waiting record that is no gate failure."""
        ended = time.time()
        rid = await self.run.record(self.step, attempt, started, status="gate_failed", ended_at=ended,
                                    output=jsonio.dumps(proposal), error_type=AWAITING_APPROVAL,
                                    error_message=message, **common)
        self.emit_finished(attempt, "gate_failed", ended - started, message, ctx=ctx, awaiting_approval=True)
        return StepOutcome(self.step.id, "gate_failed", rid, output=proposal, ended_at=ended, error=message,
                           units=self.units())

    def call(self, kwargs: dict[str, Any], ctx: StepContext | None) -> Awaitable[Any]:
        """The call to await (a plain function returning it: one coroutine less per step)."""
        timeout = self.step.spec.timeout
        if timeout is None:
            return self.invoke(kwargs, ctx)
        return self.call_with_timeout(timeout, kwargs, ctx)

    def invoke(self, kwargs: dict[str, Any], ctx: StepContext | None) -> Coroutine[Any, Any, Any]:
        """The step's work: its function, or for a ``workflow:`` step its child run (whose output it returns)."""
        if self.step.child is not None:
            if self.run.children is None:
                raise NotImplementedError(f"step {self.step.id!r} runs a child workflow; this execution (a replay) "
                                          "does not run child workflows")
            return self.run.children.run(self.step, self.unit, kwargs)
        return call_step(self.step.function, kwargs, ctx, alone=self.run.alone())

    async def call_with_timeout(self, timeout: float, kwargs: dict[str, Any], ctx: StepContext | None) -> Any:
        """Call the step under its timeout; the elapsed time when it returns is the ground truth.

        Cancellation at the deadline stops a cooperative async step (and abandons a sync one), but an
        async step may swallow the cancellation, or block the loop so the deadline fires only after it
        returned: either way it returned late, so it is timed out and its output is discarded.
        """
        timer = BlockTimer(self.invoke(kwargs, ctx))
        began = time.monotonic()
        try:
            with anyio.fail_after(timeout) as scope:
                output = await timer
        except TimeoutError as exc:
            if not scope.cancel_called:
                raise  # the step's own TimeoutError, raised before its deadline
            raise StepTimedOut(self.timeout_message(timeout, timer.longest)) from exc
        except Exception as exc:
            if time.monotonic() - began < timeout:
                raise
            raise StepTimedOut(self.timeout_message(timeout, timer.longest, late=True)) from exc
        elapsed = time.monotonic() - began
        if elapsed >= timeout:
            raise StepTimedOut(self.timeout_message(timeout, timer.longest, late=True))
        return output

    def timeout_message(self, timeout: float, blocked: float, *, late: bool = False) -> str:
        message = f"step {self.step.id!r} timed out after {timeout:g} s"
        if blocked > BLOCKED_LOOP_SECONDS:
            return (f"{message}: the event loop was blocked for {blocked:.1f} s: the step did not yield; "
                    "use a sync step or isolation: process")
        if late:
            return f"{message}: it ignored its cancellation and returned late; its output is discarded"
        return message

    async def failed(self, attempt: int, started: float, exc: BaseException, common: dict[str, Any],
               ctx: StepContext | None) -> StepOutcome:
        """Record an attempt that raised (a timeout included)."""
        ended = time.time()
        timeout = self.step.spec.timeout
        if isinstance(exc, StepTimedOut):
            error_type, message = "TimeoutError", str(exc)
        elif isinstance(exc, TimeoutError) and timeout is not None and ended - started >= timeout * 0.99:
            error_type, message = "TimeoutError", f"step {self.step.id!r} timed out after {timeout:g} s"
        else:
            error_type, message = getattr(exc, "type_name", None) or type(exc).__name__, exception_text(exc)
            if isinstance(exc, SystemExit):
                message = f"step {self.step.id!r} called exit({exc.code!r})"
            elif not isinstance(exc, Exception) and not message:
                message = f"step {self.step.id!r} raised {error_type}"
        rid = await self.run.record(self.step, attempt, started, status="failed", ended_at=ended,
                                    error_type=error_type, error_message=message, traceback=failure_traceback(exc),
                                    model_calls=logged_calls(ctx), **common)
        self.emit_finished(attempt, "failed", ended - started, f"{error_type}: {message}", ctx=ctx)
        return StepOutcome(self.step.id, "failed", rid, error=f"{error_type}: {message}", units=self.units())

    def emit_finished(self, attempt: int, status: Any, duration: float, error: str | None, *,
                      verdicts: tuple[Verdict, ...] = (), failed_gates: int = 0,
                      ctx: StepContext | None = None, awaiting_approval: bool = False,
                      waiting_in_child: bool = False) -> None:
        if self.run.on_event is not None:
            llm = ctx.llm_records[-1] if ctx is not None and ctx.llm_records else None
            self.run.on_event(StepFinished(run_id=self.run.run_id, step_id=self.step.id, status=status,
                                           attempt=attempt, index=self.index, iteration=self.iteration,
                                           duration=duration, error=error,
                                           gates=len(verdicts), failed_gates=failed_gates, verdicts=verdicts, llm=llm,
                                           model_calls=tuple(ctx.calls.calls) if ctx is not None else (),
                                           awaiting_approval=awaiting_approval, waiting_in_child=waiting_in_child))

    async def settle(self, attempt: int, started: float, output: Any, ctx: StepContext | None, state: AttemptState,
                     common: dict[str, Any], *, is_last: bool, schema_failure: GateResult | None = None) -> StepOutcome:
        """Check the output's gates and commit the attempt under the step's gate policy.

        ``schema_failure``: the model's output never fit the schema; that is the attempt's one failed
        check (the gates are not asked to judge an output of the wrong shape)."""
        step = self.step
        verdicts: list[tuple[str, GateResult, float, str]] = []
        if schema_failure is not None:
            verdicts.append(("output_schema", schema_failure, 0.0, "block"))
        if step.spec.type == "approval" and step.on_gate_fail != "warn":  # (a replay has nobody to ask)
            return await self.await_approval(attempt, started, output, common, ctx, APPROVAL_MESSAGE)
        if step.spec.type == "critic":
            verdict = critic_verdict(output, step.spec.verifies)
            output = verdict.to_json()
            verdicts.append(("critic", verdict, 0.0, "block"))
        try:
            output_json = jsonio.dumps_strict(output)
        except jsonio.NotSerializableError as exc:
            ended = time.time()
            if isinstance(exc, (jsonio.NonFiniteError, jsonio.NotJsonError)):
                problem = f"step {step.id!r} {exc}"  # "step 's' output field 'scores.2' is NaN; ..."
            else:
                problem = f"step {step.id!r} returned a value that cannot be stored as JSON: {exc}"
            rid = await self.run.record(step, attempt, started, status="failed", ended_at=ended,
                                  error_type=type(exc).__name__, error_message=problem, **common)
            self.emit_finished(attempt, "failed", ended - started, problem, ctx=ctx)
            return StepOutcome(step.id, "failed", rid, error=problem, units=self.units())
        # JSON scalars come back from JSON as themselves; anything else is converted (models -> dicts)
        plain_output = output if type(output) in _JSON_SCALARS else jsonio.loads(output_json)
        mismatches = schema_errors(step.output_schema, plain_output)
        if mismatches:
            problem = (f"step {step.id!r} returned an output that does not fit its output_schema: "
                       f"{'; '.join(mismatches)}")
            ended = time.time()
            rid = await self.run.record(step, attempt, started, status="failed", ended_at=ended, output=output_json,
                                        error_type=OUTPUT_SCHEMA_ERROR, error_message=problem, **common)
            self.emit_finished(attempt, "failed", ended - started, f"{OUTPUT_SCHEMA_ERROR}: {problem}", ctx=ctx)
            return StepOutcome(step.id, "failed", rid, error=f"{OUTPUT_SCHEMA_ERROR}: {problem}", units=self.units())
        for gate in step.gates if schema_failure is None else ():
            assert ctx is not None  # a step with gates always has its context built (needs_context)
            with ctx.calls.owned_by("judge", gate.label):
                evaluation = await self.check_gate(gate, plain_output, ctx)
            verdicts.append((gate.label, evaluation.result, evaluation.duration, gate.severity))
        if step.gates and schema_failure is None:
            assert ctx is not None
            common["model_calls"] = logged_calls(ctx)
        blocking = [v for _, v, _, sev in verdicts if not v.passed and sev == "block"]
        status, message = gate_policy(step.on_gate_fail, blocking, is_last=is_last)
        ended = time.time()
        rid = await self.run.record(step, attempt, started, status=status, ended_at=ended, output=output_json,
                              output_value=plain_output,
                              error_type="GateFailed" if message else None, error_message=message,
                              gates=[gate_row(name, v, dur, sev) for name, v, dur, sev in verdicts], **common)
        if self.run.on_event is not None:
            self.emit_finished(attempt, status, ended - started, message, failed_gates=len(blocking), ctx=ctx,
                               verdicts=tuple(Verdict(n, v.passed, v.score, v.reason, sev)
                                              for n, v, _, sev in verdicts))
        if status == "failed" and step.on_gate_fail == "retry":
            # a check that broke says nothing about the answer: only real verdicts go back to the model
            state.feedback = [named(name, v) for name, v, _, sev in verdicts
                              if not v.passed and sev == "block" and not is_gate_error(v)]
            state.previous = plain_output
            state.last = StepOutcome(step.id, "failed", rid, error=message, units=self.units())
            raise GateRetry()
        if status == "failed":
            return StepOutcome(step.id, "failed", rid, error=f"gate failed: {message}", units=self.units())
        return StepOutcome(step.id, status, rid, output=plain_output, ended_at=ended, error=message,
                           units=self.units())

    async def check_gate(self, gate: BoundGate, output: Any, ctx: StepContext) -> GateEvaluation:
        """One gate's verdict, within its budget (its own ``timeout:``, else the step's ``timeout``).

        A gate that may block (user code, a model call, embeddings) runs on a daemon worker thread, so
        the loop, the lease's heartbeat and Ctrl-C go on meanwhile; past its budget it is abandoned (its
        thread runs on until it returns, never keeping the process alive) and the verdict fails, naming
        the gate and the budget. A quick built-in gate runs on the loop; one that returns past its budget
        fails the same way.
        """
        own = gate.timeout is not None
        budget = gate.timeout if own else self.step.spec.timeout
        began = time.perf_counter()
        if gate.is_async:  # awaited here: its model calls and sleeps give the loop back
            with anyio.move_on_after(budget if budget is not None else math.inf) as scope:
                evaluation = await evaluate_gate_async(gate.check, gate.label, output, ctx)
            if scope.cancelled_caught:
                return gate_overrun(gate.label, budget, own, time.perf_counter() - began)
        elif not gate.slow:
            evaluation = evaluate_gate(gate.check, gate.label, output, ctx)
        else:
            call = functools.partial(evaluate_gate, gate.check, gate.label, output, ctx)
            with anyio.move_on_after(budget if budget is not None else math.inf) as scope:
                evaluation = await POOL.run(call)
            if scope.cancelled_caught:
                return gate_overrun(gate.label, budget, own, time.perf_counter() - began)
        if budget is not None and evaluation.duration > budget:
            return gate_overrun(gate.label, budget, own, evaluation.duration)
        return evaluation


def gate_overrun(label: str, budget: float | None, own: bool, elapsed: float) -> GateEvaluation:
    """The failed verdict of a gate that did not finish within its budget."""
    whose = "its timeout" if own else "the step's timeout"
    reason = f"gate {label!r} took longer than its budget of {budget:g} s ({whose})"
    return GateEvaluation(gate=label, duration=elapsed, result=GateResult(
        passed=False, score=0.0, reason=reason, details={"error": "GateTimeout", "budget": budget}))


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or what is known of it when the exception's own ``__str__`` raises: the step's
    failure is still recorded with its type and traceback, whatever its message does. A MemoryError
    raised here (not in a step's own process: that one comes as text) ran out in the orchestrator's
    process, and says so."""
    if isinstance(exc, MemoryError):
        return out_of_memory_text(exc, "in the orchestrator's process (`isolation: process` gives a step a "
                                       "process of its own)")
    try:
        return str(exc)
    except Exception as broken:  # noqa: BLE001 (user code: any error at all)
        return f"(its message could not be read: __str__ raised {type(broken).__name__})"


def failure_traceback(exc: BaseException) -> str | None:
    """The full traceback of a step's exception, as stored next to its one-line error.

    A child process formats its own (``isolation: process``): the parent only sees the message. A
    timeout has none worth keeping: it says where the deadline struck, not what went wrong.
    """
    child = getattr(exc, "child_traceback", None)
    if child:
        return str(child)
    if isinstance(exc, StepTimedOut):
        return None
    return "".join(traceback.format_exception(exc))


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the event loop cancelling the attempt (never a step failure; it propagates)."""
    return isinstance(exc, (anyio.get_cancelled_exc_class(), GeneratorExit))


def llm_json(ctx: StepContext | None) -> str | None:
    """The attempt's model call record as stored: the last one when a step made several."""
    return jsonio.dumps(ctx.llm_records[-1]) if ctx is not None and ctx.llm_records else None


def logged_calls(ctx: StepContext | None) -> list[ModelCall]:
    """The attempt's model calls, every one in order, as the store writes them."""
    return list(ctx.calls.calls) if ctx is not None else []


def named(gate: str, verdict: GateResult) -> GateResult:
    """A verdict that carries its gate's name, as retry feedback does (prompts say which check failed)."""
    return GateResult(verdict.passed, verdict.score, verdict.reason, {**verdict.details, "gate": gate})


def gate_policy(on_gate_fail: str, blocking: list[GateResult], *, is_last: bool) -> tuple[str, str | None]:
    """The record status and message for an attempt whose blocking gates gave these verdicts.

    Under ``retry``, an attempt whose only failures are gate errors (the check broke) pauses for a
    person instead: another answer cannot mend a judge that does not answer."""
    if not blocking or on_gate_fail == "warn":
        return "succeeded", None
    reasons = "; ".join(v.reason for v in blocking)
    if on_gate_fail == "fail":
        return "failed", reasons
    if on_gate_fail == "retry" and not is_last and not all(is_gate_error(v) for v in blocking):
        return "failed", f"retrying: {reasons}"
    return "gate_failed", reasons


def invalid_output(exc: LLMStepError) -> Any:
    """What the model last answered when it never fit the schema: its JSON if it parses, else the text."""
    text = exc.record.response
    try:
        return jsonio.loads(text)
    except ValueError:
        return text


def schema_verdict(exc: LLMStepError) -> GateResult:
    """The failed ``output_schema`` check of an LLM step whose answers never fit its schema."""
    return GateResult(False, 0.0, str(exc), {"errors": list(exc.record.validation_errors)})


def critic_verdict(output: Any, verifies: list[str]) -> GateResult:
    """A critic's return value as its verdict, naming the steps it verified."""
    try:
        verdict = normalize_verdict(output, "critic")
    except TypeError as exc:
        verdict = GateResult(False, 0.0, f"critic returned an unusable verdict: {exc}")
    return GateResult(verdict.passed, verdict.score, verdict.reason, {**verdict.details, "verifies": list(verifies)})


def gate_row(name: str, verdict: GateResult, duration: float, severity: str) -> GateRow:
    return GateRow(gate=name, passed=verdict.passed, score=verdict.score, reason=verdict.reason,
                   details=jsonio.dumps(verdict.details) if verdict.details else None, severity=severity,
                   duration=duration)


parsed_reference = functools.lru_cache(maxsize=65536)(parse_reference)
""":func:`parse_reference` of a reference string, parsed once per process rather than per attempt."""


def resolve_inputs(step: BoundStep, inputs: dict[str, Any], done: Mapping[str, Done], started: float, *,
                   index: int | None = None, item: Any = None, iteration: int | None = None,
                   previous: Done | None = None) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """The attempt's keyword arguments, the inputs as stored (links to records; dumped by the caller, who
    also gives the store the dict itself for its digest), and causal links.
    ``index``/``item``: an instance's position and item, for ``$index`` and ``$item`` references;
    ``iteration``/``previous``: a loop's iteration and the one before it (None on the first), for
    ``$iteration`` and ``$previous`` (stored as a link to that iteration's record)."""
    kwargs: dict[str, Any] = {}
    stored: dict[str, Any] = {}
    references: Iterable[tuple[str, Any]] = step.spec.inputs.items()
    if step.function.loop_parameters:  # a loop's function declaring ``previous``/``iteration`` is given them
        references = [*references, *((name, f"${name}") for name in step.function.loop_parameters)]
    for param, ref in references:
        parsed = parsed_reference(ref) if type(ref) is str else None
        if parsed is None:
            kwargs[param] = stored[param] = ref
        elif parsed[0] == "input":
            kwargs[param] = stored[param] = inputs.get(parsed[1])
        elif parsed[0] == "index":
            kwargs[param] = stored[param] = index
        elif parsed[0] == "item":
            value = item
            if parsed[2]:
                try:
                    value = field_value(item, parsed[2])
                except KeyError:
                    raise KeyError(f"input {param!r} of step {unit_name(step.id, index)!r}: item {index} has no "
                                   f"field {parsed[2]!r}") from None
            kwargs[param] = stored[param] = value
        elif parsed[0] == "iteration":
            kwargs[param] = stored[param] = iteration
        elif parsed[0] == "previous":
            if previous is None:  # the first iteration: nothing before it
                kwargs[param] = stored[param] = None
                continue
            kwargs[param], stored[param] = linked_value(
                previous.output, previous.record_id, parsed[2],
                f"input {param!r} of step {unit_name(step.id, index, iteration)!r}: the previous iteration's output")
        else:
            source = done[parsed[1]]
            value = source.output
            if source.skipped:  # join: any; a skipped step's output (and its fields) read as null
                kwargs[param] = None
                stored[param] = {"$record": source.record_id}
                continue
            kwargs[param], stored[param] = linked_value(
                value, source.record_id, parsed[2], f"input {param!r} of step {step.id!r}: the upstream output")
    for param, literal in step.spec.params.items():
        kwargs[param] = stored[param] = literal
    consumed = [[done[dep].record_id, dep, round(max(0.0, started - done[dep].ended_at), 6)]
                for dep in step.dependencies]
    if previous is not None and iteration is not None:  # an iteration follows from the one before it
        consumed.append([previous.record_id, unit_name(step.id, index, iteration - 1),
                         round(max(0.0, started - previous.ended_at), 6)])
    return kwargs, stored, jsonio.dumps(consumed) if consumed else None


def linked_value(output: Any, record_id: int, field: str | None, whose: str) -> tuple[Any, dict[str, Any]]:
    """An input read from another record's output (an upstream step's, or the previous iteration's): the value
    (the output, or its ``field``) and what is stored for it, a link to that record. KeyError naming ``whose``
    output lacks the field."""
    if not field:
        return output, {"$record": record_id}
    try:
        return field_value(output, field), {"$record": record_id, "field": field}
    except KeyError:
        raise KeyError(f"{whose} has no field {field!r}") from None


def skip_reason(step: BoundStep, done: Mapping[str, Done], inputs: dict[str, Any], *, index: int | None = None,
                item: Any = None, per_instance: bool = False) -> str | None:
    """Why the step (or, with ``per_instance``, one instance of it) does not run, or None when it runs.

    A step is skipped when an upstream step was skipped (``join: all``, the default) or every one was and
    it reads no workflow input (``join: any``: a workflow input is always present), or when its ``when``
    is false. On a mapped step the join and a ``when`` that does not read ``item``/``index`` are decided
    once for the whole step; a ``when`` that does is decided
    per instance. ConditionError when the condition raises.
    """
    from orchestrator.spec import conditions

    spec = step.spec
    if not per_instance:
        skipped = [dep for dep in step.dependencies if done[dep].skipped]
        if skipped and spec.join == "all":
            return f"upstream {skipped[0]} was skipped"
        if skipped and len(skipped) == len(step.dependencies) and not spec.reads_workflow_inputs:
            # join: any runs with any input present, and a workflow input always is
            return f"every upstream step was skipped ({', '.join(skipped)})"
    if spec.when is None:
        return None
    names = conditions.names_read(spec.when)
    reads_item = bool(names & conditions.CONDITION_NAMES_ON_MAPPED_STEP)
    if spec.mapped and reads_item != per_instance:
        return None  # decided at the other level
    values: dict[str, Any] = {name: done[name].output for name in names if name in done}
    values["inputs"] = inputs
    if per_instance:
        values["item"], values["index"] = item, index
    return conditions.false_reason(spec.when, values, step.condition)
