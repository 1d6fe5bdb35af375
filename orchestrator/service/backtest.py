"""Gate backtesting: how a new or changed workflow's gates would have judged the runs already stored.

``orchestrator gates backtest FILE`` and ``Orchestrator.backtest`` ask, for each gate of each step (and
each critic), what it says about the outputs past runs of the workflow recorded, and set the answer
against the outcomes people and evaluators recorded: which failures it would have caught, which correct
runs it would have stopped, what that costs in pauses, and which runs it now judges differently. No step
is executed: a gate is given the step's stored output and a context built the way the executor builds it
(:meth:`~orchestrator.engine.attempt.StepRunner.context`), and checked by the executor's own
:meth:`~orchestrator.engine.attempt.StepRunner.check_gate`, budgets included, so a backtest verdict is the
verdict a run would have reached on that output. A critic verifies rather than works: its function is
called on the stored outputs it reads (the steps it verifies), never on anything it would act on.

The rules, which ``docs/gates.md`` states for users:

- **The output judged** for a step is its latest attempt that produced one (the step's own execution, not
  a reviewer's edit or approval copy), per instance of a ``for_each`` step and per iteration of a
  ``repeat:`` step; a run fails a gate when any of those units does.
- **Not evaluable**, with the reason, when there is nothing to judge: the step did not run, was skipped,
  failed before its gates, or (a critic, or a gate reading another step such as ``evidence``) a step it
  reads has no stored output. Such runs count in no rate.
- **A model judge** (``llm_judge``, a critic with a ``prompt``, any gate calling ``ctx.llm``) is called only
  with ``judges=True``, and its calls are counted; otherwise the gate is reported as skipped.
- **Labels**: a run's outcome is its latest outcome (human label or evaluator score), its blamed step is
  the one its explaining attribution names (as ``orchestrator runs`` shows them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from gates.base import is_gate_error
from gates.llm_judge import LLMJudge
from orchestrator.bind.approvals import AWAITING_APPROVAL
from orchestrator.bind.binding import BoundGate, BoundStep, BoundWorkflow
from orchestrator.bind.invoke import call_step
from orchestrator.core.errors import InputError
from orchestrator.engine.attempt import (
    AttemptState,
    RunContext,
    StepRunner,
    critic_verdict,
    gate_policy,
    resolve_inputs,
)
from orchestrator.engine.run_state import Done
from orchestrator.engine.workflow_filter import check_workflow_filter
from orchestrator.service.listing import MAX_LIMIT, run_query
from orchestrator.spec.context import CallLog, StepContext
from orchestrator.spec.model import GateResult, field_value
from orchestrator.spec.records import StepRecordView, live_records, parse_unit, path_head
from orchestrator.store import Store
from orchestrator.store.triage import TriageRow

DEFAULT_LIMIT = 1000
"""Runs backtested unless ``limit=`` says otherwise: the newest thousand."""

RUN_FILTERS = ("status", "since", "limit", "workflow", "outcome", "blamed")
"""The ``--runs KEY=VALUE`` keys: the filters of ``orchestrator runs`` (``workflow`` names the runs' workflow,
by default the backtested file's own name)."""

CRITIC_GATE = "critic"
"""The label of a critic's verdict, as runs store it."""

JUDGE_SKIPPED = "it calls a model; backtest with --judges to call it"
"""Why a model judge was not asked."""

_JUDGED_STATUSES = frozenset({"succeeded", "gate_failed"})
"""Statuses of an attempt whose output its gates judged (besides a ``failed`` one failed by its gates)."""


class ModelCallsRefused(RuntimeError):
    """A gate asked for a model during a backtest without ``judges``."""


class RefusingModelClient:
    """``ctx.llm`` of a backtest without ``judges``: any call is refused, so the gate is reported as skipped
    instead of calling (and paying for) a model nobody asked to call."""

    async def acomplete(self, *_: Any, **__: Any) -> Any:
        raise ModelCallsRefused(JUDGE_SKIPPED)

    def complete(self, *_: Any, **__: Any) -> Any:
        raise ModelCallsRefused(JUDGE_SKIPPED)


# -- the report ---------------------------------------------------------------------------------------


class Rate(BaseModel):
    """A ratio with its counts: ``value`` is ``hits / of`` (None when ``of`` is 0)."""

    value: float | None
    hits: int
    of: int


class VerdictChange(BaseModel):
    """A run the gate judges differently from the verdict stored on the same output."""

    run_id: str
    unit: str
    """The step, ``STEP[i]`` for an instance, ``STEP#n`` for an iteration."""
    was: bool | None
    """The stored verdict (passed?); None when the gate never judged this output (a new gate)."""
    now: bool
    change: Literal["now_fails", "now_passes", "new_gate_fails"]
    reason: str


class NotEvaluated(BaseModel):
    """A run the gate could not judge (``not_evaluable``) or was not asked to (``skipped``: a model judge
    without ``judges``), and why."""

    run_id: str
    reason: str


class GateBacktest(BaseModel):
    """One gate of one step over the backtested runs."""

    step_id: str
    gate: str
    kind: Literal["gate", "critic"]
    severity: str
    on_gate_fail: str
    judge: bool
    """Whether the gate calls a model (called only with ``judges``)."""
    guards: list[str]
    """The steps whose failures it is meant to catch: its step, and for a critic the steps it verifies."""
    new: bool
    """No backtested run stored a verdict of this gate (it is new, or renamed)."""
    runs: int
    evaluated: int
    not_evaluable: int
    skipped: int
    passes: int
    fails: int
    errors: int
    """Fails because the check itself broke (it raised); a run pauses on those too."""
    would_pause: int
    """Runs it would have stopped at this step: failed, severity ``block``, and ``on_gate_fail`` not ``warn``
    (paused for review; under ``fail`` the run would fail instead)."""
    pauses_per_100_runs: float | None
    failures: int
    """Evaluated runs labelled incorrect whose blamed step is one it guards."""
    caught: int
    missed: int
    false_alarms: int
    """Would-pause runs labelled correct."""
    other_incorrect_pauses: int
    """Would-pause runs labelled incorrect with the blame elsewhere (or nowhere)."""
    unlabelled_pauses: int
    precision: Rate
    """``caught / (caught + false_alarms)``."""
    recall: Rate
    """``caught / failures``."""
    caught_runs: list[str]
    false_alarm_runs: list[str]
    changed: list[VerdictChange]
    not_evaluated: list[NotEvaluated]
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class BacktestReport(BaseModel):
    """``gates backtest --json``: every gate's backtest, in the workflow's step order."""

    workflow: str
    """The backtested workflow's name."""
    runs_of: str
    """The workflow whose stored runs were backtested (its own name unless ``workflow=`` said otherwise)."""
    runs: int
    """Runs backtested."""
    matching_runs: int
    """Runs the filters keep in all (more than ``runs`` when ``limit`` cut the list)."""
    filters: dict[str, Any]
    judges: bool
    steps_executed: int = 0
    """Always 0: a backtest executes no step."""
    model_calls: int = 0
    gates: list[GateBacktest] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def gate(self, step_id: str, gate: str) -> GateBacktest:
        """The backtest of ``gate`` on ``step_id``; KeyError when the workflow has no such gate."""
        for entry in self.gates:
            if entry.step_id == step_id and entry.gate == gate:
                return entry
        raise KeyError(f"no gate {gate!r} on step {step_id!r}")


# -- the filters ---------------------------------------------------------------------------------------


def parse_run_filters(entries: Iterable[str]) -> dict[str, str]:
    """``["status=succeeded", "since=7d,limit=200"]`` -> ``{"status": ..., "since": ..., "limit": ...}``;
    InputError naming an entry that is not ``KEY=VALUE`` with a known key."""
    filters: dict[str, str] = {}
    for entry in entries:
        for part in entry.split(","):
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not value:
                raise InputError(f"--runs {part!r} is not KEY=VALUE; keys: {', '.join(RUN_FILTERS)}")
            if key not in RUN_FILTERS:
                raise InputError(f"--runs {part!r}: unknown filter {key!r}; keys: {', '.join(RUN_FILTERS)}")
            filters[key] = value
    return filters


def _limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIMIT
    try:
        limit = int(str(value))
    except (TypeError, ValueError):
        raise InputError(f"--runs limit={value!r} is not a whole number") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"--runs limit={limit} must be between 1 and {MAX_LIMIT}")
    return limit


