"""Replays: re-run part of a stored run with some steps' behaviour changed, never touching it.

A :class:`Plan` says what changes: steps replaced by their reference (a reviewer's edit if
there is one, else the step's ``baseline`` callable, else a fresh re-execution), steps given a
fixed output, and steps that must run again. Every other step keeps its own behaviour: it
reuses its recorded output while its inputs are unchanged, and re-executes on new inputs.
Steps marked ``side_effects`` never act in a replay: they call their ``simulate`` dry run when
they declare one; else they reuse their recorded output, but only while their inputs are
unchanged. A side-effecting step reached with changed inputs (or never run in the original) and
no ``simulate`` blocks the replay: it stops there, its record says ``ReplayBlocked``, the run's
error says ``blocked by STEP: ...`` and the evaluation's status is ``blocked`` (it is not scored
as a failure, since nothing failed: the replay cannot know the outcome). An edit or a baseline
may still replace a side-effecting step's output, since neither acts.

An ``llm`` step with a tool marked ``approve: true`` is treated as side-effecting: nobody is there to
approve a call in a replay, and asking its model again could call the tool. Its pause at a tool call
holds a proposal, not an output, so a run paused there has nothing to reuse.

A replay is a new run (``kind`` ``counterfactual`` or ``replay``) whose ``parent_run_id`` is
the original and whose ``parent_step`` names what changed. Steps that are not downstream of a
change are copied in as records with ``origin="reused"`` (gate verdicts included); the rest
go through the normal executor, so gates, critics, retries and timeouts behave as in a run.

Gates in replays: every gate and critic runs and its verdict is stored, but replays run in
``warn`` mode, so a failing gate never pauses, retries or fails a replay. (A replay that
paused would have no final output; a replay has nobody to review it.) A replay that fails
(a step raises) scores ``failure_value`` (0 by default).

Child runs: a ``workflow:`` step's unit is replayed through its child run. While neither its inputs nor
anything inside its child changes, it reuses its recorded output (the child does not run again). A plan may
name a path into a child (``research > retrieve``, ``per_ticket[1] > classify``, ``improve#2 > draft``): the
unit's child run is replayed by an engine of its own (a replay run whose ``parent_run_id`` is the original
child run) with the rest of the path changed, under the same rules (a side-effecting step inside acts never),
and its output becomes the unit's output in the parent's replay, which goes on from there. A unit whose
inputs changed replays its child the same way, on the new inputs. A child replay that a side-effecting step
blocks blocks the parent's replay, named by its path (``research > archive``).

Identical sub-executions are cached (see :mod:`orchestrator.attribution.cache`); when every
step a plan needs is already known, its value is computed from the cache without a new run. Where the
cache alone cannot say (a plan naming an iteration, an instance or a path into a child run), the plan's
replay is first probed against a private in-memory store with executing forbidden (see
:mod:`orchestrator.attribution.scratch`): a probe that finishes executed nothing new, so its value is the
plan's and nothing is stored; only a plan whose probe met a unit that must execute becomes a stored run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.attribution.cache import InputKeys, StepCache, Value
from orchestrator.attribution.replay_tracing import ReplayTracing
from orchestrator.attribution.scratch import ScratchStore, probing_workflow
from orchestrator.bind.approvals import gated_tools, is_tool_pause
from orchestrator.bind.binding import BoundStep, BoundWorkflow
from orchestrator.bind.evaluation import call_evaluator
from orchestrator.bind.invoke import StepFunction, call_step
from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.engine.attempt import critic_verdict
from orchestrator.engine.documents import call_totals
from orchestrator.engine.event_loops import run_blocking
from orchestrator.engine.executor import Executor
from orchestrator.engine.outcomes import record_score
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.engine.tree import children
from orchestrator.spec import graph
from orchestrator.spec.context import StepContext
from orchestrator.spec.inputs import resolve_inputs
from orchestrator.spec.records import (
    PATH_SEPARATOR,
    RunView,
    StepRecordView,
    join_path,
    live_records,
    parse_unit,
    path_head,
    split_path,
    unit_name,
    unit_ran,
)
from orchestrator.store import (
    GateRow,
    NewRun,
    NewStepRecord,
    RunEnd,
    Store,
)
from orchestrator.store.delegating import DelegatingStore, concrete
from orchestrator.telemetry import ReplayOf

MISSING: Any = object()


class ReplayBlocked(RuntimeError):
    """A side-effecting step cannot be replayed: no ``simulate``, and its recorded output does not fit."""

    def __init__(self, step_id: str, reason: str, run_id: str | None = None) -> None:
        super().__init__(f"blocked by {step_id}: {reason}")
        self.step_id = step_id
        self.reason = reason
        self.run_id = run_id
        """The replay run it stopped, once known."""


CHANGED_INPUTS = "side-effecting step with changed inputs and no simulate"
NEVER_RAN = "side-effecting step that never ran in the original run (no recorded output) and no simulate"
GATED_CHANGED = "step with a tool that needs approval ({tools}), reached with changed inputs: a replay never calls it"
GATED_NEVER_RAN = ("step with a tool that needs approval ({tools}) that never finished in the original run (no "
                   "recorded output): a replay never calls it")


@dataclass(frozen=True)
class UnstartedChild:
    """A child run the original run never started: its workflow, and the original parent run and unit that
    would have started it (a replay of it is linked to them: ``parent_run_id``, ``parent_step``)."""

    workflow: BoundWorkflow
    parent_run_id: str
    unit: str

    def view(self, store: Store) -> RunView:
        """The run as the engine reads an original: no records, no reviews, no child runs, the parent's id
        (what its replay runs link to) and the child workflow, registered like any child run's."""
        workflow_id = store.register_workflow(self.workflow.name, str(self.workflow.spec.version),
                                              dict(self.workflow.definition), self.workflow.source,
                                              self.workflow.content_hash)
        now = time.time()
        return RunView(id=0, run_id=self.parent_run_id, workflow=self.workflow.name, workflow_id=workflow_id,
                       status="succeeded", kind="child", inputs={}, output=None, error=None,
                       parent_run_id=self.parent_run_id, parent_step=self.unit, created_at=now, updated_at=now)


