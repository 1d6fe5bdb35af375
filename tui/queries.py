"""Store reads shaped for the review screens. No Textual here: the screens call these from
thread workers, and tests call them directly.

Everything goes through :class:`orchestrator.store.Store` and the review module's own
``waiting_records``, so the TUI sees exactly what ``orchestrator runs`` and ``show`` see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.engine.workflow_filter import workflows_with_runs
from orchestrator.spec.records import PATH_SEPARATOR, parse_unit, path_head, unit_name

if TYPE_CHECKING:
    from orchestrator.engine.tree import OpenPause
    from orchestrator.spec.records import AttributionView, OutcomeView, ReviewView, RunView, StepRecordView
    from orchestrator.store import Store

RUN_STATUSES = ("paused", "running", "queued", "succeeded", "failed", "rejected")
"""The filter choices, most actionable first (the closed set of ``orchestrator.spec.model.RunStatus``)."""

FINISHED = frozenset({"succeeded", "failed", "rejected"})


@dataclass(frozen=True)
class RunRow:
    """One line of the runs table."""

    run_id: str
    workflow: str
    status: str
    waiting: tuple[str, ...]
    """Steps waiting for a decision (only for paused runs)."""
    created_at: float
    updated_at: float
    outcome: str = ""
    """The latest outcome: ``0.25 incorrect``, ``1.00 correct``, or empty when there is none."""
    correct: bool | None = None
    gate_reason: str = ""
    """Why the first waiting step's gate failed (paused runs)."""
    blamed: str = ""
    """The step the latest attribution record blamed."""

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def load_runs(store: Store, *, limit: int = 500) -> list[RunRow]:
    """Runs (not replays), paused ones first, then newest first, with what ``orchestrator runs`` shows
    of each (outcome, waiting step and gate reason, blamed step): one page query, not one per run."""
    from orchestrator.engine.documents import with_child_pauses
    from orchestrator.service.listing import run_query

    rows = []
    page = store.triage_runs(run_query(limit=limit))
    with_child_pauses(store, page.rows)  # a parent paused by a child waits at the path into it, as in `runs`
    for t in page.rows:
        verdict = {True: " correct", False: " incorrect"}.get(t.outcome_correct, "")  # type: ignore[arg-type]
        outcome = "" if t.outcome_value is None else f"{t.outcome_value:.2f}{verdict}"
        rows.append(RunRow(t.run.run_id, t.run.workflow, t.run.status, tuple(t.waiting_steps), t.run.created_at,
                           t.run.updated_at, outcome=outcome, correct=t.outcome_correct,
                           gate_reason=t.gate_reason or "", blamed=t.blamed_step or ""))
    rows.sort(key=lambda r: not r.paused)  # stable: newest first within each group
    return rows


def evaluator_verdict(store: Store, run_id: str) -> bool | None:
    """Whether the run's latest evaluator outcome judged the output correct (None: no evaluator outcome).

    The label dialog starts from it, so a reviewer confirms the evaluator unless they disagree.
    """
    scored = [o for o in store.outcomes(run_id) if o.source == "evaluator"]
    return scored[-1].correct if scored else None


def dashboard_workflows(store: Store) -> list[str]:
    """Workflows with production runs (started alone or as child runs), the one of the newest run first, then
    by name.

    One GROUP BY over the runs and one single-row read: the dashboard's cost does not grow with the runs.
    """
    names = workflows_with_runs(store)
    newest = store.list_runs(kind="run", limit=1)
    if newest and newest[0].workflow in names:
        names.remove(newest[0].workflow)
        names.insert(0, newest[0].workflow)
    return names


def filter_runs(rows: list[RunRow], *, status: str | None = None, workflow: str = "") -> list[RunRow]:
    """Rows in ``status`` (None: any) whose workflow name contains ``workflow`` (case-insensitive)."""
    needle = workflow.strip().lower()
    return [r for r in rows if (status is None or r.status == status) and needle in r.workflow.lower()]


INSTANCES_SHOWN = 20
"""A mapped step with more instances than this shows a summary row plus the ones waiting or failed, as
``orchestrator show`` does (``orchestrator.cli.inspecting.INSTANCES_SHOWN``)."""


