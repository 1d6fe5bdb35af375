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
    from orchestrator.store.triage import RunPage

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


PAGE_SIZE = 200
"""Runs read at first, and how many more each time the cursor reaches the end of the list."""


@dataclass(frozen=True)
class RunsPage:
    """The runs the screen shows (the first ``limit`` the filter keeps, paused ones first) and what the whole
    store holds: the header counts every run, not the rows read."""

    rows: list[RunRow]
    total: int
    """Every run in the store (not replays)."""
    paused: int
    """Every paused run in the store."""
    matching: int
    """The runs the filter keeps (``total`` without a filter)."""

    @property
    def more(self) -> bool:
        """Whether the filter keeps runs beyond the rows read."""
        return len(self.rows) < self.matching


def load_runs(store: Store, *, status: str | None = None, workflow: str = "", limit: int = PAGE_SIZE) -> RunsPage:
    """The first ``limit`` runs (not replays) in ``status`` (None: any) whose workflow name contains
    ``workflow`` (case-blind), paused ones first, then newest first, with what ``orchestrator runs`` shows of
    each (outcome, waiting steps and gate reason, blamed step); filtered and counted by the store, so a run
    beyond the first page is found by the filter and counted in the header.

    A few page and count queries whatever the number of runs: paused runs first, then, when fewer than
    ``limit`` are paused, the newest runs of any status with the paused ones dropped (at most as many as
    were just read, so the rest are the newest runs that are not paused).
    """
    from dataclasses import replace

    from orchestrator.engine.documents import with_child_pauses
    from orchestrator.service.listing import run_query

    def page(of_status: str | None, size: int, part: str | None) -> RunPage:
        return store.triage_runs(replace(run_query(status=of_status, limit=size), workflow_part=part))

    part = workflow.strip() or None
    if status is not None:
        chosen = page(status, limit, part)
        listed, matching, paused_matching = chosen.rows, chosen.total, None
    else:
        paused_page = page("paused", limit, part)
        listed, matching, paused_matching = list(paused_page.rows), paused_page.total, paused_page.total
        if len(listed) < limit:
            newest = page(None, limit, part)
            # a run read as paused may have moved on by the second read: listed once, where it was read first
            seen = {t.run.run_id for t in listed}
            listed += [t for t in newest.rows
                       if t.run.status != "paused" and t.run.run_id not in seen][: limit - len(listed)]
            matching = newest.total
        else:
            matching = page(None, 0, part).total
    if part is None and paused_matching is not None:  # no filter: the page's counts are the store's
        total, paused = matching, paused_matching
    else:
        total, paused = page(None, 0, None).total, page("paused", 0, None).total
    with_child_pauses(store, listed)  # a parent paused by a child waits at the paths into it, as in `runs`
    rows = []
    for t in listed:
        verdict = {True: " correct", False: " incorrect"}.get(t.outcome_correct, "")  # type: ignore[arg-type]
        outcome = "" if t.outcome_value is None else f"{t.outcome_value:.2f}{verdict}"
        rows.append(RunRow(t.run.run_id, t.run.workflow, t.run.status, tuple(t.waiting_steps), t.run.created_at,
                           t.run.updated_at, outcome=outcome, correct=t.outcome_correct,
                           gate_reason=t.gate_reason or "", blamed=t.blamed_step or ""))
    return RunsPage(rows, total=total, paused=paused, matching=matching)


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
    fingerprint: Fingerprint = ()
    """:func:`run_fingerprint` as it was read before the rest: the timer re-reads the run when it moved."""

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


Fingerprint = tuple[Any, ...]
"""What changes whenever a settled run's screen would: see :func:`run_fingerprint`."""


def run_fingerprint(store: Store, run_id: str) -> tuple[RunView, Fingerprint]:
    """The run, and a value that changes when anything its screen shows may have changed while it is not
    running: its status and last change (a decision moves both, in this run or, continuing the tree, in
    it and its children), its child runs' and the number of its outcomes. Three small reads, where the whole
    run is every record of a 2 000-item map: the timer's refresh reads the whole run only when this moved.
    A running run writes records without moving it, so a running run is read whole every time."""
    run = store.get_run(run_id)
    kids = tuple((c.run_id, c.status, c.updated_at) for c in store.child_runs(run_id))
    return run, (run.status, run.updated_at, len(store.outcomes(run_id)), kids)


def load_run_detail(store: Store, run_id: str) -> RunDetail:
    from orchestrator.attribution.choice import explaining_record
    from orchestrator.engine.documents import call_totals
    from orchestrator.engine.tree import child_pauses, children
    from orchestrator.service.review import waiting_records

    run, fingerprint = run_fingerprint(store, run_id)
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
                     model_usage=call_totals(store.model_calls([run_id])), fingerprint=fingerprint)


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