class NeedsExecution(Exception):
    """A probe reached a unit whose output only executing could give: the plan needs a stored replay."""


class ChildReplayFailed(RuntimeError):
    """The replay of a unit's child run failed: the unit fails in its parent's replay, naming the child replay."""


@dataclass
class Plan:
    """What a replay changes. Steps in none of the sets keep their own behaviour. ``reference`` may name an
    iteration of a loop (``improve#2``): that iteration takes its reference, the loop's others keep their
    behaviour (reusing their recorded outputs while their inputs and previous iteration are unchanged)."""

    reference: frozenset[str] = frozenset()
    fixed: dict[str, Any] = field(default_factory=dict)
    fresh: frozenset[str] = frozenset()
    """Steps that run again even where their inputs are unchanged (a fork's downstream)."""

    def key(self) -> tuple[Any, ...]:
        return (self.reference, tuple(sorted((k, Value.of(v).digest) for k, v in self.fixed.items())), self.fresh)

    def looped(self) -> frozenset[str]:
        """The steps with a unit changed (an iteration, an instance, or a path into a unit's child run): they run
        again, never copied from the original, each unit reusing its recorded output where nothing changed it."""
        fresh_paths = (u for u in self.fresh if PATH_SEPARATOR.strip() in u)
        return frozenset(parse_unit(path_head(u))[0] for u in (*self.reference, *self.fixed, *fresh_paths)
                         if u != parse_unit(path_head(u))[0])

    def below(self, unit: str) -> Plan:
        """What the plan changes inside ``unit``'s child run: its paths through ``unit``, without it."""
        def inner(path: str) -> str | None:
            units = split_path(path)
            return join_path(*units[1:]) if len(units) > 1 and units[0] == unit else None

        return Plan(reference=frozenset(r for p in self.reference if (r := inner(p)) is not None),
                    fixed={r: v for p, v in self.fixed.items() if (r := inner(p)) is not None},
                    fresh=frozenset(r for p in self.fresh if (r := inner(p)) is not None))

    def changes(self) -> bool:
        """Whether the plan changes anything (an empty plan keeps every step's own behaviour)."""
        return bool(self.reference or self.fixed or self.fresh)


@dataclass
class Evaluation:
    """The value of one plan: the evaluator's score of its final output."""

    value: float | None
    """None for a fork of a workflow that has no evaluator, and for a blocked replay."""
    status: str
    """``succeeded``, ``failed`` or ``blocked`` (a side-effecting step stopped it; see ``blocked_by``)."""
    output: Any = None
    run_id: str | None = None
    """The stored replay run; None when the value came entirely from cached executions."""
    executions: int = 0
    """Step executions this evaluation paid for."""
    error: str | None = None
    """Why a failed or blocked replay did not finish: each failed step and its error, as the run stores it."""
    failed_steps: list[str] = field(default_factory=list)
    blocked_by: str | None = None
    """The side-effecting step that blocked the replay."""
    blocked_reason: str | None = None


class MarkingStore(DelegatingStore):
    """The store as the replay executor sees it: records say how their output came to be.

    Every method delegates to the real store (:class:`~orchestrator.store.delegating.DelegatingStore`);
    writing a step record first applies the origin
    the replay noted for that (run, unit) (``reused``, ``cached``, ``baseline``, ``replayed``...).
    """

    def __init__(self, store: Store, marks: dict[tuple[str, str], str]) -> None:
        self.store = store
        self.marks = marks
        self.url = store.url

    def target(self) -> Store:
        return self.store

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        for record in records:
            mark = self.marks.pop((record.run_id, unit_name(record.step_id, record.item_index, record.iteration)), None)
            if mark is not None and (record.status != "failed" or mark == "blocked"):
                record.origin = mark
        return self.store.insert_step_records(records, end=end)

    def close(self) -> None:
        """The replay does not own the store it wraps: closing is its owner's business."""


def response_cache(records: Sequence[StepRecordView]) -> Any:
    """A response cache preloaded with the model answers stored on ``records`` (None without any)."""
    stored = [r.llm for r in records if r.llm]
    if not stored:
        return None
    from orchestrator.llm.cache import ResponseCache

    cache = ResponseCache()
    cache.preload(stored)
    return cache


def model_calls(store: Store, run_ids: Sequence[str]) -> dict[str, Any]:
    """What replays paid the model: real calls and their cost (cached answers cost nothing)."""
    totals = call_totals(store.model_calls(run_ids))
    return {"model_calls": totals["calls"] if totals else 0, "model_cost": totals["cost"] if totals else 0.0}


def stored_cost(store: Store, run_ids: Sequence[str]) -> dict[str, int]:
    """What replays left in the store: their runs and step records (a plan that executed nothing new left
    none)."""
    records = store.step_records_of(list(run_ids)) if run_ids else {}
    return {"replay_runs": len(run_ids), "step_records": sum(len(rows) for rows in records.values())}


def iteration_key(kwargs: dict[str, Any], iteration: int | None, previous: Any) -> str:
    """The cache key of one iteration of a loop: its inputs, its number and the output before it (an LLM
    step's template reads the last two without their being inputs)."""
    return InputKeys.from_kwargs({**kwargs, "$iteration": iteration, "$previous": previous})


