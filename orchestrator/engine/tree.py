"""Runs as a tree: a parent run and the child runs its ``workflow:`` steps started, read from the store.

A path names a unit anywhere below a run: ``research > retrieve`` is unit ``retrieve`` of the child run
that the parent's unit ``research`` started (``per_ticket[3] > classify`` for an instance's child, and
deeper paths through grandchildren). A unit's child run is its latest one (a unit that ran again after a
fix started a new child; the older ones are history). Everything that decides, shows or explains a run
through its children reads them here: decisions and fixes, ``show``, ``runs``, the review app, and
attribution (:func:`children`, :func:`resolve_path` and :func:`record_at` are its hooks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.errors import NotFoundError
from orchestrator.spec.model import StepSpec, WorkflowSpec
from orchestrator.spec.records import (
    CHILD_KIND,
    ReviewView,
    RunView,
    StepRecordView,
    join_path,
    live_records,
    split_path,
)
from orchestrator.store import Store

MAX_DEPTH = 64
"""How deep a tree is walked: far beyond any real nesting (includes cannot form a cycle), a guard against a
corrupt ``parent_run_id`` loop."""


def is_child(run: RunView) -> bool:
    """Whether the run was started by a parent's ``workflow:`` step."""
    return run.kind == CHILD_KIND and run.parent_run_id is not None


def children(store: Store, run_id: str) -> dict[str, RunView]:
    """The run's child runs by the unit that started them (``research``, ``per_ticket[3]``), the latest of
    each unit, in the order they were started."""
    return latest_children(store.child_runs(run_id))


def latest_children(runs: Iterable[RunView]) -> dict[str, RunView]:
    """Of a run's child runs (oldest first), the latest of each unit, by unit, in the order they started."""
    found: dict[str, RunView] = {}
    for run in runs:
        if run.kind == CHILD_KIND and run.parent_step is not None:
            found.pop(run.parent_step, None)
            found[run.parent_step] = run
    return found


def ancestors(store: Store, run_id: str) -> list[RunView]:
    """The run's parent, its parent's parent, ... up to the root (empty for a run that is no child)."""
    chain: list[RunView] = []
    run = store.get_run(run_id)
    while is_child(run) and len(chain) < MAX_DEPTH:
        assert run.parent_run_id is not None
        run = store.get_run(run.parent_run_id)
        chain.append(run)
    return chain


def root_of(store: Store, run_id: str) -> RunView:
    """The run at the top of the run's tree (the run itself when it is no child)."""
    chain = ancestors(store, run_id)
    return chain[-1] if chain else store.get_run(run_id)


def path_from_root(store: Store, run_id: str) -> str:
    """Where a child run sits below its root: the units that started it (``per_ticket[3]``, or
    ``research > deep`` for a grandchild); empty for a root."""
    units: list[str] = []
    run = store.get_run(run_id)
    for parent in ancestors(store, run_id):
        units.insert(0, str(run.parent_step))
        run = parent
    return join_path(*units)


@dataclass(frozen=True)
class Located:
    """A path resolved: the run holding its last unit, and that unit."""

    run_id: str
    unit: str
    via: tuple[str, ...]
    """The child runs walked through, outermost first (empty for a unit of the run itself)."""


def resolve_path(store: Store, run_id: str, path: str) -> Located:
    """Walk ``research > retrieve`` down from the run: every unit but the last must have started a child
    run. NotFoundError naming the unit and the run when one did not."""
    units = split_path(path)
    current = run_id
    via: list[str] = []
    for unit in units[:-1]:
        child = children(store, current).get(unit)
        if child is None:
            started = sorted(children(store, current))
            hint = f"; its child runs start at {started}" if started else "; it started no child run"
            raise NotFoundError(f"step {unit!r} of run {current} started no child run, so {path!r} names nothing"
                                f"{hint}")
        current = child.run_id
        via.append(current)
    return Located(current, units[-1], tuple(via))


def record_at(store: Store, run_id: str, path: str) -> StepRecordView | None:
    """The live record a path names (``research > retrieve``: the child's live record of ``retrieve``), or
    None when that unit has none (not run yet, or superseded)."""
    located = resolve_path(store, run_id, path)
    return live_records(store.step_records(located.run_id)).get(located.unit)


@dataclass(frozen=True)
class OpenPause:
    """A pause waiting for a decision somewhere in a run's tree."""

    path: str
    """From the run asked about: ``research > retrieve`` (``retrieve`` itself for its own pause)."""
    record: StepRecordView
    """The waiting record, in the run that holds it."""
    workflow_id: int | None = None
    """The stored workflow version of the run holding the record (None for the run asked about: not read)."""


def open_pauses(store: Store, run_id: str) -> list[OpenPause]:
    """The run's waiting records no decision answered, then those of its paused child runs (and theirs),
    each named by its path from this run; ordered as the runs' steps started."""
    live = live_records(store.step_records(run_id))
    own = [OpenPause(r.unit, r) for r in waiting_in(live, store.reviews(run_id))]
    return own + _inside(store, {run_id: live}, depth=0)[run_id]


def child_pauses(store: Store, run_id: str, live: dict[str, StepRecordView] | None = None) -> list[OpenPause]:
    """The pauses inside the run's child runs (not its own), by their paths from this run. ``live``: the
    run's live records, when the caller has them."""
    if live is None:
        live = live_records(store.step_records(run_id))
    return _inside(store, {run_id: live}, depth=0)[run_id]


