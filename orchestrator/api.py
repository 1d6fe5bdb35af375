"""A typed Python API that does what the CLI does: :class:`Orchestrator`.

Every method returns a pydantic model with the keys of the matching ``--json`` document (built by
the same functions: :mod:`orchestrator.engine.documents`, :mod:`orchestrator.spec.records`), so a script that
parses the CLI's JSON and one that calls this API read the same fields. Models allow extra keys:
the documents gain keys over time, never lose them.

Blocking methods (``run``, ``approve``...) start their own event loop; inside a running one (a
notebook cell, an async web handler) they raise InsideEventLoopError naming their ``a``-prefixed
async twin, which executes on the caller's loop instead::

    with Orchestrator("sqlite:///runs.db") as orch:
        run = orch.run("workflows/procurement/procurement.yaml", {"inject_fault": True})
        if run.status == "paused":
            run = orch.approve(run.run_id, comment="checked by hand")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import aclosing
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ConfigDict

from orchestrator.attribution.replay import MISSING
from orchestrator.attribution.stats import StatsReport
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.python_workflow import Workflow
from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core.errors import InputError
from orchestrator.engine.documents import run_document, runs_page_document
from orchestrator.engine.executor import new_lease
from orchestrator.service.backtest import BacktestReport, GateBacktest
from orchestrator.service.listing import run_query
from orchestrator.service.review import Decision
from orchestrator.service.runner import (
    InsideEventLoopError,
    continue_run,
    continue_run_async,
    refuse_inside_event_loop,
    start_run,
    start_run_async,
)
from orchestrator.service.streaming import DEFAULT_CAPACITY, EventBuffer, EventsDropped, StreamItem
from orchestrator.spec.events import EventHook
from orchestrator.store import Store, open_store
from orchestrator.store.run_prefix import resolve_run_id

__all__ = ["Orchestrator", "RunDetail", "RunList", "RunSummary", "StepDetail", "GateVerdict", "ReviewDetail",
           "OutcomeDetail", "AttributionDetail", "Candidate", "LabelDetail", "InsideEventLoopError",
           "WorkflowLike", "EventsDropped", "StreamItem", "BacktestReport", "GateBacktest", "DatasetDetail",
           "ExampleDetail", "ExperimentDetail", "Comparison"]

WorkflowLike = str | Path | Workflow | BoundWorkflow
"""A workflow file (``.yaml``/``.py``), a :class:`~orchestrator.bind.python_workflow.Workflow` or a bound workflow."""



class _Document(BaseModel):
    """A JSON document of the CLI as a model: the documented keys typed, later keys kept as extras."""

    model_config = ConfigDict(extra="allow")


class GateVerdict(_Document):
    """One gate's verdict on one step record."""

    gate: str
    passed: bool
    score: float | None = None
    reason: str = ""
    severity: str = "block"
    details: dict[str, Any] = {}


class StepDetail(_Document):
    """The latest live record of one step (``show --json`` ``steps``)."""

    step_id: str
    type: str
    agent: str
    status: str
    attempt: int
    origin: str
    record_id: int
    started_at: str | None = None
    ended_at: str | None = None
    duration: float = 0.0
    inputs: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None
    gates: list[GateVerdict] = []
    llm: dict[str, Any] | None = None
    index: int | None = None
    """An instance's position in its ``for_each`` list; None for a step's own record."""
    iteration: int | None = None
    """A ``repeat:`` step's iteration (1-based); None for a step's own record (a loop's result)."""
    unit: str = ""
    """The step id, ``summarize[3]`` for an instance, ``improve#2`` for an iteration."""
    pause: str | None = None
    """On a ``gate_failed`` record, the kind of pause: ``gate``, ``approval`` or ``tool_call``; else None."""


class PauseDetail(_Document):
    """An open pause of the run's tree (``show --json`` ``pauses``): its own, or one inside a child run."""

    path: str
    """From the run shown: ``scored``, or ``research > retrieve`` inside the child run ``research`` started."""
    step: str
    """The run's own unit it holds up (``research``)."""
    run_id: str
    """The run that holds the waiting record (a child run's id for a pause inside it)."""
    unit: str
    pause: str
    """``gate``, ``approval`` or ``tool_call``."""
    reason: str = ""
    since: str | None = None