class ReplayEngine:
    """Evaluates plans against one stored run; one engine per attribution so the cache is shared."""

    def __init__(self, store: Store, run_id: str, *, workflow: BoundWorkflow | None = None,
                 failure_value: float = 0.0, max_concurrency: int = DEFAULT_CONCURRENCY, otel: str | None = None,
                 tracing: ReplayTracing | None = None, unstarted: UnstartedChild | None = None) -> None:
        """``otel`` (else the OTEL_EXPORTER_OTLP_* settings) exports each replay run as a trace of its own;
        ``tracing``: the one a parent run's engine already has (a child run's engine shares it); ``unstarted``:
        this engine replays the child run a unit of ``run_id`` would have started, which it never did (nothing
        was recorded, so every step of it executes, and one that acts is simulated or blocks by name)."""
        self.store = store
        self.unstarted = unstarted
        if unstarted is None:
            self.run = store.get_run(run_id)
            if self.run.status in ("running", "queued"):
                raise InputError(f"run {run_id} is {self.run.status}; replay a finished or paused run")
        else:
            self.run = unstarted.view(store)
        self.workflow = workflow if workflow is not None else load_run_workflow(store, run_id)[0]
        self.tracing = tracing if tracing is not None else ReplayTracing(store, otel)
        self.spec = self.workflow.spec
        self.failure_value = failure_value
        self.max_concurrency = max_concurrency
        self.order = graph.topological_order(self.spec)
        self.steps = {s.id: s for s in self.spec.steps}
        self.output_step = self.spec.output_step
        relevant = graph.ancestors(self.spec, self.output_step) | {self.output_step}
        self.relevant = [sid for sid in self.order if sid in relevant]
        records = store.step_records(run_id) if unstarted is None else []
        self.llm_cache = response_cache(records)
        """The original run's model answers: a replay whose prompt is unchanged reuses them (no model call)."""
        self.step_of_record = {r.id: r.step_id for r in records}
        self.records_by_id = {r.id: r for r in records}
        self.latest = {r.step_id: r for r in records}
        live = live_records(records)
        self.iterations = {unit: r for unit, r in live.items() if r.iteration is not None and r.status == "succeeded"}
        """The completed iterations of the run's loops, by unit (``improve#2``)."""
        self.instances = {unit: r for unit, r in live.items()
                          if r.index is not None and r.iteration is None and r.status == "succeeded"}
        """The completed instances of the run's mapped steps, by unit (``summarize[7]``)."""
        self.child_runs = children(store, run_id) if unstarted is None else {}
        """The original child run of each unit of a ``workflow:`` step (``research``, ``per_ticket[3]``)."""
        self._child_engines: dict[str, ReplayEngine] = {}
        self.child_replays: dict[str, dict[str, str | None]] = {}
        """Per replay run: the replay run of each unit's child run it made (None when known without one)."""
        self.candidates = self._candidates()
        """What attribution blames: the steps that reach the output, a loop (not mapped) by its iterations, a
        mapped step by its instances, a ``workflow:`` step's unit by the candidates of its child run (paths)."""
        self.gated: dict[str, Any] = {}
        for r in records:
            if r.gates:
                self.gated[r.step_id] = r
        self.edits = {(self.records_by_id[r.record_id].unit if r.record_id in self.records_by_id else r.step_id):
                      Value.of(r.output_after) for r in (store.reviews(run_id) if unstarted is None else [])
                      if r.decision == "edit"}
        self.cache = StepCache()
        self.keys = InputKeys(self.steps, self.run.inputs, self.cache)
        self.original: dict[str, Value] = {}
        self.original_keys: dict[str, str] = {}
        """The input key each step had in the original run: a side-effecting step's recorded output
        is reused only for these inputs."""
        self.blocked: dict[str, ReplayBlocked] = {}
        """Per replay run, the side-effecting step that stopped it."""
        self.executions = 0
        self.executions_by_step: dict[str, int] = {}
        self.replay_runs: list[str] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._memo: dict[tuple[Any, ...], Evaluation] = {}
        self._scores: dict[str, float] = {}
        self._reasons: dict[str, str | None] = {}
        self._unscored: set[str] = set()
        """Outputs the evaluator raised on: scored as failures, never stored as outcomes."""
        self._plans: dict[str, Plan] = {}
        self._marks: dict[tuple[str, str], str] = {}
        self._executor: Executor | None = None
        self._scratch = ScratchStore(self.workflow)
        self._probe_workflow: BoundWorkflow | None = None
        self._probing: set[str] = set()
        """Probe runs (in the scratch store) in flight: their steps answer from the cache or stop the probe."""
        self._needs_run: set[str] = set()
        """Probe runs that met a unit only executing could give."""
        self._unknown: set[tuple[Any, ...]] = set()
        """Memo keys whose probe stopped: the plan needs a stored replay (never probed again)."""
        self.conditional = [sid for sid in self.order if self.steps[sid].when is not None]
        """Steps with a ``when``: which of them ran is the route a run took."""
        self.original_route = self.route_of(records)
        self._seed()

    def _candidates(self) -> list[str]:
        found: list[str] = []
        for sid in self.relevant:
            step = self.steps[sid]
            its = sorted((r for r in self.iterations.values() if r.step_id == sid and r.index is None),
                         key=lambda r: r.iteration or 0)
            items = sorted((r for r in self.instances.values() if r.step_id == sid), key=lambda r: r.index or 0)
            if step.repeat is not None and not step.mapped and its:
                units = [r.unit for r in its]
            elif step.mapped and step.repeat is None and items:
                units = [r.unit for r in items]
            elif unit_ran(self.latest.get(sid)):
                units = [sid]
            else:  # skipped, or never reached: it cannot have caused the outcome, so no replay is spent on it
                units = []
            for unit in units:
                engine = self.child_engine(unit)
                if engine is not None and engine.candidates:
                    found.extend(join_path(unit, inner) for inner in engine.candidates)
                else:
                    found.append(unit)
        return found

    def child_engine(self, unit: str) -> ReplayEngine | None:
        """The engine that replays ``unit``'s child run (None for a unit that is no ``workflow:`` step's, or
        that started no child run)."""
        step = self.workflow.steps.get(parse_unit(unit)[0])
        if step is None or step.child is None or unit not in self.child_runs:
            return None
        if unit not in self._child_engines:
            self._child_engines[unit] = ReplayEngine(self.store, self.child_runs[unit].run_id, workflow=step.child,
                                                     failure_value=self.failure_value,
                                                     max_concurrency=self.max_concurrency, tracing=self.tracing)
        return self._child_engines[unit]

    def unstarted_child_engine(self, unit: str) -> ReplayEngine:
        """The engine that runs, in replays, the child run ``unit`` never started in the original run (a router
        that sent the original elsewhere, a loop that would need one more iteration): part of the
        counterfactual world, so a replay may start it."""
        step = self.workflow.step(parse_unit(unit)[0])
        assert step.child is not None, "only a workflow: step's unit starts a child run"
        if unit not in self._child_engines:
            self._child_engines[unit] = ReplayEngine(
                self.store, self.run.run_id, workflow=step.child, failure_value=self.failure_value,
                max_concurrency=self.max_concurrency, tracing=self.tracing,
                unstarted=UnstartedChild(step.child, self.run.run_id, unit))
        return self._child_engines[unit]

    def stored_runs(self) -> list[str]:
        """Every replay run this engine and its child runs' engines stored, parents first."""
        found = list(self.replay_runs)
        for engine in list(self._child_engines.values()):
            found.extend(engine.stored_runs())
        return found

    def owner(self, path: str) -> tuple[ReplayEngine, str]:
        """The engine of the run holding a path's last unit, and that unit (``research > retrieve``: the engine
        of ``research``'s child run and ``retrieve``)."""
        if PATH_SEPARATOR.strip() not in path:
            return self, path
        head, rest = split_path(path)[0], join_path(*split_path(path)[1:])
        engine = self.child_engine(head)
        if engine is None:
            raise NotFoundError(f"unit {head!r} of run {self.run.run_id} started no child run, so {path!r} names "
                                "nothing")
        return engine.owner(rest)

    def agent_of(self, unit: str) -> str:
        """The agent responsible for a candidate (a step, an iteration or instance of one, or a path)."""
        engine, last = self.owner(unit)
        return engine.steps[parse_unit(last)[0]].agent_name

    def record_of(self, unit: str) -> StepRecordView | None:
        """A candidate's record in the original run (for a path, in its child run): an iteration's or
        instance's, else its step's latest."""
        engine, last = self.owner(unit)
        return engine.iterations.get(last) or engine.instances.get(last) or engine.latest.get(last)

    def side_effects_of(self, unit: str) -> bool:
        engine, last = self.owner(unit)
        return engine.acts(parse_unit(last)[0])

    def acts(self, step_id: str) -> bool:
        """Whether a step may act on the world, so a replay never executes it: it declares ``side_effects``,
        or it is an ``llm`` step with a tool that needs approval."""
        step = self.steps[step_id]
        return step.side_effects or bool(gated_tools(step))

    def blocked_reason(self, step_id: str, unit: str) -> str:
        """Why a replay cannot go through a step that acts: the record does not fit (or there is none)."""
        step = self.steps[step_id]
        tools = ", ".join(gated_tools(step))
        if step.side_effects or not tools:
            return CHANGED_INPUTS if unit in self.original else NEVER_RAN
        return (GATED_CHANGED if unit in self.original else GATED_NEVER_RAN).format(tools=tools)

    # -- routes -------------------------------------------------------------------------------------

    def route_of(self, records: Sequence[StepRecordView]) -> dict[str, str]:
        """``{"refund": "ran", "technical": "skipped"}``: which conditional steps a run's records ran."""
        latest = {r.step_id: r for r in records if r.index is None and not r.superseded}
        return {sid: ("skipped" if latest[sid].status == "skipped" else "ran")
                for sid in self.conditional if sid in latest}

    def route_taken(self, replay_run_id: str | None) -> dict[str, Any]:
        """A replay's route, and where it differs from the original's (``technical: skipped -> ran``):
        the evidence that a step's credit came from the branch its change sent the run down."""
        if not self.conditional or replay_run_id is None:
            return {}
        route = self.route_of(self.store.step_records(replay_run_id))
        changed = [f"{sid}: {self.original_route.get(sid, 'not reached')} -> {taken}"
                   for sid, taken in route.items() if self.original_route.get(sid) != taken]
        return {"route": route, "route_changed": changed}

    # -- what the original run already knows ------------------------------------------------------

    def _seed(self) -> None:
        outputs: dict[str, Value] = {}
        for sid in self.order:
            rec = self.latest.get(sid)
            if rec is None or rec.status not in ("succeeded", "gate_failed") or \
                    is_tool_pause(rec.error_type, rec.step_type):  # its output is a proposed tool call
                continue
            key = self.keys.from_values(sid, outputs)
            value = Value.of(rec.output)
            outputs[sid] = value
            self.original[sid] = value
            if key is not None:
                self.original_keys[sid] = key
                self.cache.put(sid, "own", key, value, "original", rec)
        for rec in self.iterations.values():  # a replayed loop reuses an iteration whose inputs are unchanged
            kwargs = self._recorded_kwargs(rec)
            if kwargs is None:
                continue
            before = self.iterations.get(unit_name(rec.step_id, rec.index, (rec.iteration or 1) - 1))
            key = iteration_key(kwargs, rec.iteration, before.output if before is not None else None)
            self.cache.put(rec.step_id, "own", key, Value.of(rec.output), "original", rec)
            self.original[rec.unit], self.original_keys[rec.unit] = Value.of(rec.output), key
        for rec in self.instances.values():  # so does a mapped step's instance
            kwargs = self._recorded_kwargs(rec)
            if kwargs is None:
                continue
            key = InputKeys.from_kwargs(kwargs)
            self.cache.put(rec.step_id, "own", key, Value.of(rec.output), "original", rec)
            self.original[rec.unit], self.original_keys[rec.unit] = Value.of(rec.output), key

    def _recorded_kwargs(self, rec: StepRecordView) -> dict[str, Any] | None:
        """The keyword arguments a record's attempt was called with, its stored links resolved to the outputs
        they point at; None when a link points at no record of the run."""
        kwargs: dict[str, Any] = {}
        for param, stored in (rec.inputs or {}).items():
            if not (isinstance(stored, dict) and "$record" in stored):
                kwargs[param] = stored
                continue
            source = self.records_by_id.get(stored["$record"])
            if source is None:
                return None
            value = Value.of(source.output)
            if stored.get("field"):
                sub = self.cache.field(value, stored["field"])
                if sub is None:
                    return None
                value = sub
            kwargs[param] = value.data
        return kwargs

    def reference_kind(self, step_id: str) -> str:
        """``edit`` (a reviewer replaced the output), ``baseline`` (declared) or ``resample``; ``step_id`` may
        be an iteration (``improve#2``): a reviewer's edit of that iteration, else its step's baseline."""
        if PATH_SEPARATOR.strip() in step_id:
            engine, last = self.owner(step_id)
            return engine.reference_kind(last)
        if step_id in self.edits:
            return "edit"
        if self.workflow.step(parse_unit(step_id)[0]).baseline is not None:
            return "baseline"
        return "resample"

    def _policy(self, plan: Plan, step_id: str) -> str:
        if step_id in plan.fixed:
            return "fixed"
        if step_id in plan.reference:
            kind = self.reference_kind(step_id)
            if kind in ("edit", "baseline") or not self.acts(step_id):
                return kind
        if self.acts(step_id):
            return "simulate" if self.workflow.step(step_id).simulate is not None else "recorded"
        return "fresh" if step_id in plan.fresh else "own"

    def _unit_policy(self, plan: Plan, step_id: str, unit: str) -> str:
        """``_policy`` of one unit: an iteration or instance the plan names takes its own reference or value."""
        if unit != step_id:
            if unit in plan.fixed:
                return "fixed"
            if unit in plan.reference:
                kind = self.reference_kind(unit)
                if kind in ("edit", "baseline") or not self.acts(step_id):
                    return kind
        return self._policy(plan, step_id)

    def _known(self, plan: Plan, step_id: str, policy: str, key: str | None,
               unit: str | None = None) -> tuple[Value | None, str]:
        """The output a step (its ``unit``) produces under ``policy`` if it is known without executing."""
        unit = unit or step_id
        if policy == "fixed":
            return Value.of(plan.fixed[unit] if unit in plan.fixed else plan.fixed[step_id]), "replaced"
        if policy == "edit":
            return (self.edits[unit] if unit in self.edits else self.edits[step_id]), "edited"
        if policy == "recorded":  # a side-effecting step: its record fits only the inputs it acted on
            if key is not None and key == self.original_keys.get(unit):
                return self.original.get(unit), "reused"
            return None, ""
        if policy == "fresh" or key is None:
            return None, ""
        entry = self.cache.get(step_id, policy, key)
        if entry is None:
            return None, ""
        return entry.value, ("reused" if entry.source == "original" else "cached")

    # -- evaluating plans -------------------------------------------------------------------------

    def simulate(self, plan: Plan) -> Value | None:
        """The final output from cached executions alone, or None when something must run."""
        if plan.looped():
            return None  # a loop with an iteration replaced runs again
        outputs: dict[str, Value] = {}
        for sid in self.relevant:
            policy = self._policy(plan, sid)
            key = None if policy in ("fixed", "edit") else self.keys.from_values(sid, outputs)
            value, _ = self._known(plan, sid, policy, key)
            if value is None:
                return None
            outputs[sid] = value
        return outputs[self.output_step]

    def score(self, value: Value) -> float:
        """The evaluator's score of a final output, once per distinct output."""
        if value.digest not in self._scores:
            fn = self.workflow.outcome
            if fn is None:
                raise InputError(f"workflow {self.spec.name!r} has no outcome evaluator; "
                                 "add `outcome: module:callable`")
            try:
                scored = call_evaluator(fn, value.data, inputs=self.run.inputs, reference=self.run.reference)
                self._scores[value.digest] = scored.score
                self._reasons[value.digest] = scored.reason
            except Exception as exc:  # an evaluator bug scores like a failed replay
                self.notes.append(f"evaluator raised {type(exc).__name__}: {exc}")
                self._scores[value.digest] = self.failure_value
                self._unscored.add(value.digest)
        return self._scores[value.digest]

    def evaluate(self, plan: Plan, *, kind: str = "counterfactual", label: str | None = None,
                 force_run: bool = False) -> Evaluation:
        """The value of a plan; ``force_run`` stores a replay run even when the cache knows it. Without it, a
        plan whose replay would execute nothing new is valued without a stored run."""
        return run_blocking(self._evaluate_async, plan, kind, label, force_run)

    async def _evaluate_async(self, plan: Plan, kind: str, label: str | None, force_run: bool) -> Evaluation:
        memo_key = plan.key()
        known = self._memo.get(memo_key)
        if known is not None and (known.run_id is not None or not force_run):
            return known
        if not force_run:
            probed = await self._known_value(plan, None, memo_key)
            if probed is not None:
                return probed
        evaluation = await self.run_plan_async(plan, kind, label)
        self._memo[memo_key] = evaluation
        return evaluation

    async def _known_value(self, plan: Plan, inputs: dict[str, Any] | None,
                           memo_key: tuple[Any, ...]) -> Evaluation | None:
        """The value of a plan (on ``inputs``, else the original's) that needs no step executed: from the cache
        alone, else from a probe; memoized. None when something must execute."""
        same = inputs is None or Value.of(inputs).digest == Value.of(self.run.inputs).digest
        if same:
            final = self.simulate(plan)
            if final is not None:
                value = self.score(final) if self.workflow.outcome is not None else None
                evaluation = Evaluation(value, "succeeded", final.data)
                self._memo[memo_key] = evaluation
                return evaluation
        if plan.fresh or memo_key in self._unknown:  # a fresh step always executes
            return None
        probed = await self._probe(plan, inputs)
        if probed is None:
            self._unknown.add(memo_key)
            return None
        self._memo[memo_key] = probed
        return probed

    async def _probe(self, plan: Plan, inputs: dict[str, Any] | None) -> Evaluation | None:
        """Replay ``plan`` in the scratch store with executing forbidden: its value when every unit's output was
        known (nothing new executed, nothing stored), else None."""
        same = inputs is None or Value.of(inputs).digest == Value.of(self.run.inputs).digest
        inputs = self.run.inputs if inputs is None else inputs
        scratch, workflow_id = self._scratch.open()
        try:
            run_id = scratch.create_run(NewRun(workflow_id, self.run.workflow, inputs, kind="counterfactual"))
            self._plans[run_id] = plan
            self._probing.add(run_id)
            try:
                if same:
                    self._copy_unchanged(run_id, plan, scratch, workflow_id)
                if self._probe_workflow is None:
                    self._probe_workflow = probing_workflow(self._replay_workflow())
                executor = Executor(concrete(MarkingStore)(scratch, self._marks), self._probe_workflow,
                                    max_concurrency=self.max_concurrency, workflow_id=workflow_id, leased=False)
                result = await executor.execute(run_id, inputs)
            finally:
                self._plans.pop(run_id, None)
                self._probing.discard(run_id)
                stopped = run_id in self._needs_run
                self._needs_run.discard(run_id)
                for mark in [m for m in self._marks if m[0] == run_id]:
                    del self._marks[mark]
        finally:
            self._scratch.done()
        if stopped or result.status != "succeeded":  # a failing replay is stored, so its records say why
            return None
        value = self.score(Value.of(result.output)) if self.workflow.outcome is not None else None
        return Evaluation(value, "succeeded", result.output)

    def run_plan(self, plan: Plan, *, kind: str, label: str | None) -> Evaluation:
        """Execute a plan as a new run linked to the original, and score it."""
        return run_blocking(self.run_plan_async, plan, kind, label)

    async def evaluate_inside(self, plan: Plan, inputs: dict[str, Any], label: str | None) -> Evaluation:
        """The value of a plan on ``inputs`` (this engine replays a child run, for its parent's replay): a stored
        replay run whenever the plan executes something new (its records show what), else the cache's or a
        probe's answer."""
        memo_key = (plan.key(), Value.of(inputs).digest)
        known = self._memo.get(memo_key) or await self._known_value(plan, inputs, memo_key)
        if known is not None:
            return known
        evaluation = await self.run_plan_async(plan, "counterfactual", label, inputs)
        self._memo[memo_key] = evaluation
        return evaluation

    async def known_inside(self, plan: Plan, inputs: dict[str, Any]) -> Evaluation | None:
        """What :meth:`evaluate_inside` answers without a stored run (for a parent's probe), else None."""
        memo_key = (plan.key(), Value.of(inputs).digest)
        return self._memo.get(memo_key) or await self._known_value(plan, inputs, memo_key)

    async def run_plan_async(self, plan: Plan, kind: str, label: str | None,
                             inputs: dict[str, Any] | None = None) -> Evaluation:
        """Execute a plan as a new run linked to the original (on other ``inputs`` for a child run replayed
        on what its parent's replay gave it), and score it."""
        same = inputs is None or Value.of(inputs).digest == Value.of(self.run.inputs).digest
        inputs = self.run.inputs if inputs is None else inputs
        if self.unstarted is not None:  # linked to the unit of the original parent run that would have started it
            label = self.unstarted.unit
        run_id = self.store.create_run(NewRun(self.run.workflow_id, self.run.workflow, inputs, kind=kind,
                                              parent_run_id=self.run.run_id, parent_step=label))
        self._plans[run_id] = plan
        self.replay_runs.append(run_id)
        before = self.executions
        replay_of = ReplayOf(self.run.run_id, self.run.trace_id, kind, label)
        with self.tracing.replay(run_id, self.workflow.name, self.workflow.order, replay_of):
            if same:  # on other inputs every step goes through the executor, reusing outputs by their inputs
                self._copy_unchanged(run_id, plan)
            result = await self._get_executor().execute(run_id, inputs)
        self._plans.pop(run_id, None)
        blocked = self.blocked.pop(run_id, None)
        if blocked is not None:  # not a failure: the replay cannot know what acting would have returned
            self.store.set_run_status(run_id, "failed", error=str(blocked))
            return Evaluation(None, "blocked", None, run_id, self.executions - before, error=str(blocked),
                              failed_steps=list(result.failed_steps), blocked_by=blocked.step_id,
                              blocked_reason=blocked.reason)
        if result.status != "succeeded":
            value: float | None = self.failure_value
        elif self.workflow.outcome is None:
            value = None  # a fork of a workflow without an evaluator has nothing to score
        else:
            final = Value.of(result.output)
            value = self.score(final)
            if final.digest not in self._unscored:
                record_score(self.store, self.workflow, run_id, value, self._reasons.get(final.digest))
        return Evaluation(value, result.status, result.output, run_id, self.executions - before, error=result.error,
                          failed_steps=list(result.failed_steps))

    def _copy_unchanged(self, run_id: str, plan: Plan, store: Store | None = None,
                        workflow_id: int | None = None) -> None:
        """Insert the recorded outputs of steps that nothing in the plan can change (into ``store``, where the
        workflow has ``workflow_id``: a probe's scratch store; else the replay's own)."""
        store = self.store if store is None else store
        workflow_id = self.run.workflow_id if workflow_id is None else workflow_id
        new_ids: dict[str, int] = {}
        now = time.time()
        looped = plan.looped()
        for sid in self.order:
            if sid not in self.original or sid in looped or self._policy(plan, sid) not in ("own", "recorded"):
                continue
            step = self.steps[sid]
            if any(dep not in new_ids for dep in step.step_dependencies()):
                continue
            rec = self.latest[sid]
            inputs = None
            if rec.inputs is not None:
                inputs = {}
                for param, val in rec.inputs.items():
                    if isinstance(val, dict) and "$record" in val:
                        source = self.step_of_record.get(val["$record"])
                        new_id = new_ids.get(source, val["$record"]) if source is not None else val["$record"]
                        val = {**val, "$record": new_id}
                    inputs[param] = val
            gated = self.gated.get(sid)
            gates = []
            if gated is not None and Value.of(gated.output).digest == self.original[sid].digest:
                gates = [GateRow(gate=g.gate, passed=g.passed, score=g.score, reason=g.reason,
                                 details=jsonio.dumps(g.details) if g.details else None, severity=g.severity,
                                 duration=g.duration) for g in gated.gates]
            consumed = [[new_ids[d], d, 0.0] for d in step.step_dependencies()]
            new_ids[sid] = store.insert_step_record(NewStepRecord(
                run_id=run_id, workflow_id=workflow_id, step_id=sid, step_type=rec.step_type,
                agent=rec.agent, attempt=1, status="succeeded", started_at=now, ended_at=now,
                inputs=jsonio.dumps(inputs) if inputs is not None else None, output=jsonio.dumps(rec.output),
                consumed=jsonio.dumps(consumed) if consumed else None,
                injected=jsonio.dumps(rec.injected) if rec.injected else None, origin="reused", gates=gates))

    # -- the replay executor ------------------------------------------------------------------------

    def _get_executor(self) -> Executor:
        if self._executor is None:
            self._executor = Executor(concrete(MarkingStore)(self.store, self._marks), self._replay_workflow(),
                                      max_concurrency=self.max_concurrency, workflow_id=self.run.workflow_id,
                                      on_event=self.tracing.hook,
                                      leased=False)  # a replay run is private to this process
        return self._executor

    def _replay_workflow(self) -> BoundWorkflow:
        """The workflow a replay executes: in warn mode, every step (a ``workflow:`` step too, which replays its
        child run) going through the replay's own function."""
        warned = self.workflow.in_warn_mode()  # replays have nobody to review a pause
        return warned.with_steps({sid: replace(step, function=StepFunction(self._wrap(step), takes_ctx=True,
                                                                           is_async=True), child=None)
                                  for sid, step in warned.steps.items()})

    def _wrap(self, step: BoundStep) -> Any:
        sid = step.id

        async def replay_step(ctx: StepContext, **kwargs: Any) -> Any:
            # async, so a cached output returns on the event loop; real work still runs in a thread
            plan = self._plans[ctx.run_id]
            unit = unit_name(sid, ctx.index, ctx.iteration)
            policy = self._unit_policy(plan, sid, unit)  # an iteration or instance named by the plan: its own
            key = None if policy in ("fixed", "edit") else (
                InputKeys.from_kwargs(kwargs) if ctx.iteration is None
                else iteration_key(kwargs, ctx.iteration, ctx.previous_iteration))
            inner = plan.below(unit)
            if step.child is not None and policy in ("own", "fresh", "resample") and inner.changes():
                return await self._replay_child(step, unit, inner, kwargs, ctx.run_id)
            value, origin = self._known(plan, sid, policy, key, unit)
            if value is not None:
                self._marks[(ctx.run_id, unit)] = origin
                return value.data
            if step.child is not None and policy in ("own", "fresh", "resample"):  # new inputs, or run afresh
                fresh = frozenset() if policy == "own" else frozenset(step.child.steps)
                output = await self._replay_child(step, unit, Plan(fresh=fresh), kwargs, ctx.run_id)
                if key is not None and policy == "own" and ctx.run_id not in self._probing:
                    self.cache.put(sid, policy, key, Value.of(output), "replay")
                return output
            if ctx.run_id in self._probing:  # the probe stops: this plan's replay must execute, so it is stored
                self._needs_run.add(ctx.run_id)
                raise NeedsExecution(unit)
            if policy == "recorded":  # replays never act, and the record does not fit these inputs
                blocked = ReplayBlocked(sid, self.blocked_reason(sid, unit))
                self.blocked.setdefault(ctx.run_id, blocked)
                self._marks[(ctx.run_id, unit)] = "blocked"  # it never ran: its record must not say executed
                raise blocked
            function = step.function
            if policy == "baseline" and step.baseline is not None:
                function = step.baseline
            elif policy == "simulate" and step.simulate is not None:
                function = step.simulate
            with self._lock:
                self.executions += 1
                self.executions_by_step[sid] = self.executions_by_step.get(sid, 0) + 1
            origin = {"baseline": "baseline", "resample": "resampled", "simulate": "simulated"}.get(policy, "executed")
            ctx.llm_cache, ctx.resample = self.llm_cache, policy == "resample"
            result = await call_step(function, kwargs, ctx)
            return self._remember(step, policy, key, result, ctx.run_id, origin, unit)

        return replay_step

    async def _replay_child(self, step: BoundStep, unit: str, plan: Plan, kwargs: dict[str, Any], run_id: str) -> Any:
        """The output of ``unit``'s child run replayed under ``plan`` on the inputs the parent's replay gave it."""
        engine = self.child_engine(unit) or self.unstarted_child_engine(unit)
        assert step.child is not None
        inputs = jsonio.loads(jsonio.dumps(resolve_inputs(step.child.spec, kwargs)))
        if run_id in self._probing:  # a probe takes the child's value only where it needs no stored run either
            known = await engine.known_inside(plan, inputs)
            if known is None or known.status != "succeeded":
                self._needs_run.add(run_id)
                raise NeedsExecution(unit)
            self._marks[(run_id, unit)] = "replayed"
            return known.output
        before, counted = engine.executions, dict(engine.executions_by_step)
        with self.tracing.within(run_id, unit):  # the child's replay trace links to this unit's step
            evaluation = await engine.evaluate_inside(plan, inputs, label=next(iter(plan.reference), None))
        with self._lock:  # what the child's replay executed, by path, is this replay's cost too
            self.executions += engine.executions - before
            for inner, n in engine.executions_by_step.items():
                if n > counted.get(inner, 0):
                    path = join_path(unit, inner)
                    self.executions_by_step[path] = self.executions_by_step.get(path, 0) + n - counted.get(inner, 0)
        self.child_replays.setdefault(run_id, {})[unit] = evaluation.run_id
        if evaluation.status == "blocked":
            assert evaluation.blocked_by is not None and evaluation.blocked_reason is not None
            blocked = ReplayBlocked(join_path(unit, evaluation.blocked_by), evaluation.blocked_reason)
            self.blocked.setdefault(run_id, blocked)
            self._marks[(run_id, unit)] = "blocked"
            raise blocked
        if evaluation.status != "succeeded":
            raise ChildReplayFailed(f"the replay {evaluation.run_id} of child run {engine.run.run_id} "
                                    f"{evaluation.status}: {evaluation.error or 'no error recorded'}")
        self._marks[(run_id, unit)] = "replayed"
        return evaluation.output

    def _remember(self, step: BoundStep, policy: str, key: str | None, result: Any, run_id: str, origin: str,
                  unit: str) -> Any:
        plain = jsonio.output_to_plain(result)
        if step.spec.type == "critic":  # store what the executor will store, so digests agree
            plain = critic_verdict(result, step.spec.verifies).to_json()
        if key is not None and policy != "fresh":
            self.cache.put(step.id, policy, key, Value.of(plain), "replay")
        self._marks[(run_id, unit)] = origin
        return plain

    # -- forks --------------------------------------------------------------------------------------

    def fork(self, from_step: str, output: Any = MISSING) -> Evaluation:
        """A new run from ``from_step``: earlier steps reuse their records, ``from_step`` takes
        ``output`` (or re-executes) and everything downstream of it runs again. ``from_step`` may be a path
        into a child run (``research > retrieve``): the child is replayed from that step, then the parent
        from the unit that started it."""
        if PATH_SEPARATOR.strip() in from_step:
            return self._fork_path(from_step, output)
        if from_step not in self.steps:
            raise NotFoundError(f"workflow {self.spec.name!r} has no step {from_step!r}; steps: {self.order}")
        downstream = frozenset(graph.descendants(self.spec, [from_step]))
        if output is MISSING:
            plan = Plan(fresh=downstream | {from_step})
        else:
            try:
                output = jsonio.output_to_plain(output)
            except jsonio.NotSerializableError as exc:
                raise InputError(f"the replacement output cannot be stored as JSON: {exc}") from None
            plan = Plan(fixed={from_step: output}, fresh=downstream)
        evaluation = self.run_plan(plan, kind="replay", label=from_step)
        return evaluation

    def _fork_path(self, path: str, output: Any) -> Evaluation:
        units = split_path(path)
        engine: ReplayEngine = self
        prefix: list[str] = []
        downstream: set[str] = set()
        for depth, unit in enumerate(units):  # what runs again: downstream of the path's unit at every level
            step_id = parse_unit(unit)[0]
            if step_id not in engine.steps:
                raise NotFoundError(f"workflow {engine.spec.name!r} has no step {step_id!r} (in {path!r}); "
                                    f"steps: {engine.order}")
            downstream |= {join_path(*prefix, d) for d in graph.descendants(engine.spec, [step_id])}
            if depth < len(units) - 1:
                child = engine.child_engine(unit)
                if child is None:
                    raise NotFoundError(f"unit {unit!r} of run {engine.run.run_id} started no child run, so {path!r} "
                                        "names nothing")
                engine, prefix = child, [*prefix, unit]
        path = join_path(*units)
        if output is MISSING:
            plan = Plan(fresh=frozenset(downstream | {path}))
        else:
            try:
                output = jsonio.output_to_plain(output)
            except jsonio.NotSerializableError as exc:
                raise InputError(f"the replacement output cannot be stored as JSON: {exc}") from None
            plan = Plan(fixed={path: output}, fresh=frozenset(downstream))
        return self.run_plan(plan, kind="replay", label=path)
