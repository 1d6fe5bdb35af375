"""Runs as a tree: a parent run and the child runs its ``workflow:`` steps started, read from the store.

A path names a unit anywhere below a run: ``research > retrieve`` is unit ``retrieve`` of the child run
that the parent's unit ``research`` started (``per_ticket[3] > classify`` for an instance's child, and
deeper paths through grandchildren). A unit's child run is its latest one (a unit that ran again after a
fix started a new child; the older ones are history). Everything that decides, shows or explains a run
through its children reads them here: decisions and fixes, ``show``, ``runs``, the review app, and
attribution (:func:`children`, :func:`resolve_path` and :func:`record_at` are its hooks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.core.errors import NotFoundError
from orchestrator.engine.children import CHILD_KIND
from orchestrator.spec.model import StepSpec, WorkflowSpec
from orchestrator.spec.records import RunView, StepRecordView, join_path, live_records, split_path
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
    found: dict[str, RunView] = {}
    for run in store.child_runs(run_id):
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


def open_pauses(store: Store, run_id: str) -> list[OpenPause]:
    """The run's waiting records no decision answered, then those of its paused child runs (and theirs),
    each named by its path from this run; ordered as the runs' steps started."""
    return _pauses(store, run_id, live_records(store.step_records(run_id)), own=True, depth=0)


def child_pauses(store: Store, run_id: str, live: dict[str, StepRecordView] | None = None) -> list[OpenPause]:
    """The pauses inside the run's child runs (not its own), by their paths from this run. ``live``: the
    run's live records, when the caller has them."""
    if live is None:
        live = live_records(store.step_records(run_id))
    return _pauses(store, run_id, live, own=False, depth=0)


def waiting_in(store: Store, run_id: str, live: dict[str, StepRecordView] | None = None) -> list[StepRecordView]:
    """The run's own waiting records no decision answered (not those inside its child runs), in the order their
    steps started, instances by index."""
    if live is None:
        live = live_records(store.step_records(run_id))
    decided = {r.record_id for r in store.reviews(run_id)}
    waiting = [r for r in live.values() if r.status == "gate_failed" and r.id not in decided]
    began: dict[str, float] = {}
    for r in waiting:
        began[r.step_id] = min(began.get(r.step_id, r.started_at), r.started_at)
    waiting.sort(key=lambda r: (began[r.step_id], r.step_id, -1 if r.index is None else r.index))
    return waiting


def _pauses(store: Store, run_id: str, live: dict[str, StepRecordView], *, own: bool, depth: int) -> list[OpenPause]:
    found = [OpenPause(r.unit, r) for r in waiting_in(store, run_id, live)] if own else []
    if depth >= MAX_DEPTH:
        return found
    for unit, child in children(store, run_id).items():
        mine = live.get(unit)
        if child.status != "paused" or (mine is not None and mine.status != "failed"):
            continue  # a unit with a live result is past its child run (a failed one runs it again)
        inner_live = live_records(store.step_records(child.run_id))
        found.extend(OpenPause(join_path(unit, inner.path), inner.record)
                     for inner in _pauses(store, child.run_id, inner_live, own=True, depth=depth + 1))
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

    def step(self, record: StepRecordView) -> StepSpec:
        """The spec of the step a record belongs to, in the workflow version its run was started from."""
        if record.run_id not in self.workflow_of:
            self.workflow_of[record.run_id] = self.store.get_run(record.run_id).workflow_id
        workflow_id = self.workflow_of[record.run_id]
        if workflow_id not in self.specs:
            self.specs[workflow_id] = WorkflowSpec.model_validate(self.store.workflow_definition(workflow_id)[0])
        return self.specs[workflow_id].step(record.step_id)

    def deadline(self, record: StepRecordView) -> float | None:
        """When a waiting record times out (its end plus its step's ``review_timeout``); None without one."""
        timeout = self.step(record).review_timeout
        return None if timeout is None else record.ended_at + timeout


def child_pause_deadline(store: Store, run_id: str, live: dict[str, StepRecordView] | None = None) -> float | None:
    """The earliest review deadline among the pauses inside the run's child runs (and theirs), by each
    child step's ``review_timeout``; None when none of them has one. Stored on the root with its own, so the
    worker that polls due reviews sees a pause deep in a tree time out."""
    timeouts = StepTimeouts(store)
    deadlines = [d for pause in child_pauses(store, run_id, live) if (d := timeouts.deadline(pause.record)) is not None]
    return min(deadlines, default=None)