class ReviewDetail(_Document):
    """A review decision on the run."""

    step_id: str
    decision: str
    reviewer: str
    comment: str | None = None
    forced: bool = False
    created_at: str | None = None


class OutcomeDetail(_Document):
    """A final-output signal: reward, correctness, where it came from."""

    value: float
    correct: bool | None = None
    source: str
    termination: str
    reason: str | None = None
    reviewer: str | None = None
    created_at: str | None = None


class RunDetail(_Document):
    """One run step by step: the ``run --json`` / ``show --json`` document."""

    run_id: str
    workflow: str
    status: str
    output: Any = None
    error: str | None = None
    inputs: dict[str, Any] = {}
    created_at: str | None = None
    steps: list[StepDetail] = []
    paused_steps: list[str] = []
    pauses: list[PauseDetail] = []
    reviews: list[ReviewDetail] = []
    outcomes: list[OutcomeDetail] = []
    llm: dict[str, Any] | None = None

    def step(self, step_id: str) -> StepDetail:
        """The latest live record of ``step_id``: a unit (``summarize[3]``, ``improve#2``), else the step's own
        record (a map's collected list, a loop's result); KeyError naming the steps there are."""
        for s in self.steps:
            if (s.unit or s.step_id) == step_id:
                return s
        for s in self.steps:
            if s.step_id == step_id:
                return s
        raise KeyError(f"run {self.run_id} has no live record of step {step_id!r}; "
                       f"steps: {[s.unit or s.step_id for s in self.steps]}")


class RunSummary(_Document):
    """One listed run (an item of ``runs --json``)."""

    run_id: str
    workflow: str
    status: str
    created_at: str | None = None
    kind: str = "run"
    outcome: float | None = None
    correct: bool | None = None
    blamed_step: str | None = None
    waiting_step: str | None = None
    waiting_steps: list[str] = []
    gate_reason: str | None = None
    llm: dict[str, Any] | None = None


class RunList(BaseModel):
    """One page of listed runs, newest first, and how many the filters keep in all."""

    runs: list[RunSummary]
    total: int
    offset: int
    limit: int

    @property
    def more(self) -> bool:
        """Whether runs after this page exist (ask again with ``offset=offset + len(runs)``)."""
        return self.offset + len(self.runs) < self.total


class Candidate(_Document):
    """One step's share of the blame."""

    step_id: str
    agent: str
    credit: float
    evidence: dict[str, Any] = {}


class AttributionDetail(_Document):
    """An attribution record: the ``trace --json`` / ``attribute --json`` document."""

    run_id: str
    method: str
    blamed_step: str | None = None
    confidence: float | None = None
    candidates: list[Candidate] = []


class LabelDetail(_Document):
    """What a label stored: the ``label --json`` document."""

    run_id: str
    outcome_id: int
    value: float
    correct: bool
    blamed_step: str | None = None
    confidence: float | None = None
    attribution_id: int | None = None
    explanation: str | None = None


class ExampleDetail(_Document):
    """One example of a dataset (``dataset show --json``, ``examples``)."""

    id: int
    position: int
    version: int
    inputs: dict[str, Any]
    reference: Any = None
    label: Any = None
    source_run_id: str | None = None


class DatasetDetail(_Document):
    """A dataset at a version: the ``dataset show --json`` document."""

    name: str
    version: int
    size: int
    description: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    shown_version: int | None = None
    examples: list[ExampleDetail] = []


class ExperimentDetail(_Document):
    """An experiment, what its runs came to and each example's run: the ``experiment show --json`` document."""

    name: str
    dataset: str
    dataset_version: int
    workflow: str
    status: str
    params: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []


class Comparison(_Document):
    """Two experiments (or ``baseline``) example by example: the ``experiment compare --json`` document."""

    a: str
    b: str
    dataset: str
    dataset_version: int
    examples: int
    changed_steps: list[str]
    flips: dict[str, int]
    flips_by_step: list[dict[str, Any]]
    aggregates: dict[str, dict[str, Any]]
    gates: list[dict[str, Any]]
    per_example: list[dict[str, Any]]