# -- backtesting ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Unit:
    """One unit's stored output and its stored verdicts."""

    unit: str
    record: StepRecordView


@dataclasses.dataclass
class _Verdict:
    """One gate's verdict on one run."""

    status: Literal["passed", "failed", "not_evaluable", "skipped"]
    reason: str = ""
    error: bool = False
    changes: list[VerdictChange] = dataclasses.field(default_factory=list)
    stored: bool = False
    """Some judged output of the run carried a stored verdict of this gate."""
    output: Any = None
    """A critic's new verdict as its output (what its own gates judge)."""


@dataclasses.dataclass
class _Tally:
    """What one gate accumulates over the runs."""

    step: BoundStep
    gate: str
    kind: Literal["gate", "critic"]
    severity: str
    judge: bool
    guards: tuple[str, ...]
    bound: BoundGate | None = None
    """The gate itself (None for a critic's verdict)."""
    verdicts: list[tuple[TriageRow, _Verdict]] = dataclasses.field(default_factory=list)
    calls: CallLog = dataclasses.field(default_factory=lambda: CallLog("judge"))


def backtest(store: Store, workflow: BoundWorkflow, *, step: str | None = None,
             filters: Mapping[str, Any] | None = None, judges: bool = False) -> BacktestReport:
    """Backtest ``workflow``'s gates (only ``step``'s with ``step``) over the stored runs ``filters`` keep.

    ``filters`` holds :data:`RUN_FILTERS` keys, as text from a command line or typed from Python (``since``:
    epoch seconds, a datetime, an ISO date or ``7d``; ``limit``: a number); None values are left out.

    InputError (exit 2) for a ``step`` the workflow lacks, a bad filter, or a workflow with no stored runs.
    Must be called outside a running event loop (it runs one for the gates).
    """
    filters = {k: v for k, v in (filters or {}).items() if v is not None}
    unknown = sorted(set(filters) - set(RUN_FILTERS))
    if unknown:
        raise InputError(f"unknown run filter {unknown[0]!r}; filters: {', '.join(RUN_FILTERS)}")
    if step is not None and step not in workflow.steps:
        raise InputError(f"--step {step!r} is not a step of workflow {workflow.name!r}; its steps: "
                         f"{list(workflow.order)}")
    runs_of = str(filters.get("workflow") or workflow.name)
    query = run_query(status=_text(filters, "status"), workflow=runs_of, outcome=_text(filters, "outcome"),
                      blamed=_text(filters, "blamed"), since=filters.get("since"),
                      limit=_limit(filters.get("limit")))
    page = store.triage_runs(query)
    if not page.rows and page.total == 0 and not any(k in filters for k in ("status", "since", "outcome", "blamed")):
        check_workflow_filter(store, runs_of)  # no runs at all: name the workflows that have some
    records = store.step_records_of([row.run.run_id for row in page.rows])
    stored_steps = {wid: _step_ids(store.workflow_definition(wid)[0])
                    for wid in {row.run.workflow_id for row in page.rows}}
    steps = [workflow.steps[s] for s in workflow.order if step is None or s == step]
    runs = [_StoredRun(store, workflow, row, records.get(row.run.run_id, []), stored_steps[row.run.workflow_id],
                       judges) for row in page.rows]
    tallies = anyio.run(_evaluate_all, steps, runs)
    gates = [_summarise(t) for t in tallies]
    return BacktestReport(workflow=workflow.name, runs_of=runs_of, runs=len(page.rows), matching_runs=page.total,
                          filters={k: query.limit if k == "limit" else filters[k] for k in RUN_FILTERS
                                   if k in filters}, judges=judges,
                          model_calls=sum(g.model_calls for g in gates), gates=gates)