@dataclass
class StepItem:
    """One row of the run screen: a step, or one instance of a mapped step (``summarize[7]``), with its
    latest record plus its history; or the summary row of a mapped step's many instances."""

    step_id: str
    step_type: str
    agent: str
    status: str
    """The latest record's status, or ``pending`` when the step has no record yet."""
    attempt: int
    waiting: bool
    """A gate failed and no decision has been made: approve/edit/retry/reject apply."""
    record: StepRecordView | None = None
    gate_record: StepRecordView | None = None
    """The latest record that carries gate results (an approval's record carries none)."""
    attempts: list[StepRecordView] = field(default_factory=list)
    reviews: list[ReviewView] = field(default_factory=list)
    inputs: dict[str, Any] | None = None
    """The inputs it ran with; references to upstream records are replaced by their outputs."""
    upstream: list[str] = field(default_factory=list)
    """The units whose records it consumed (or, before it ran, the steps it depends on)."""
    index: int | None = None
    """The item's position for an instance of a mapped step; None for a step (and a summary row)."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a step, an instance and a loop's result."""
    unit: str = ""
    """The row's key and what decisions name: the step id, ``summarize[7]`` for an instance, ``improve#2``
    for an iteration, or ``summarize[0..49]`` for the summary row of a collapsed map."""
    summary: str | None = None
    """On a summary row: how many instances are in each state (``50 instances: 49 succeeded, 1 gate_failed``)."""
    child_run: str | None = None
    """The child run the row opens (enter): a ``workflow:`` step's (instance's, iteration's) latest child run,
    or on a path row (``research > retrieve``) the child run that holds the pause."""

    @property
    def inside(self) -> bool:
        """Whether the row is a pause inside a child run, named by its path (``research > retrieve``)."""
        return PATH_SEPARATOR in self.unit

    def __post_init__(self) -> None:
        if not self.unit:
            self.unit = unit_name(self.step_id, self.index, self.iteration)

    @property
    def instance(self) -> bool:
        """Whether the row is a child row of its step: an instance of a mapped step (or the summary of its
        instances), or an iteration of a loop."""
        return self.index is not None or self.iteration is not None or self.summary is not None or self.inside

    @property
    def skip_reason(self) -> str | None:
        """Why a skipped step or instance did not run (its ``when`` and the values read, or an upstream skip)."""
        return self.record.skip_reason if self.record is not None and self.status == "skipped" else None

    @property
    def duration(self) -> float | None:
        """How long the step ran: an approval's or edit's record takes no time, so use the attempt it replaced."""
        executed = [r for r in self.attempts if r.origin == "executed" and r.status != "skipped"]
        if self.record is None or not executed:
            return None
        return (self.record if self.record.origin == "executed" else executed[-1]).duration

    @property
    def output(self) -> Any:
        return None if self.record is None else self.record.output


@dataclass
class RunDetail:
    """Everything the run screen shows about one run."""

    run: RunView
    steps: list[StepItem]
    """In topological order (ties in declaration order), as ``orchestrator validate`` prints it."""
    outcomes: list[OutcomeView]
    blamed_step: str | None
    """The step ``attribution`` blames, if the run has been attributed."""
    attribution: AttributionView | None = None
    """The run's most informative stored attribution record (``orchestrator.attribution.choice``)."""
    model_usage: dict[str, Any] | None = None
    """Every model call of the run, summed and split by purpose (``orchestrator.engine.documents.call_totals``)."""

    @property
    def waiting(self) -> list[str]:
        """The units waiting for a decision (``score``, ``summarize[3]``), in the order the rows show them."""
        return [s.unit for s in self.steps if s.waiting]

    def step(self, unit: str) -> StepItem | None:
        """The row of ``unit``: a step id, an instance ``summarize[7]`` or a summary row's key."""
        for item in self.steps:
            if item.unit == unit:
                return item
        return None


def load_run_detail(store: Store, run_id: str) -> RunDetail:
    from orchestrator.attribution.choice import explaining_record
    from orchestrator.engine.documents import call_totals
    from orchestrator.engine.tree import child_pauses, children
    from orchestrator.service.review import waiting_records

    run = store.get_run(run_id)
    records = store.step_records(run_id)
    reviews = store.reviews(run_id)
    waiting = {r.unit for r in waiting_records(store, run_id)} if run.status == "paused" else set()
    definition, _ = store.workflow_definition(run.workflow_id)
    order, declared = _plan(definition)
    by_id = {r.id: r for r in records}
    history: dict[str, list[StepRecordView]] = {}
    parts: dict[str, set[tuple[int | None, int | None]]] = {}
    for rec in records:
        history.setdefault(rec.unit, []).append(rec)
        if rec.index is not None or rec.iteration is not None:  # an instance, an iteration, or both
            parts.setdefault(rec.step_id, set()).add((rec.index, rec.iteration))
        if rec.step_id not in order:  # records of steps the stored definition lacks still get shown
            order.append(rec.step_id)

    def row(step_id: str, index: int | None = None, iteration: int | None = None) -> StepItem:
        unit = unit_name(step_id, index, iteration)
        attempts = history.get(unit, [])
        latest = attempts[-1] if attempts else None
        spec = declared.get(step_id, {})
        return StepItem(
            step_id=step_id,
            step_type=latest.step_type if latest else spec.get("type", "reasoning"),
            agent=latest.agent if latest else spec.get("agent") or step_id,
            status=latest.status if latest else "pending",
            attempt=latest.attempt if latest else 0,
            waiting=unit in waiting,
            record=latest,
            gate_record=next((r for r in reversed(attempts) if r.gates), None),
            attempts=attempts,
            reviews=[r for r in reviews if r.step_id == unit],
            inputs=_resolved_inputs(latest.inputs, by_id) if latest else None,
            upstream=[_consumed_unit(c, by_id) for c in latest.consumed] if latest and latest.consumed
            else list(spec.get("_deps", [])),
            index=index,
            iteration=iteration,
        )

    steps = []
    for sid in order:
        steps.append(row(sid))
        # instances by index, each (a loop) followed by its iterations; a loop's iterations under its step
        keys = sorted(parts.get(sid, ()), key=lambda k: (-1 if k[0] is None else k[0], -1 if k[1] is None else k[1]))
        steps.extend(instance_rows([row(sid, i, n) for i, n in keys]))
    started = {unit: child.run_id for unit, child in children(store, run_id).items()}
    for item in steps:
        item.child_run = started.get(item.unit)
    if run.status == "paused":
        steps = _with_pauses_inside(steps, child_pauses(store, run_id))
    chosen = explaining_record(store.attributions(run_id))
    return RunDetail(run=run, steps=steps, outcomes=store.outcomes(run_id),
                     blamed_step=chosen.blamed_step if chosen else None, attribution=chosen,
                     model_usage=call_totals(store.model_calls([run_id])))