def child_pauses_of_runs(store: Store, run_ids: Sequence[str]) -> dict[str, list[OpenPause]]:
    """:func:`child_pauses` of each of these runs, read together: a few store calls per level of the trees
    whatever the number of runs (a page of 200 paused parents cost 200 reads of records one by one)."""
    if not run_ids:
        return {}
    records = store.step_records_of(list(run_ids))
    return _inside(store, {run_id: live_records(records.get(run_id, ())) for run_id in run_ids}, depth=0)


def pauses_of_runs(store: Store, runs: Sequence[RunView]) -> dict[str, list[OpenPause]]:
    """The open pauses of each of these runs (its own, then those inside its child runs), by run id, paths
    from each run. The runs are read together, one level of their trees at a time: a few store calls
    whatever the number of runs, where reading them one by one cost three calls per run."""
    return _pauses_of(store, runs, depth=0)


def waiting_of(store: Store, run_id: str) -> list[StepRecordView]:
    """The run's own waiting records no decision answered (not those inside its child runs)."""
    return waiting_in(live_records(store.step_records(run_id)), store.reviews(run_id))


def waiting_in(live: dict[str, StepRecordView], reviews: Iterable[ReviewView]) -> list[StepRecordView]:
    """A run's waiting records no decision answered, ordered as their steps started (instances by index)."""
    decided = {r.record_id for r in reviews}
    waiting = [r for r in live.values() if r.status == "gate_failed" and r.id not in decided]
    began: dict[str, float] = {}
    for r in waiting:
        began[r.step_id] = min(began.get(r.step_id, r.started_at), r.started_at)
    waiting.sort(key=lambda r: (began[r.step_id], r.step_id, -1 if r.index is None else r.index))
    return waiting


def _pauses_of(store: Store, runs: Sequence[RunView], depth: int) -> dict[str, list[OpenPause]]:
    """Each run's own open pauses, then those inside its child runs."""
    if not runs:
        return {}
    run_ids = [run.run_id for run in runs]
    records, reviews = store.step_records_of(run_ids), store.reviews_of(run_ids)
    lives = {run_id: live_records(records.get(run_id, ())) for run_id in run_ids}
    inside = _inside(store, lives, depth)
    return {run.run_id: [OpenPause(r.unit, r, run.workflow_id)
                         for r in waiting_in(lives[run.run_id], reviews.get(run.run_id, ()))] + inside[run.run_id]
            for run in runs}


def _inside(store: Store, lives: dict[str, dict[str, StepRecordView]], depth: int) -> dict[str, list[OpenPause]]:
    """The pauses inside the paused child runs of each run (given with its live records), by run id."""
    found: dict[str, list[OpenPause]] = {run_id: [] for run_id in lives}
    if depth >= MAX_DEPTH:
        return found
    below: list[tuple[str, str, RunView]] = []
    for run_id, runs in store.child_runs_of(list(lives)).items():
        for unit, child in latest_children(runs).items():
            mine = lives[run_id].get(unit)
            if child.status != "paused" or (mine is not None and mine.status != "failed"):
                continue  # a unit with a live result is past its child run (a failed one runs it again)
            below.append((run_id, unit, child))
    inner = _pauses_of(store, [child for _, _, child in below], depth + 1)
    for run_id, unit, child in below:
        found[run_id].extend(OpenPause(join_path(unit, p.path), p.record, p.workflow_id) for p in inner[child.run_id])
    return found


def child_summaries(store: Store, run_id: str) -> list[dict[str, Any]]:
    """``show --json``'s ``children``: each unit's latest child run as ``{"run_id", "step", "status",
    "workflow"}``, in the order they started."""
    return [{"run_id": child.run_id, "step": unit, "status": child.status, "workflow": child.workflow}
            for unit, child in children(store, run_id).items()]


class StepTimeouts:
    """The steps of each stored workflow version, read once, for their ``review_timeout``: a pause deep in a
    tree times out by the step of the child workflow it waits in, not by the root's."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.specs: dict[int, WorkflowSpec] = {}
        self.workflow_of: dict[str, int] = {}
        """Run id -> its stored workflow version."""

    def step(self, pause: OpenPause) -> StepSpec:
        """The spec of the step a pause waits at, in the workflow version its run was started from."""
        record = pause.record
        if pause.workflow_id is not None:
            self.workflow_of[record.run_id] = pause.workflow_id
        elif record.run_id not in self.workflow_of:
            self.workflow_of[record.run_id] = self.store.get_run(record.run_id).workflow_id
        workflow_id = self.workflow_of[record.run_id]
        if workflow_id not in self.specs:
            self.specs[workflow_id] = WorkflowSpec.model_validate(self.store.workflow_definition(workflow_id)[0])
        return self.specs[workflow_id].step(record.step_id)

    def deadline(self, pause: OpenPause) -> float | None:
        """When a pause times out (its record's end plus its step's ``review_timeout``); None without one."""
        timeout = self.step(pause).review_timeout
        return None if timeout is None else pause.record.ended_at + timeout


def child_pause_deadline(store: Store, run_id: str, live: dict[str, StepRecordView] | None = None) -> float | None:
    """The earliest review deadline among the pauses inside the run's child runs (and theirs), by each
    child step's ``review_timeout``; None when none of them has one. Stored on the root with its own, so the
    worker that polls due reviews sees a pause deep in a tree time out."""
    timeouts = StepTimeouts(store)
    deadlines = [d for pause in child_pauses(store, run_id, live) if (d := timeouts.deadline(pause)) is not None]
    return min(deadlines, default=None)
