"""Execute a workflow run on anyio: run ready steps concurrently, checkpoint every attempt,
check gates, and pause the descendants of a step whose gate failed.

Failures come back as values (:class:`StepOutcome`), never as an ExceptionGroup, so one bad
step cannot tear down its independent siblings. A step's record is committed before any
step that consumes it starts, so a crash loses at most the attempts in flight and
``resume`` never re-executes a completed step.
"""

from __future__ import annotations

import contextvars
import hashlib
import heapq
import inspect
import itertools
import os
import socket
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_none

from gates.base import evaluate as evaluate_gate
from gates.base import normalize as normalize_verdict
from orchestrator import graph, jsonio
from orchestrator.context import NextNeed, StepContext
from orchestrator.errors import OrchestratorError, StoreMismatchError
from orchestrator.model import TERMINAL_RUN_STATUSES, GateResult, StepSpec, WorkflowSpec, field_value, parse_reference
from orchestrator.records import StepRecordView
from orchestrator.resolve import resolve_callable
from orchestrator.store import Store

EventHook = Callable[..., None]
"""Called as ``hook(event, **fields)``; accept ``**future_kwargs`` so new fields never break you."""

EXIT_CODES = {"succeeded": 0, "failed": 1, "rejected": 1, "paused": 3, "running": 3, "queued": 3}


@dataclass
class RunResult:
    """What a run came to, as the CLI reports it."""

    run_id: str
    status: str
    output: Any = None
    paused_steps: list[str] = field(default_factory=list)
    failed_steps: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)


@dataclass
class StepOutcome:
    """One step's result, sent back to the scheduler as a value."""

    step_id: str
    status: str  # succeeded | failed | gate_failed
    record_id: int
    output: Any = None
    ended_at: float = 0.0
    error: str | None = None


@dataclass
class _Done:
    record_id: int
    output: Any
    ended_at: float
    seq: int = 0
    """Completion order within this execution: ``done`` only grows, one entry per step."""