def _with_pauses_inside(steps: list[StepItem], pauses: list[OpenPause]) -> list[StepItem]:
    """The rows with a row for each pause inside a child run (``research > retrieve``, waiting: a decision
    on it is a decision by its path), after the rows of the step that started the child."""
    rows = list(steps)
    for pause in pauses:
        rec = pause.record
        head = parse_unit(path_head(pause.path))[0]
        at = max((i for i, item in enumerate(rows) if item.step_id == head and not item.inside), default=len(rows) - 1)
        at = max([at, *(i for i, item in enumerate(rows) if item.inside and item.unit.startswith(head))])
        rows.insert(at + 1, StepItem(step_id=rec.step_id, step_type=rec.step_type, agent=rec.agent, status=rec.status,
                                     attempt=rec.attempt, waiting=True, record=rec, gate_record=rec, attempts=[rec],
                                     inputs=rec.inputs, unit=pause.path, child_run=rec.run_id))
    return rows


def instance_rows(items: list[StepItem]) -> list[StepItem]:
    """A mapped step's instance rows: all of them up to :data:`INSTANCES_SHOWN`, else a summary row
    (``summarize[0..49]``, the count of each state) followed by the instances that wait or failed."""
    if len({item.index for item in items}) <= INSTANCES_SHOWN:  # a loop's iterations (at most 100) all show
        return items
    counts: dict[str, int] = {}
    for item in items:
        counts[item.status] = counts.get(item.status, 0) + 1
    first, top = items[0], max(item.index or 0 for item in items)
    status = "failed" if counts.get("failed") else "gate_failed" if counts.get("gate_failed") else \
        "running" if counts.get("running") or counts.get("pending") else "succeeded"
    summary = StepItem(step_id=first.step_id, step_type=first.step_type, agent=first.agent, status=status,
                       attempt=max(item.attempt for item in items), waiting=False,
                       unit=f"{first.step_id}[0..{top}]",
                       summary=f"{len(items)} {'records' if any(i.iteration for i in items) else 'instances'}: "
                       + ", ".join(f"{n} {st}" for st, n in sorted(counts.items())))
    return [summary, *(item for item in items if item.waiting or item.status in ("failed", "gate_failed"))]


def _consumed_unit(consumed: dict[str, Any], by_id: dict[int, StepRecordView]) -> str:
    """The unit a consumed link points at (an instance's record names ``summarize[3]``)."""
    source = by_id.get(consumed.get("record_id"))  # type: ignore[arg-type]
    return source.unit if source is not None else str(consumed["step_id"])


def _plan(definition: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Topological step order and each step's declared fields (plus ``_deps``) from a stored definition."""
    from orchestrator.spec.graph import topological_order
    from orchestrator.spec.model import WorkflowSpec

    declared = {s["id"]: dict(s) for s in definition.get("steps", []) if isinstance(s, dict) and "id" in s}
    try:
        spec = WorkflowSpec.model_validate(definition)
    except ValueError:  # a definition this version cannot parse: keep declaration order
        return list(declared), declared
    for step in spec.steps:
        declared[step.id]["_deps"] = step.step_dependencies()
    return topological_order(spec), declared


def _resolved_inputs(inputs: dict[str, Any] | None, by_id: dict[int, StepRecordView]) -> dict[str, Any] | None:
    """Replace the stored ``{"$record": id, "field": f}`` pointers by the values the step received."""
    if inputs is None:
        return None
    out = {}
    for name, value in inputs.items():
        if isinstance(value, dict) and set(value) <= {"$record", "field"} and value.get("$record") in by_id:
            resolved = by_id[value["$record"]].output
            for part in (value.get("field") or "").split(".") if value.get("field") else []:
                if isinstance(resolved, dict) and part in resolved:
                    resolved = resolved[part]
                elif isinstance(resolved, list) and part.isdigit() and int(part) < len(resolved):
                    resolved = resolved[int(part)]
                else:
                    resolved = value
                    break
            out[name] = resolved
        else:
            out[name] = value
    return out