def _text(filters: Mapping[str, Any], key: str) -> str | None:
    value = filters.get(key)
    return None if value is None else str(value)


def _step_ids(definition: Mapping[str, Any]) -> frozenset[str]:
    """The step ids of a stored workflow definition."""
    return frozenset(str(s.get("id")) for s in definition.get("steps") or [] if isinstance(s, dict))


async def _evaluate_all(steps: Sequence[BoundStep], runs: Sequence[_StoredRun]) -> list[_Tally]:
    tallies = [tally for bound in steps for tally in _tallies(bound)]
    for run in runs:
        for tally in tallies:
            tally.verdicts.append((run.row, await run.verdict(tally)))
    return tallies


def _tallies(step: BoundStep) -> list[_Tally]:
    spec = step.spec
    guards: tuple[str, ...] = (step.id,)
    found: list[_Tally] = []
    if spec.type == "critic":
        guards = (step.id, *spec.verifies)
        found.append(_Tally(step, CRITIC_GATE, "critic", "block", spec.calls_model, guards))
    for gate in step.gates:
        found.append(_Tally(step, gate.label, "gate", gate.severity, isinstance(gate.check, LLMJudge), guards,
                            gate))
    return found


class _StoredRun:
    """One stored run as the gates see it: its judged outputs, its live outputs, its inputs."""

    def __init__(self, store: Store, workflow: BoundWorkflow, row: TriageRow, records: list[StepRecordView],
                 stored_steps: frozenset[str], judges: bool) -> None:
        self.workflow = workflow
        self.stored_steps = stored_steps
        """The steps of the workflow version the run ran."""
        self.row = row
        self.run_id = row.run.run_id
        self.judges = judges
        self.live = live_records(records)
        self.outputs = {rec.id: rec.output for rec in records}
        self.judged: dict[str, list[_Unit]] = {}
        latest: dict[str, StepRecordView] = {}
        for rec in records:
            if rec.origin == "executed" and _judged(rec):
                latest[rec.unit] = rec
        for unit, rec in latest.items():
            self.judged.setdefault(rec.step_id, []).append(_Unit(unit, rec))
        finished = [(unit, rec) for unit, rec in self.live.items() if rec.status in ("succeeded", "skipped")]
        self.done = {unit: Done(rec.id, rec.output, rec.ended_at, seq=i, skipped=rec.status == "skipped")
                     for i, (unit, rec) in enumerate(finished)}
        """The outputs consumers read, numbered in order (``ctx.upstream`` shows those numbered below its size)."""
        self.context = RunContext(store=store, run_id=self.run_id, workflow=row.run.workflow,
                                  workflow_id=row.run.workflow_id, inputs=dict(row.run.inputs), done=self.done,
                                  llm_defaults=workflow.spec.llm)
        self.critic_outputs: dict[str, _Verdict] = {}

    async def verdict(self, tally: _Tally) -> _Verdict:
        step = tally.step
        if step.spec.type == "critic":
            critic = await self.critic(tally)
            if tally.kind == "critic":
                return critic
            if critic.status not in ("passed", "failed"):
                return _Verdict(critic.status, critic.reason)
            stored = self.judged.get(step.id)  # the critic's own record, whose gates judged its stored verdict
            units: list[tuple[str, StepRecordView | None, Any]] = [
                (step.id, stored[-1].record if stored else None, critic.output)]
        else:
            found = self.judged.get(step.id)
            if not found:
                return _Verdict("not_evaluable", self.why_no_output(step.id))
            if tally.judge and not self.judges:
                return _Verdict("skipped", JUDGE_SKIPPED)
            units = [(u.unit, u.record, u.record.output) for u in found]
        gate = tally.bound
        assert gate is not None, "a gate's tally holds the gate"
        missing = self.missing_sources(gate)
        if missing:
            return _Verdict("not_evaluable", missing)
        result = _Verdict("passed")
        for unit, record, output in units:
            verdict = await self.check(tally, gate, record, output)
            if isinstance(verdict, _Verdict):
                return verdict
            self.note(result, tally, unit, record, verdict)
        return result

    def note(self, result: _Verdict, tally: _Tally, unit: str, record: StepRecordView | None,
             verdict: GateResult) -> None:
        """Fold one unit's verdict into the run's, with the change from the stored one."""
        if not verdict.passed:
            if result.status == "passed":
                result.status, result.reason = "failed", verdict.reason
            result.error = result.error or is_gate_error(verdict)
        was = _stored_verdict(record, tally.gate) if record is not None else None
        result.stored = result.stored or was is not None
        if was is None and verdict.passed or was == verdict.passed:
            return
        change: Literal["now_fails", "now_passes", "new_gate_fails"] = (
            "new_gate_fails" if was is None else ("now_fails" if was else "now_passes"))
        result.changes.append(VerdictChange(run_id=self.run_id, unit=unit, was=was, now=verdict.passed,
                                            change=change, reason=verdict.reason))

    async def check(self, tally: _Tally, gate: BoundGate, record: StepRecordView | None,
                    output: Any) -> GateResult | _Verdict:
        """The gate's verdict on one unit's output, through the executor's own check; a :class:`_Verdict`
        when it cannot be judged here (the gate wants a model and judges are off)."""
        runner = StepRunner(self.context, tally.step, index=None if record is None else record.index,
                            iteration=None if record is None else record.iteration)
        ctx = self.gate_context(runner, record)
        with ctx.calls.owned_by("judge", gate.label):
            evaluation = await runner.check_gate(gate, output, ctx)
        tally.calls.calls.extend(ctx.calls.calls)
        details = evaluation.result.details
        if not self.judges and details.get("error") == ModelCallsRefused.__name__:
            return _Verdict("skipped", JUDGE_SKIPPED)
        return evaluation.result

    def gate_context(self, runner: StepRunner, record: StepRecordView | None) -> StepContext:
        arguments = {} if record is None else self.stored_arguments(record.inputs or {})
        ctx = runner.context(1 if record is None else record.attempt, arguments, AttemptState([]))
        return ctx if self.judges else dataclasses.replace(ctx, llm=RefusingModelClient())

    def stored_arguments(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """A record's stored inputs with each link to another record replaced by what it read from it."""
        out: dict[str, Any] = {}
        for name, value in stored.items():
            if isinstance(value, dict) and "$record" in value:
                linked = self.outputs.get(value["$record"])
                try:
                    out[name] = field_value(linked, value["field"]) if value.get("field") else linked
                except KeyError:
                    out[name] = None
            else:
                out[name] = value
        return out

    async def critic(self, tally: _Tally) -> _Verdict:
        """The critic's new verdict on the stored outputs it reads (computed once per run)."""
        step = tally.step
        if step.id not in self.critic_outputs:
            self.critic_outputs[step.id] = await self.call_critic(step, tally)
        return self.critic_outputs[step.id]

    async def call_critic(self, step: BoundStep, tally: _Tally) -> _Verdict:
        spec = step.spec
        if spec.side_effects:
            return _Verdict("not_evaluable", f"critic {step.id!r} is marked side_effects: a backtest does not "
                                             "call it")
        if spec.mapped or spec.repeat is not None or step.child is not None:
            return _Verdict("not_evaluable", f"critic {step.id!r} runs per item, per iteration or as a child "
                                             "workflow; a backtest calls only a plain critic")
        for dep in step.dependencies:
            entry = self.done.get(dep)
            if entry is None:
                return _Verdict("not_evaluable", f"critic {step.id!r} reads step {dep!r}, which "
                                                 f"{self.why_no_output(dep, described=False)}")
            if entry.skipped and spec.join == "all":
                return _Verdict("not_evaluable", f"critic {step.id!r} reads step {dep!r}, which was skipped")
        if spec.calls_model and not self.judges:
            return _Verdict("skipped", JUDGE_SKIPPED)
        runner = StepRunner(self.context, step)
        try:
            kwargs, _, _ = resolve_inputs(step, self.context.inputs, self.done, 0.0)
        except KeyError as exc:
            return _Verdict("not_evaluable", f"critic {step.id!r}: {exc.args[0] if exc.args else exc}")
        ctx = self.gate_context(runner, None)
        ctx.inputs = kwargs
        ctx.calls.purpose = "critic"
        try:
            returned = await call_step(step.function, kwargs, ctx)
        except ModelCallsRefused:
            return _Verdict("skipped", JUDGE_SKIPPED)
        except Exception as exc:  # noqa: BLE001 (user code: its error is the answer)
            return _Verdict("not_evaluable", f"critic {step.id!r} raised {type(exc).__name__}: {exc}")
        finally:
            tally.calls.calls.extend(ctx.calls.calls)
        verdict = critic_verdict(returned, spec.verifies)
        result = _Verdict("passed", output=verdict.to_json())
        stored = self.judged.get(step.id)
        self.note(result, tally, step.id, stored[-1].record if stored else None, verdict)
        return result

    def missing_sources(self, gate: BoundGate) -> str | None:
        """Why a gate that reads other steps' outputs (``evidence``, ``similarity``) cannot be checked here."""
        reads = getattr(gate.check, "upstream_steps", None)
        if not callable(reads):
            return None
        for source in reads():
            if source not in self.done or self.done[source].skipped:
                return f"gate {gate.label!r} reads step {source!r}, which {self.why_no_output(source, described=False)}"
        return None

    def why_no_output(self, step_id: str, *, described: bool = True) -> str:
        """Why a step has no output to judge in this run, as a sentence (or its predicate)."""
        rec = self.live.get(step_id)
        if rec is None:
            rec = next((r for u, r in self.live.items() if parse_unit(u)[0] == step_id), None)
        if rec is None and step_id not in self.stored_steps:
            what = "is not in the workflow version this run ran (a new step)"
        elif rec is None:
            what = "did not run in this run (no record)"
        elif rec.status == "skipped":
            what = f"was skipped ({rec.skip_reason})" if rec.skip_reason else "was skipped"
        elif rec.status == "failed":
            what = f"failed before its gates ({rec.error})"
        elif rec.status == "gate_failed":
            what = "waits for review (its output went no further)"
        elif rec.status == "succeeded":
            what = "has no output of its own to judge (every instance or iteration is missing)"
        else:
            what = f"had not finished ({rec.status})"
        return f"step {step_id!r} {what}" if described else what


def _judged(rec: StepRecordView) -> bool:
    """Whether an attempt's output was judged by its gates (so a backtest judges it too)."""
    if rec.error_type == AWAITING_APPROVAL:
        return False
    return rec.status in _JUDGED_STATUSES or (rec.status == "failed" and rec.error_type == "GateFailed")


def _stored_verdict(record: StepRecordView, gate: str) -> bool | None:
    for view in record.gates:
        if view.gate == gate:
            return view.passed
    return None


def _blamed_step(row: TriageRow) -> str | None:
    """The step (not the instance, iteration or child step) the run's explaining attribution blames."""
    if row.blamed_step is None:
        return None
    try:
        return parse_unit(path_head(row.blamed_step))[0]
    except ValueError:
        return row.blamed_step


def _rate(hits: int, of: int) -> Rate:
    return Rate(value=round(hits / of, 4) if of else None, hits=hits, of=of)


def _summarise(tally: _Tally) -> GateBacktest:
    step = tally.step
    stops = tally.severity == "block" and gate_policy(
        step.on_gate_fail, [GateResult(False, 0.0, "")], is_last=True)[0] != "succeeded"
    evaluated = [(row, v) for row, v in tally.verdicts if v.status in ("passed", "failed")]
    paused = [(row, v) for row, v in evaluated if v.status == "failed" and stops]
    failures = {row.run.run_id for row, _ in evaluated
                if row.outcome_correct is False and _blamed_step(row) in tally.guards}
    caught = [row.run.run_id for row, _ in paused if row.run.run_id in failures]
    false_alarms = [row.run.run_id for row, _ in paused if row.outcome_correct is True]
    other = sum(1 for row, _ in paused if row.outcome_correct is False and row.run.run_id not in failures)
    unlabelled = sum(1 for row, _ in paused if row.outcome_correct is None)
    calls = tally.calls.calls
    costs = [c.cost for c in calls if c.cost is not None]
    return GateBacktest(
        step_id=step.id, gate=tally.gate, kind=tally.kind, severity=tally.severity, on_gate_fail=step.on_gate_fail,
        judge=tally.judge, guards=list(tally.guards), new=not any(v.stored for _, v in evaluated),
        runs=len(tally.verdicts), evaluated=len(evaluated),
        not_evaluable=sum(1 for _, v in tally.verdicts if v.status == "not_evaluable"),
        skipped=sum(1 for _, v in tally.verdicts if v.status == "skipped"),
        passes=sum(1 for _, v in evaluated if v.status == "passed"),
        fails=sum(1 for _, v in evaluated if v.status == "failed"),
        errors=sum(1 for _, v in evaluated if v.error),
        would_pause=len(paused),
        pauses_per_100_runs=round(100 * len(paused) / len(evaluated), 2) if evaluated else None,
        failures=len(failures), caught=len(caught), missed=len(failures) - len(caught),
        false_alarms=len(false_alarms), other_incorrect_pauses=other, unlabelled_pauses=unlabelled,
        precision=_rate(len(caught), len(caught) + len(false_alarms)), recall=_rate(len(caught), len(failures)),
        caught_runs=caught, false_alarm_runs=false_alarms,
        changed=[change for _, v in tally.verdicts for change in v.changes],
        not_evaluated=[NotEvaluated(run_id=row.run.run_id, reason=v.reason) for row, v in tally.verdicts
                       if v.status in ("not_evaluable", "skipped")],
        model_calls=len(calls), input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls), cost=round(sum(costs), 6) if costs else None)