class Orchestrator:
    """Runs, reviews, labels and explains workflows against one store: everything the CLI does, typed.

    ``db`` is a store URL as ``--db`` takes it (default: ``$ORCHESTRATOR_DB``, else the SQLite file
    under ``./.orchestrator/``). Use it as a context manager, or call :meth:`close`, to release the store.
    """

    def __init__(self, db: str | None = None, *, reviewer: str | None = None,
                 max_concurrency: int = DEFAULT_CONCURRENCY) -> None:
        """Open the store; ``reviewer`` is recorded on decisions and labels that name nobody."""
        self.store: Store = open_store(db)
        self.reviewer = reviewer
        self.max_concurrency = max_concurrency

    def __enter__(self) -> Orchestrator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store's connections; the orchestrator is unusable afterwards."""
        self.store.close()

    # -- running -------------------------------------------------------------------------------

    def run(self, workflow: WorkflowLike, inputs: Mapping[str, object] | None = None, *,
            max_concurrency: int | None = None, on_event: EventHook | None = None, tokens: bool = False) -> RunDetail:
        """Start a run and execute it to its end or first pause (status ``paused``: review it).

        Inputs are checked, converted and given their declared defaults as with ``--input``. ``on_event`` is
        called with each event (:mod:`orchestrator.spec.events`) on the executor's loop as it happens; one
        that raises is logged once and changes nothing that happened. ``tokens``: every LLM step's answer reaches
        ``on_event`` piece by piece as it is generated (``Token`` events); without it, only the answers of steps
        with ``stream: true`` do. What is stored is the same either way.
        """
        refuse_inside_event_loop("Orchestrator.run()", "await Orchestrator.arun(...)")
        result = start_run(self.store, self._bind(workflow), dict(inputs or {}),
                           max_concurrency=max_concurrency or self.max_concurrency, on_event=on_event,
                           stream_tokens=tokens)
        return self.get_run(result.run_id)

    async def arun(self, workflow: WorkflowLike, inputs: Mapping[str, object] | None = None, *,
                   max_concurrency: int | None = None, on_event: EventHook | None = None,
                   tokens: bool = False) -> RunDetail:
        """:meth:`run` on the caller's event loop: steps run concurrently with whatever else it does."""
        bound = await anyio.to_thread.run_sync(self._bind, workflow)
        result = await start_run_async(self.store, bound, dict(inputs or {}),
                                       max_concurrency=max_concurrency or self.max_concurrency, on_event=on_event,
                                       stream_tokens=tokens)
        return await self._detail(result.run_id)

    def resume(self, run_id: str, *, on_event: EventHook | None = None, tokens: bool = False) -> RunDetail:
        """Continue a paused, interrupted or failed run; completed steps never run again."""
        refuse_inside_event_loop("Orchestrator.resume()", "await Orchestrator.aresume(...)")
        run_id = self._run_id(run_id)
        continue_run(self.store, run_id, max_concurrency=self.max_concurrency, on_event=on_event, stream_tokens=tokens)
        return self.get_run(run_id)

    async def aresume(self, run_id: str, *, on_event: EventHook | None = None, tokens: bool = False) -> RunDetail:
        """:meth:`resume` on the caller's event loop."""
        from orchestrator.service.runner import claim

        run_id = await anyio.to_thread.run_sync(self._run_id, run_id)
        lease = await anyio.to_thread.run_sync(claim, self.store, run_id)
        await continue_run_async(self.store, run_id, lease=lease, max_concurrency=self.max_concurrency,
                                 on_event=on_event, stream_tokens=tokens)
        return await self._detail(run_id)

    # -- streaming -----------------------------------------------------------------------------

    def stream(self, workflow: WorkflowLike, inputs: Mapping[str, object] | None = None, *,
               max_concurrency: int | None = None, buffer: int = DEFAULT_CAPACITY,
               tokens: bool = False) -> Iterator[StreamItem]:
        """:meth:`run`, yielding its events as they happen, in order, ending with the run's ``RunFinished``.

        The run executes in a thread of its own; ``buffer`` events wait for a consumer that reads slowly,
        and beyond that new ones are dropped (an :class:`EventsDropped` says how many): a slow consumer
        never stalls the run, and nothing stored is ever dropped. A consumer that stops early waits for
        the run to end or pause. Read the run with :meth:`get_run` (the ``run_id`` of any event). ``tokens``: as
        for :meth:`run`, every LLM step's answer comes piece by piece (``Token`` events, kept while the buffer
        is less than half full).
        """
        refuse_inside_event_loop("Orchestrator.stream()", "Orchestrator.astream(...)")
        bound = self._bind(workflow)  # a bad workflow is refused here, before anything starts
        concurrency = max_concurrency or self.max_concurrency
        return self._stream(lambda hook: start_run(self.store, bound, dict(inputs or {}), max_concurrency=concurrency,
                                                   on_event=hook, stream_tokens=tokens), buffer)

    def resume_stream(self, run_id: str, *, buffer: int = DEFAULT_CAPACITY,
                      tokens: bool = False) -> Iterator[StreamItem]:
        """:meth:`resume`, yielding its events as :meth:`stream` does."""
        refuse_inside_event_loop("Orchestrator.resume_stream()", "Orchestrator.aresume_stream(...)")
        run_id = self._run_id(run_id)
        return self._stream(lambda hook: continue_run(self.store, run_id, max_concurrency=self.max_concurrency,
                                                      on_event=hook, stream_tokens=tokens), buffer)

    async def astream(self, workflow: WorkflowLike, inputs: Mapping[str, object] | None = None, *,
                      max_concurrency: int | None = None, buffer: int = DEFAULT_CAPACITY,
                      tokens: bool = False) -> AsyncIterator[StreamItem]:
        """:meth:`arun`, yielding its events as they happen (on the caller's event loop), as :meth:`stream`."""
        bound = await anyio.to_thread.run_sync(self._bind, workflow)
        concurrency = max_concurrency or self.max_concurrency
        async with aclosing(self._astream(lambda hook: start_run_async(
                self.store, bound, dict(inputs or {}), max_concurrency=concurrency, on_event=hook,
                stream_tokens=tokens), buffer)) as items:
            async for item in items:  # closed with this generator: a consumer that stops early waits for the run
                yield item

    async def aresume_stream(self, run_id: str, *, buffer: int = DEFAULT_CAPACITY,
                             tokens: bool = False) -> AsyncIterator[StreamItem]:
        """:meth:`aresume`, yielding its events as :meth:`stream` does."""
        from orchestrator.service.runner import claim

        run_id = await anyio.to_thread.run_sync(self._run_id, run_id)
        lease = await anyio.to_thread.run_sync(claim, self.store, run_id)
        async with aclosing(self._astream(lambda hook: continue_run_async(
                self.store, run_id, lease=lease, max_concurrency=self.max_concurrency, on_event=hook,
                stream_tokens=tokens),
                buffer)) as items:
            async for item in items:
                yield item

    @staticmethod
    def _stream(execute: Callable[[EventHook], object], capacity: int) -> Iterator[StreamItem]:
        buffer = EventBuffer(capacity)

        def work() -> None:
            error: BaseException | None = None
            try:
                execute(buffer.put)
            except BaseException as exc:  # handed to the consumer, raised there once it has the events
                error = exc
            finally:
                buffer.close(error)

        thread = threading.Thread(target=work, name="orchestrator-stream", daemon=True)
        thread.start()
        try:
            while (item := buffer.get()) is not None:
                yield item
        finally:
            thread.join()  # a consumer that stops early leaves no execution behind it
        buffer.raise_if_failed()

    @staticmethod
    async def _astream(execute: Callable[[EventHook], Awaitable[object]],
                       capacity: int) -> AsyncGenerator[StreamItem, None]:
        buffer = EventBuffer(capacity)
        arrived = asyncio.Event()

        def hook(event: Any) -> None:
            buffer.put(event)
            arrived.set()

        async def work() -> None:
            error: BaseException | None = None
            try:
                await execute(hook)
            except BaseException as exc:  # handed to the consumer, raised there once it has the events
                error = exc
            finally:
                buffer.close(error)
                arrived.set()

        task = asyncio.get_running_loop().create_task(work())
        try:
            while not buffer.finished:
                item = buffer.get(timeout=0)
                if item is not None:
                    yield item
                    continue
                arrived.clear()
                if buffer.finished or buffer.get_ready():
                    continue
                await arrived.wait()
        finally:
            await task  # a consumer that stops early leaves no execution behind it
        buffer.raise_if_failed()

    # -- reading -------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunDetail:
        """One run step by step, with gate verdicts, reviews and outcomes (``show --json``)."""
        return RunDetail.model_validate(run_document(self.store, self._run_id(run_id)))

    def list_runs(self, *, status: str | None = None, workflow: str | None = None,
                  outcome: Literal["correct", "incorrect"] | None = None, blamed: str | None = None,
                  since: str | float | datetime | None = None,
                  kind: Literal["original", "replay", "counterfactual"] | None = "original",
                  limit: int = 50, offset: int = 0) -> RunList:
        """One page of runs, newest first, filtered as ``orchestrator runs`` filters them.

        ``since`` is epoch seconds, a datetime, an ISO date/time or a duration (``2h``, ``7d``);
        ``kind=None`` lists every kind.
        """
        query = run_query(status=status, workflow=workflow, outcome=outcome, blamed=blamed, since=since, kind=kind,
                          limit=limit, offset=offset)
        page, docs = runs_page_document(self.store, query)
        return RunList(runs=[RunSummary.model_validate(d) for d in docs], total=page.total, offset=page.offset,
                       limit=page.limit)

    # -- reviewing: each decision answers the pause it names (or the only one) and continues the run --

    def approve(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
                comment: str | None = None) -> RunDetail:
        """Accept the paused step's output as it is, then continue the run to its end or next pause.

        ``step`` (here and in ``edit``, ``retry``, ``reject``) may be a path into a child run (``research >
        retrieve``); the decision is stored on the child and the tree continues from its root. The run
        returned is ``run_id``'s."""
        from orchestrator.service import review

        return self._decide_and_continue("approve", run_id, lambda resolved: review.approve(
            self.store, resolved, step=step, reviewer=self._who(reviewer), comment=comment, lease=new_lease(resolved)))

    def edit(self, run_id: str, output: object, *, step: str | None = None, reviewer: str | None = None,
             comment: str | None = None, force: bool = False, rerun_side_effects: bool = False) -> RunDetail:
        """Replace the paused step's output (or fix a completed ``step`` upstream of the pause), then continue.

        The output must pass the step's blocking gates unless ``force``; else ReviewError, nothing stored.
        """
        from orchestrator.service import review

        return self._decide_and_continue("edit", run_id, lambda resolved: review.edit(
            self.store, resolved, output, step=step, reviewer=self._who(reviewer), comment=comment, force=force,
            rerun_side_effects=rerun_side_effects, lease=new_lease(resolved)))

    def retry(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
              comment: str | None = None, rerun_side_effects: bool = False) -> RunDetail:
        """Run the paused step again with the failed verdicts as ``ctx.gate_feedback`` (or re-run a
        completed ``step`` and its descendants), then continue."""
        from orchestrator.service import review

        return self._decide_and_continue("retry", run_id, lambda resolved: review.retry(
            self.store, resolved, step=step, reviewer=self._who(reviewer), comment=comment,
            rerun_side_effects=rerun_side_effects, lease=new_lease(resolved)))

    def reject(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
               comment: str | None = None) -> RunDetail:
        """Reject a pause (``step``) or, without ``step``, the run as a whole: it ends ``rejected``, every open
        pause of its tree closed with it, and the steps that never ran are recorded as skipped.

        A pause of a mapped instance, or one inside an instance's child run, ends only that instance (its
        consumers read null) and the run goes on, as does a rejected tool call (the model reads ``comment``);
        any other pause ends the run. The run returned is ``run_id``'s."""
        from orchestrator.service import review

        run_id = self._run_id(run_id)
        decision = review.reject(self.store, run_id, step=step, reviewer=self._who(reviewer), comment=comment)
        if decision.continue_run:
            continue_run(self.store, decision.run_id, max_concurrency=self.max_concurrency, lease=decision.lease)
        return self.get_run(run_id)

    async def aapprove(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
                       comment: str | None = None) -> RunDetail:
        """:meth:`approve` without blocking the caller's event loop."""
        from orchestrator.service import review

        return await self._adecide_and_continue(run_id, lambda resolved: review.approve(
            self.store, resolved, step=step, reviewer=self._who(reviewer), comment=comment, lease=new_lease(resolved)))

    async def aedit(self, run_id: str, output: object, *, step: str | None = None, reviewer: str | None = None,
                    comment: str | None = None, force: bool = False, rerun_side_effects: bool = False) -> RunDetail:
        """:meth:`edit` without blocking the caller's event loop."""
        from orchestrator.service import review

        return await self._adecide_and_continue(run_id, lambda resolved: review.edit(
            self.store, resolved, output, step=step, reviewer=self._who(reviewer), comment=comment, force=force,
            rerun_side_effects=rerun_side_effects, lease=new_lease(resolved)))

    async def aretry(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
                     comment: str | None = None, rerun_side_effects: bool = False) -> RunDetail:
        """:meth:`retry` without blocking the caller's event loop."""
        from orchestrator.service import review

        return await self._adecide_and_continue(run_id, lambda resolved: review.retry(
            self.store, resolved, step=step, reviewer=self._who(reviewer), comment=comment,
            rerun_side_effects=rerun_side_effects, lease=new_lease(resolved)))

    async def areject(self, run_id: str, *, step: str | None = None, reviewer: str | None = None,
                      comment: str | None = None) -> RunDetail:
        """:meth:`reject` without blocking the caller's event loop."""
        return await anyio.to_thread.run_sync(
            lambda: self.reject(run_id, step=step, reviewer=reviewer, comment=comment))

    # -- outcomes and attribution -----------------------------------------------------------------

    def label(self, run_id: str, *, correct: bool | None = None, reward: float | None = None,
              reason: str | None = None, reviewer: str | None = None) -> LabelDetail:
        """Record a human outcome of a finished run; an incorrect one is traced back to a step at once."""
        from orchestrator.service.labels import label_run

        result = label_run(self.store, self._run_id(run_id), correct=correct, reward=reward, reason=reason,
                           reviewer=self._who(reviewer))
        return LabelDetail(run_id=result.run_id, outcome_id=result.outcome_id, value=result.value,
                           correct=result.correct, blamed_step=result.blamed_step, confidence=result.confidence,
                           attribution_id=result.attribution_id, explanation=result.explanation)

    def trace(self, run_id: str, *, recompute: bool = False) -> AttributionDetail:
        """The latest backward trace of the run's outcome (computed and stored when there is none)."""
        from orchestrator.attribution.methods import trace_view

        view = trace_view(self.store, self._run_id(run_id), recompute=recompute)
        return AttributionDetail.model_validate(view.to_json())

    def attribute(self, run_id: str, *, method: Literal["trace", "counterfactual", "shapley", "difference"] = "trace",
                  by: Literal["step", "agent"] = "step", samples: int | None = None,
                  seed: int = 0) -> AttributionDetail:
        """Compute and store an attribution record of the run's outcome with one method."""
        refuse_inside_event_loop("Orchestrator.attribute()", "await anyio.to_thread.run_sync(...)")
        from orchestrator.attribution.methods import attribute, stored_view

        result = attribute(self.store, self._run_id(run_id), method, by=by, samples=samples, seed=seed)
        return AttributionDetail.model_validate(stored_view(self.store, result).to_json())

    def replay(self, run_id: str, *, from_step: str, output: object = MISSING) -> RunDetail:
        """Fork a new run from ``from_step``: earlier steps reuse their records, ``from_step`` takes
        ``output`` (or runs again), later steps run again. The original run is not modified."""
        refuse_inside_event_loop("Orchestrator.replay()", "await anyio.to_thread.run_sync(...)")
        from orchestrator.attribution.methods import fork_run

        run_id = self._run_id(run_id)
        evaluation = fork_run(self.store, run_id, from_step, output)
        if not evaluation.run_id:
            raise InputError(f"replaying run {run_id} from step {from_step!r} created no run")
        return self.get_run(evaluation.run_id)

    def stats(self, workflow: str | None = None, *, since: str | float | datetime | None = None,
              period: Literal["day", "week"] = "week", min_runs: int = 1) -> StatsReport:
        """Per step: gate pass rate per period, trend, and the share of failures blamed on it (``stats --json``)."""
        from orchestrator.attribution.stats import compute_stats

        return compute_stats(self.store, workflow, since=run_query(since=since).since, period=period, min_runs=min_runs)

    # -- gates -----------------------------------------------------------------------------------

    def backtest(self, workflow: WorkflowLike, *, step: str | None = None, status: str | None = None,
                 since: str | float | datetime | None = None, limit: int | None = None,
                 outcome: Literal["correct", "incorrect"] | None = None, blamed: str | None = None,
                 runs_of: str | None = None, judges: bool = False) -> BacktestReport:
        """Judge ``workflow``'s gates (only ``step``'s with ``step``) on the stored outputs of past runs of the
        workflow by name (``runs_of``: another name), executing no step, and set each gate's verdicts against
        the runs' recorded outcomes (``gates backtest --json``). Model judges are called only with ``judges``.
        The filters are those of :meth:`list_runs`; ``limit`` defaults to the newest 1000 runs."""
        refuse_inside_event_loop("Orchestrator.backtest()", "await Orchestrator.abacktest(...)")
        from orchestrator.service.backtest import backtest

        filters = {"status": status, "since": since, "limit": limit, "outcome": outcome, "blamed": blamed,
                   "workflow": runs_of}
        return backtest(self.store, self._bind(workflow), step=step, filters=filters, judges=judges)

    async def abacktest(self, workflow: WorkflowLike, *, step: str | None = None, status: str | None = None,
                        since: str | float | datetime | None = None, limit: int | None = None,
                        outcome: Literal["correct", "incorrect"] | None = None, blamed: str | None = None,
                        runs_of: str | None = None, judges: bool = False) -> BacktestReport:
        """:meth:`backtest` without blocking the caller's event loop (it runs on a worker thread)."""
        return await anyio.to_thread.run_sync(lambda: self.backtest(
            workflow, step=step, status=status, since=since, limit=limit, outcome=outcome, blamed=blamed,
            runs_of=runs_of, judges=judges))

    # -- datasets and experiments ------------------------------------------------------------------

    def dataset(self, name: str, *, from_runs: bool = False, examples: Iterable[Mapping[str, Any]] | None = None,
                file: str | Path | None = None, workflow: str | None = None,
                outcome: Literal["correct", "incorrect"] | None = None, blamed: str | None = None,
                status: str | None = None, since: str | float | datetime | None = None, limit: int = 1000,
                description: str | None = None, version: int | None = None) -> DatasetDetail:
        """A dataset with its examples; made or grown first when asked to.

        ``from_runs=True`` creates it from the stored runs the filters keep (as ``dataset create --from-runs``);
        ``examples`` (``{"inputs": {...}, "reference": ..., "label": ...}`` each) or ``file`` (JSONL) add a new
        version (creating the dataset when missing). With none of them, the dataset is read (``version``: an
        older one)."""
        from orchestrator.service import datasets

        sources = sum((from_runs, examples is not None, file is not None))
        if sources > 1:
            raise InputError("give one of from_runs, examples and file")
        if from_runs:
            query = run_query(status=status, workflow=workflow, outcome=outcome, blamed=blamed, since=since,
                              limit=limit)
            datasets.create_from_runs(self.store, name, query, description=description)
        elif examples is not None:
            datasets.check_dataset_name(name)
            self.store.add_examples(name, datasets.examples_from_values(examples), description=description)
        elif file is not None:
            datasets.add_from_file(self.store, name, Path(file))
        view = self.store.dataset(name)
        shown = self.store.examples(name, version=version)
        return DatasetDetail.model_validate({**view.to_json(), "shown_version": version or view.version,
                                             "examples": [e.to_json() for e in shown]})

    def experiment(self, workflow: WorkflowLike, dataset: str, *, name: str | None = None, parallel: int = 4,
                   queue: bool = False, reuse: Literal["unchanged", "none"] = "unchanged",
                   rerun_side_effects: bool = False, version: int | None = None) -> ExperimentDetail:
        """Run ``workflow`` on every example of ``dataset`` (as ``experiment run``) and return the experiment.

        Each example's run executes to its end or first pause (a failing gate ends it ``paused``: nobody waits
        for a review), or is queued for workers with ``queue``."""
        from orchestrator.service.experiments import ExperimentOptions, run_experiment

        options = ExperimentOptions(name=name, parallel=parallel, queue=queue, reuse=reuse,
                                    rerun_side_effects=rerun_side_effects, max_concurrency=self.max_concurrency,
                                    version=version)
        result = run_experiment(self.store, self._bind(workflow), dataset, options)
        return self.get_experiment(result.experiment.name)

    async def aexperiment(self, workflow: WorkflowLike, dataset: str, **options: Any) -> ExperimentDetail:
        """:meth:`experiment` off the caller's event loop (its runs execute on threads of their own)."""
        return await anyio.to_thread.run_sync(lambda: self.experiment(workflow, dataset, **options))

    def get_experiment(self, name: str) -> ExperimentDetail:
        """An experiment as it stands now (``experiment show --json``): queued runs may have ended since."""
        from orchestrator.service.comparison import experiment_runs_document, experiment_summary

        view = self.store.experiment(name)
        return ExperimentDetail.model_validate({**view.to_json(), "summary": experiment_summary(self.store, name),
                                                "runs": experiment_runs_document(self.store, name)})

    def compare(self, a: str, b: str) -> Comparison:
        """Compare two experiments (either may be ``"baseline"``, the dataset's source runs) example by example."""
        from orchestrator.service.comparison import compare

        return Comparison.model_validate(compare(self.store, a, b))

    async def acompare(self, a: str, b: str) -> Comparison:
        """:meth:`compare` off the caller's event loop."""
        return await anyio.to_thread.run_sync(self.compare, a, b)

    # -- helpers ---------------------------------------------------------------------------------

    def _run_id(self, run_id: str) -> str:
        """The run an id, or a unique prefix of one, names (AmbiguousRunError naming the candidates)."""
        return resolve_run_id(self.store, run_id)

    def _who(self, reviewer: str | None) -> str | None:
        return reviewer or self.reviewer

    def _bind(self, workflow: WorkflowLike) -> BoundWorkflow:
        if isinstance(workflow, BoundWorkflow):
            return workflow
        if isinstance(workflow, Workflow):
            return workflow.bind()
        if isinstance(workflow, str | Path):
            from orchestrator.bind.loader import load_workflow

            return load_workflow(workflow)
        raise InputError(f"workflow must be a file path, a Workflow or a BoundWorkflow; got {type(workflow).__name__}")

    async def _detail(self, run_id: str) -> RunDetail:
        return await anyio.to_thread.run_sync(self.get_run, run_id)

    def _decide_and_continue(self, name: str, run_id: str, decide: Callable[[str], Decision]) -> RunDetail:
        refuse_inside_event_loop(f"Orchestrator.{name}()", f"await Orchestrator.a{name}(...)")
        decision = decide(self._run_id(run_id))
        continue_run(self.store, decision.run_id, max_concurrency=self.max_concurrency, lease=decision.lease)
        return self.get_run(decision.shown_run_id)

    async def _adecide_and_continue(self, run_id: str, decide: Callable[[str], Decision]) -> RunDetail:
        decision = await anyio.to_thread.run_sync(lambda: decide(self._run_id(run_id)))
        assert decision.lease is not None, "a continuing decision claims the run's lease"
        await continue_run_async(self.store, decision.run_id, lease=decision.lease,
                                 max_concurrency=self.max_concurrency)
        return await self._detail(decision.shown_run_id)