class _Upstream(MutableMapping[str, Any]):
    """``ctx.upstream``: the outputs of the steps completed when the attempt started.

    A snapshot without the copy: the executor's ``done`` map only grows and numbers its entries,
    so "completed before this attempt" is ``seq < limit``, and a 1000-step run does not copy up to
    1000 outputs into every context. Writing to it (rare) materializes a private dict first, so
    it behaves like the plain dict it replaces. Lookups are safe from worker threads.
    """

    __slots__ = ("_done", "_limit", "_own")

    def __init__(self, done: dict[str, _Done]) -> None:
        self._done = done
        self._limit = len(done)
        self._own: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        if self._own is not None:
            return self._own[key]
        entry = self._done.get(key)
        if entry is None or entry.seq >= self._limit:
            raise KeyError(key)
        return entry.output

    def __contains__(self, key: object) -> bool:
        if self._own is not None:
            return key in self._own
        entry = self._done.get(key)  # type: ignore[call-overload]
        return entry is not None and entry.seq < self._limit

    def __iter__(self) -> Iterator[str]:
        if self._own is not None:
            return iter(self._own)
        return iter(list(itertools.islice(self._done, self._limit)))  # one C-level copy of the keys

    def __len__(self) -> int:
        return len(self._own) if self._own is not None else self._limit

    def _materialize(self) -> dict[str, Any]:
        if self._own is None:
            self._own = {key: self._done[key].output for key in list(itertools.islice(self._done, self._limit))}
        return self._own

    def __setitem__(self, key: str, value: Any) -> None:
        self._materialize()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._materialize()[key]

    def copy(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return repr(dict(self))


class _AttemptFailed(Exception):
    """An attempt raised; carries the original so tenacity can decide whether to retry."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class _GateRetry(Exception):
    """Blocking gates failed under ``on_gate_fail: retry``: try again with the feedback."""

    def __init__(self, feedback: list[GateResult]) -> None:
        super().__init__("gate failed")
        self.feedback = feedback


def owner_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def idempotency_key(run_id: str, step_id: str) -> str:
    """Stable for a (run, step) across retries and resumes."""
    return hashlib.sha256(f"{run_id}/{step_id}".encode()).hexdigest()[:24]


def _wants_ctx(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "ctx" in params


_CALL_INFO: weakref.WeakKeyDictionary[Any, tuple[bool, bool]] = weakref.WeakKeyDictionary()
"""Per step callable: (declares ``ctx``, is a coroutine function). Inspecting a signature costs more
than a small step; a process running many short runs (a new Executor each) inspects each callable once."""


def _call_info(fn: Any) -> tuple[bool, bool]:
    try:
        return _CALL_INFO[fn]
    except KeyError:
        info = _CALL_INFO[fn] = (_wants_ctx(fn), inspect.iscoroutinefunction(fn))
        return info
    except TypeError:  # not weak-referenceable or not hashable: inspect every time
        return _wants_ctx(fn), inspect.iscoroutinefunction(fn)


_JSON_SCALARS = frozenset({str, int, bool, type(None)})
"""Types whose JSON round trip gives back an equal value of the same type (not float: NaN)."""


def _private(model: Any, name: str) -> Any:
    """A pydantic private attribute (``step._fn``) without pydantic's ``__getattr__`` (µs per access)."""
    try:
        return model.__pydantic_private__[name]
    except (AttributeError, KeyError, TypeError):
        return getattr(model, name)


def _topological_order(spec: WorkflowSpec, deps: dict[str, list[str]], consumers: dict[str, list[str]]) -> list[str]:
    """``graph.topological_order`` without building a networkx graph per Executor: Kahn's algorithm,
    always taking the ready step declared first, as ``lexicographical_topological_sort`` does."""
    ids = spec.step_ids
    index = {sid: i for i, sid in enumerate(ids)}
    if len(index) != len(ids):
        return graph.topological_order(spec)
    indegree = {sid: sum(1 for d in deps[sid] if d in index) for sid in ids}
    heap = [i for i, sid in enumerate(ids) if indegree[sid] == 0]  # ascending, so already a heap
    order: list[str] = []
    while heap:
        sid = ids[heapq.heappop(heap)]
        order.append(sid)
        for user in consumers.get(sid, ()):
            indegree[user] -= 1
            if indegree[user] == 0:
                heapq.heappush(heap, index[user])
    if len(order) != len(ids):  # a cycle: let networkx raise what it raises
        return graph.topological_order(spec)
    return order


def _exception_matches(exc: BaseException, names: list[str], base_dir: str | None) -> bool:
    if not names:
        return True
    for name in names:
        if ":" in name:
            try:
                cls = resolve_callable(name, base_dir)
            except OrchestratorError:
                continue
            if isinstance(cls, type) and isinstance(exc, cls):
                return True
        elif any(k.__name__ == name for k in type(exc).__mro__):
            return True
    return False


class Executor:
    """Runs one workflow spec against one store."""

    trace_incorrect: bool = True
    """Backward-trace an outcome the evaluator scores incorrect (attribution replays turn this off)."""

    def __init__(self, store: Store, spec: WorkflowSpec, *, max_concurrency: int = 8,
                 on_event: EventHook | None = None, workflow_id: int | None = None) -> None:
        self.store = store
        self.spec = spec
        self.max_concurrency = max(1, max_concurrency)
        self.on_event = on_event
        self.workflow_id = workflow_id if workflow_id is not None else store.register_workflow(
            spec.name, str(spec.version), spec.definition(), spec.source)
        self.steps = {s.id: s for s in spec.steps}
        self.deps = {s.id: s.step_dependencies() for s in spec.steps}
        self.base_dir = os.path.dirname(spec.source) if spec.source else None
        consumers = graph.consumers(spec)
        self.order = _topological_order(spec, self.deps, consumers)
        self.next_needs: dict[str, list[NextNeed]] = {}
        for sid, users in consumers.items():
            needs = [NextNeed(step_id=u, agent=self.steps[u].agent_name, needs=self.steps[u].needs,
                              description=self.steps[u].description)
                     for u in users if self.steps[u].needs or self.steps[u].description]
            self.next_needs[sid] = needs
        self._injected_json = {sid: jsonio.dumps([n.to_json() for n in needs]) if needs else None
                               for sid, needs in self.next_needs.items()}
        # the scheduler's static data: topological position and consumers of each step
        self._position = {sid: i for i, sid in enumerate(self.order)}
        self._consumers = consumers

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, **fields)

    # -- entry points ----------------------------------------------------------------------

    async def start(self, inputs: dict[str, Any], *, kind: str = "run", parent_run_id: str | None = None,
                    parent_step: str | None = None, run_id_hook: Callable[[str], None] | None = None) -> RunResult:
        """Create a run for already-converted inputs and execute it."""
        run_id = self.store.create_run(self.workflow_id, self.spec.name, inputs, kind=kind,
                                       parent_run_id=parent_run_id, parent_step=parent_step, owner=owner_token())
        if run_id_hook is not None:
            run_id_hook(run_id)
        self._emit("run_started", run_id=run_id, workflow=self.spec.name, steps=self.order)
        return await self._execute(run_id, inputs, [])  # a new run has no records yet

    async def resume(self, run_id: str) -> RunResult:
        """Continue a paused, interrupted or failed run from its stored records."""
        run = self.store.get_run(run_id)
        if run.status in ("succeeded", "rejected"):
            return RunResult(run_id, run.status, output=run.output, error=run.error)
        self.store.set_run_status(run_id, "running", owner=owner_token())
        self._emit("run_started", run_id=run_id, workflow=self.spec.name, steps=self.order, resumed=True)
        return await self.execute(run_id, run.inputs)

    # -- the scheduler -------------------------------------------------------------------------

    async def execute(self, run_id: str, inputs: dict[str, Any],
                      preset: dict[str, Any] | None = None) -> RunResult:
        """Run every step that can run; ``preset`` maps step ids to outputs to use without executing."""
        return await self._execute(run_id, inputs, self.store.step_records(run_id))

    async def _execute(self, run_id: str, inputs: dict[str, Any], records: list[StepRecordView]) -> RunResult:
        unknown = sorted({r.step_id for r in records} - set(self.steps))
        if unknown:
            raise StoreMismatchError(
                f"run {run_id} has records for step(s) {unknown} that workflow {self.spec.name!r} does not define; "
                "it was started from a different version of the workflow")
        latest: dict[str, StepRecordView] = {}
        for rec in records:
            latest[rec.step_id] = rec
        # reviews only matter for records waiting on one
        reviews = {r.record_id: r for r in self.store.reviews(run_id)} \
            if any(rec.status == "gate_failed" for rec in latest.values()) else {}
        done: dict[str, _Done] = {}
        waiting: set[str] = set()
        retry_feedback: dict[str, list[GateResult]] = {}
        next_attempt: dict[str, int] = {}
        for sid, rec in latest.items():
            next_attempt[sid] = rec.attempt + 1
            if rec.status == "succeeded":
                done[sid] = _Done(rec.id, rec.output, rec.ended_at, len(done))
            elif rec.status == "gate_failed":
                review = reviews.get(rec.id)
                if review is None:
                    waiting.add(sid)
                elif review.decision == "retry":
                    retry_feedback[sid] = [GateResult(g.passed, g.score, g.reason, g.details)
                                           for g in rec.failed_gates]
                else:
                    waiting.add(sid)  # approve/edit add a newer record; anything else keeps it waiting
        blocked = self._descendants(waiting) if waiting else set()
        failed: list[str] = []
        errors: list[str] = []
        in_flight: set[str] = set()
        # Incremental readiness: a step is ready once its count of unfinished dependencies hits 0;
        # ready steps wait in a heap keyed by topological position, so they start in the same
        # order as a scan of self.order would give, without rescanning every step each time.
        order, position, consumers = self.order, self._position, self._consumers
        pending = {sid: sum(1 for d in self.deps[sid] if d not in done) for sid in order}
        ready = [i for i, sid in enumerate(order) if pending[sid] == 0]  # ascending, so already a heap
        # New tasks are spawned from a copy of this task's context, as if from here, even when the
        # spawn happens in the task of the step that just finished. One successor per finishing
        # step is run by that task itself (see report): it sees the context that task had, so an
        # async step's contextvar changes are visible to the step it hands over to, as in a
        # plain sequential program; sync steps run in worker threads on copies and change nothing.
        spawn_context = contextvars.copy_context()

        async with anyio.create_task_group() as tg:
            def schedule(handoff: list[tuple[Any, ...]] | None = None) -> None:
                if failed:
                    return
                while ready and len(in_flight) < self.max_concurrency:
                    sid = order[heapq.heappop(ready)]
                    if sid in done or sid in waiting or sid in blocked or sid in in_flight:
                        continue
                    in_flight.add(sid)
                    args = (run_id, sid, inputs, done, next_attempt.get(sid, 1), retry_feedback.pop(sid, []), report)
                    if handoff is not None and not handoff:
                        handoff.append(args)  # the finishing task runs this one itself: no new task
                    else:
                        tg.start_soon(self._run_step, *args)

            def report(outcome: StepOutcome) -> tuple[Any, ...] | None:
                """Called by a step's task when it has its outcome (its record is committed).

                Returns the arguments of one newly ready step for that task to run next: on a chain
                this saves starting a task per step (~20-40 µs, a third of a step's overhead).
                """
                handoff: list[tuple[Any, ...]] = []
                spawn_context.run(settle, outcome, handoff)
                return handoff[0] if handoff else None

            def settle(outcome: StepOutcome, handoff: list[tuple[Any, ...]] | None = None) -> None:
                in_flight.discard(outcome.step_id)
                if outcome.status == "succeeded":
                    done[outcome.step_id] = _Done(outcome.record_id, outcome.output, outcome.ended_at, len(done))
                    for user in consumers.get(outcome.step_id, ()):
                        pending[user] -= 1
                        if pending[user] == 0:
                            heapq.heappush(ready, position[user])
                elif outcome.status == "gate_failed":
                    waiting.add(outcome.step_id)
                    blocked.update(self._descendants([outcome.step_id]))
                else:
                    failed.append(outcome.step_id)
                    errors.append(f"step {outcome.step_id!r} failed: {outcome.error}")
                schedule(handoff)

            spawn_context.run(schedule)
        return self._finish(run_id, done, waiting, failed, errors)

    def _descendants(self, step_ids: Iterable[str]) -> set[str]:
        """All steps downstream of any of ``step_ids`` (not including them), as graph.descendants."""
        out: set[str] = set()
        stack = list(step_ids)
        while stack:
            for user in self._consumers.get(stack.pop(), ()):
                if user not in out:
                    out.add(user)
                    stack.append(user)
        return out

    def _finish(self, run_id: str, done: dict[str, _Done], waiting: set[str], failed: list[str],
                errors: list[str]) -> RunResult:
        if failed:
            result = RunResult(run_id, "failed", failed_steps=failed, error="; ".join(errors))
            self.store.set_run_status(run_id, "failed", error=result.error, owner=None)
        elif waiting:
            paused = [s for s in self.order if s in waiting]
            result = RunResult(run_id, "paused", paused_steps=paused)
            self.store.set_run_status(run_id, "paused", owner=None)
        else:
            output = done[self.spec.output_step].output
            result = RunResult(run_id, "succeeded", output=output)
            self.store.set_run_status(run_id, "succeeded", output=output, owner=None)
            self._evaluate_outcome(run_id, output)
        self._emit("run_finished", run_id=run_id, status=result.status, paused_steps=result.paused_steps,
                   failed_steps=result.failed_steps, error=result.error)
        return result

    def _evaluate_outcome(self, run_id: str, output: Any) -> None:
        """Score the final output with the workflow's evaluator, if it has one."""
        fn = self.spec._outcome_fn
        if fn is None:
            return
        try:
            value = float(fn(output))
        except Exception as exc:  # an evaluator bug must not lose the finished run
            self._emit("outcome_error", run_id=run_id, error=f"{type(exc).__name__}: {exc}")
            return
        correct = value >= self.spec.outcome_threshold
        outcome_id = self.store.add_outcome(run_id, value=value, correct=correct, source="evaluator",
                                            termination="goal_achieved", reason=f"evaluator {self.spec.outcome}")
        self._emit("outcome", run_id=run_id, value=value, correct=correct)
        if not correct and self.trace_incorrect:
            try:  # an incorrect outcome gets its backward trace at once (attribution replays opt out)
                from orchestrator.attribution.auto import trace_outcome

                trace_outcome(self.store, run_id, outcome_id, spec=self.spec)
            except Exception as exc:  # attribution must never lose the finished run
                self._emit("attribution_error", run_id=run_id, error=f"{type(exc).__name__}: {exc}")

    # -- one step ------------------------------------------------------------------------------

    def _resolve_step_inputs(self, step: StepSpec, inputs: dict[str, Any], done: dict[str, _Done],
                             started: float) -> tuple[dict[str, Any], str | None, str | None]:
        kwargs: dict[str, Any] = {}
        stored: dict[str, Any] = {}
        consumed: list[list[Any]] = []
        for param, ref in step.inputs.items():
            parsed = parse_reference(ref)
            if parsed is None:
                kwargs[param] = stored[param] = ref
            elif parsed[0] == "input":
                kwargs[param] = stored[param] = inputs.get(parsed[1])
            else:
                source = done[parsed[1]]
                value = source.output
                if parsed[2]:
                    value = _get_field(value, parsed[2], step.id, param)
                kwargs[param] = value
                stored[param] = {"$record": source.record_id, "field": parsed[2]} if parsed[2] \
                    else {"$record": source.record_id}
        for dep in self.deps[step.id]:
            source = done[dep]
            consumed.append([source.record_id, dep, round(max(0.0, started - source.ended_at), 6)])
        return (kwargs, jsonio.dumps(stored) if stored else None, jsonio.dumps(consumed) if consumed else None)

    async def _call(self, step: StepSpec, kwargs: dict[str, Any], ctx: StepContext) -> Any:
        fn = _private(step, "_fn")
        call_kwargs = dict(kwargs)
        wants_ctx, is_async = _call_info(fn)
        if wants_ctx:
            call_kwargs["ctx"] = ctx
        if is_async:
            result = await fn(**call_kwargs)
        else:
            result = await anyio.to_thread.run_sync(lambda: fn(**call_kwargs), abandon_on_cancel=True)
            if inspect.isawaitable(result):
                result = await result
        return result

    async def _run_step(self, run_id: str, step_id: str, inputs: dict[str, Any], done: dict[str, _Done],
                        first_attempt: int, feedback: list[GateResult],
                        report: Callable[[StepOutcome], tuple[Any, ...] | None]) -> None:
        """Run a step, then any step the scheduler hands back to this task (see ``report``)."""
        while True:
            step = self.steps[step_id]
            try:
                outcome = await self._attempts(run_id, step, inputs, done, first_attempt, feedback)
            except Exception as exc:  # a bug in the executor itself; still report a value
                outcome = StepOutcome(step_id, "failed", -1, error=f"{type(exc).__name__}: {exc}")
            handed = report(outcome)
            if handed is None:
                return
            run_id, step_id, inputs, done, first_attempt, feedback, report = handed

    async def _attempts(self, run_id: str, step: StepSpec, inputs: dict[str, Any], done: dict[str, _Done],
                        first_attempt: int, feedback: list[GateResult]) -> StepOutcome:
        policy = step.retry
        state = {"feedback": feedback, "last": None}
        if policy.attempts == 1:  # what tenacity does with one attempt, without building it per step
            try:
                return await self._attempt(run_id, step, inputs, done, first_attempt, state, is_last=True)
            except (_AttemptFailed, _GateRetry):
                return state["last"]
        base_dir = self.base_dir
        wait = wait_exponential(multiplier=policy.backoff, max=policy.max_backoff) if policy.backoff else wait_none()

        def should_retry(exc: BaseException) -> bool:
            if isinstance(exc, _GateRetry):
                return True
            return isinstance(exc, _AttemptFailed) and _exception_matches(exc.original, policy.exceptions, base_dir)

        retrying = AsyncRetrying(stop=stop_after_attempt(policy.attempts), wait=wait,
                                 retry=retry_if_exception(should_retry), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    return await self._attempt(run_id, step, inputs, done, first_attempt + number - 1,
                                               state, is_last=number >= policy.attempts)
        except _AttemptFailed:
            return state["last"]
        except _GateRetry:
            return state["last"]
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, run_id: str, step: StepSpec, inputs: dict[str, Any], done: dict[str, _Done],
                       attempt: int, state: dict[str, Any], *, is_last: bool) -> StepOutcome:
        started = time.time()
        try:
            kwargs, stored_inputs, consumed = self._resolve_step_inputs(step, inputs, done, started)
        except KeyError as exc:
            message = str(exc.args[0]) if exc.args else str(exc)
            rid = self.store.insert_step_record(
                run_id, self.workflow_id, step_id=step.id, step_type=step.type, agent=step.agent_name,
                attempt=attempt, status="failed", started_at=started, ended_at=time.time(), inputs=None,
                output=None, error_type="InputError", error_message=message)
            return StepOutcome(step.id, "failed", rid, error=f"InputError: {message}")
        ctx = StepContext(run_id=run_id, step_id=step.id, workflow=self.spec.name, agent=step.agent_name,
                          step_type=step.type, attempt=attempt, idempotency_key=idempotency_key(run_id, step.id),
                          next_needs=self.next_needs[step.id], gate_feedback=list(state["feedback"]),
                          inputs=kwargs, upstream=_Upstream(done),  # type: ignore[arg-type]
                          workflow_inputs=inputs)
        if self.on_event is not None:
            self._emit("step_started", run_id=run_id, step_id=step.id, attempt=attempt, started_at=started)
        common = dict(step_id=step.id, step_type=step.type, agent=step.agent_name, attempt=attempt,
                      started_at=started, inputs=stored_inputs, consumed=consumed,
                      injected=self._injected_json[step.id])
        try:
            if step.timeout is not None:
                with anyio.fail_after(step.timeout):
                    output = await self._call(step, kwargs, ctx)
            else:
                output = await self._call(step, kwargs, ctx)
        except Exception as exc:
            ended = time.time()
            if isinstance(exc, TimeoutError) and step.timeout is not None and ended - started >= step.timeout * 0.99:
                error_type, message = "TimeoutError", f"step {step.id!r} timed out after {step.timeout:g} s"
            else:
                error_type, message = type(exc).__name__, str(exc)
            rid = self.store.insert_step_record(run_id, self.workflow_id, status="failed", ended_at=ended,
                                                output=None, error_type=error_type, error_message=message, **common)
            self._emit("step_finished", run_id=run_id, step_id=step.id, status="failed", attempt=attempt,
                       duration=ended - started, error=f"{error_type}: {message}")
            state["last"] = StepOutcome(step.id, "failed", rid, error=f"{error_type}: {message}")
            raise _AttemptFailed(exc) from exc

        verdicts: list[tuple[str, GateResult, float, str]] = []
        if step.type == "critic":
            try:
                verdict = normalize_verdict(output, "critic")
            except TypeError as exc:
                verdict = GateResult(False, 0.0, f"critic returned an unusable verdict: {exc}")
            verdict = GateResult(verdict.passed, verdict.score, verdict.reason,
                                 {**verdict.details, "verifies": list(step.verifies)})
            output = verdict.to_json()
            verdicts.append(("critic", verdict, 0.0, "block"))
        try:
            output_json = jsonio.dumps(output)
        except jsonio.NotSerializableError as exc:
            ended = time.time()
            message = f"step {step.id!r} returned a value that cannot be stored as JSON: {exc}"
            rid = self.store.insert_step_record(run_id, self.workflow_id, status="failed", ended_at=ended,
                                                output=None, error_type="NotSerializableError",
                                                error_message=message, **common)
            self._emit("step_finished", run_id=run_id, step_id=step.id, status="failed", attempt=attempt,
                       duration=ended - started, error=message)
            return StepOutcome(step.id, "failed", rid, error=message)
        # JSON scalars come back from JSON as themselves; anything else is converted (models -> dicts)
        plain_output = output if type(output) in _JSON_SCALARS else jsonio.loads(output_json)
        ctx.inputs = kwargs
        for gate_spec, gate_obj in zip(step.gates, _private(step, "_gate_objs"), strict=False):
            evaluation = await anyio.to_thread.run_sync(evaluate_gate, gate_obj, gate_spec.label, plain_output, ctx) \
                if getattr(gate_obj, "slow", False) else evaluate_gate(gate_obj, gate_spec.label, plain_output, ctx)
            verdicts.append((gate_spec.label, evaluation.result, evaluation.duration, gate_spec.severity))
        blocking = [v for _, v, _, sev in verdicts if not v.passed and sev == "block"]
        gate_rows = [{"gate": name, "passed": v.passed, "score": v.score, "reason": v.reason,
                      "details": jsonio.dumps(v.details) if v.details else None, "severity": sev,
                      "duration": dur} for name, v, dur, sev in verdicts]
        status, error_type, message = "succeeded", None, None
        if blocking and step.on_gate_fail != "warn":
            reasons = "; ".join(v.reason for v in blocking)
            if step.on_gate_fail == "fail":
                status, error_type, message = "failed", "GateFailed", reasons
            elif step.on_gate_fail == "retry" and not is_last:
                status, error_type, message = "failed", "GateFailed", f"retrying: {reasons}"
            else:
                status, error_type, message = "gate_failed", "GateFailed", reasons
        ended = time.time()
        rid = self.store.insert_step_record(run_id, self.workflow_id, status=status, ended_at=ended,
                                            output=output_json, error_type=error_type, error_message=message,
                                            gates=gate_rows, **common)
        if self.on_event is not None:
            self._emit("step_finished", run_id=run_id, step_id=step.id, status=status, attempt=attempt,
                       duration=ended - started, error=message, gates=len(gate_rows), failed_gates=len(blocking))
        if status == "failed" and step.on_gate_fail == "retry":
            state["feedback"] = blocking
            state["last"] = StepOutcome(step.id, "failed", rid, error=message)
            raise _GateRetry(blocking)
        if status == "failed":
            return StepOutcome(step.id, "failed", rid, error=f"gate failed: {message}")
        return StepOutcome(step.id, status, rid, output=plain_output, ended_at=ended, error=message)


def _get_field(value: Any, path: str, step_id: str, param: str) -> Any:
    try:
        return field_value(value, path)
    except KeyError:
        raise KeyError(f"input {param!r} of step {step_id!r}: the upstream output has no field {path!r}") from None


def is_terminal(status: str) -> bool:
    return status in TERMINAL_RUN_STATUSES
