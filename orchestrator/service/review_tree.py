"""Decisions on pauses inside child runs: which run a decision lands on, and who executes the tree after it.

A pause inside a child is answered once, whether the reviewer names it from the parent
(``approve PARENT --step 'research > retrieve'``, or no ``--step`` when it is the tree's only pause) or
from the child (``approve CHILD``): the decision is stored on the child run that holds the waiting
record, so the unique constraint on a record's review referees racing reviewers wherever they came from.

One executor holds a whole tree (a child is executed by its root's executor), so a continuing decision
on a child first takes the root's lease with the decision's token, then decides under that token: the
root's continuation takes the child over with it (the same token) and continues it from the decided
step. While another live process holds the root, the decision waits for it as a decision on a held run
does (a continuation of another pause pauses again within moments), then says why it was refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from orchestrator.core.errors import LeaseHeldError, ReviewError
from orchestrator.engine.executor import release_lease
from orchestrator.engine.leases.holder import executed_by, holder_is_gone
from orchestrator.engine.tree import is_child, open_pauses, resolve_path, root_of
from orchestrator.spec.records import PATH_SEPARATOR, join_path, split_path
from orchestrator.store import Lease, Store

TREE_STATUSES = ("paused", "failed", "running")
"""States of a root a decision inside its tree may take it from (``running`` once its lease lapsed, as a
resume would)."""

HOLD_WAIT_SECONDS = 30.0
"""How long a decision inside a tree waits while another live process executes the tree."""


@dataclass(frozen=True)
class Target:
    """Where a decision lands: the run that holds the unit, and the unit there."""

    asked: str
    """The run the reviewer named."""
    run_id: str
    """The run holding ``step`` (the asked run itself, or a child run below it)."""
    step: str | None
    """The unit in ``run_id`` (None: the run's only waiting step)."""
    path: str | None
    """The unit as named from the asked run (``research > retrieve``); None when none was named."""

    @property
    def nested(self) -> bool:
        return self.run_id != self.asked


def locate(store: Store, run_id: str, step: str | None) -> Target:
    """Resolve ``--step`` (a unit or a path through child runs) from the asked run. With no step and no
    waiting record of its own, a run whose tree holds exactly one pause takes that one; several are listed
    (ReviewError, exit 2)."""
    if step is not None and len(split_path(step)) > 1:
        located = resolve_path(store, run_id, step)
        return Target(run_id, located.run_id, located.unit, join_path(*split_path(step)))
    pauses = open_pauses(store, run_id)
    nested = [p for p in pauses if PATH_SEPARATOR in p.path]
    if not nested:
        return Target(run_id, run_id, step, step)
    if step is None:
        if len(pauses) > 1:
            raise ReviewError(f"run {run_id} has {len(pauses)} steps waiting: {[p.path for p in pauses]}; "
                              "choose one with --step (a path such as --step 'research > retrieve' names a step "
                              "inside a child run)")
        return locate(store, run_id, pauses[0].path)
    inside = [p.path for p in nested if split_path(p.path)[0] == step]
    if inside and not any(p.path == step for p in pauses) and not _has_live_record(store, run_id, step):
        raise ReviewError(f"step {step!r} of run {run_id} waits inside its child run; name the step waiting there: "
                          f"{inside} (e.g. --step '{inside[0]}')")
    return Target(run_id, run_id, step, step)


def _has_live_record(store: Store, run_id: str, unit: str) -> bool:
    from orchestrator.spec.records import live_records

    return unit in live_records(store.step_records(run_id))


def tree_root(store: Store, run_id: str) -> str | None:
    """The root a decision on ``run_id`` must hold to continue it, or None when the run is no child."""
    run = store.get_run(run_id)
    return root_of(store, run_id).run_id if is_child(run) else None


@contextmanager
def holding_root(store: Store, run_id: str, lease: Lease | None, decided: Callable[[], ReviewError | None],
                 wait: float = HOLD_WAIT_SECONDS) -> Iterator[Lease | None]:
    """For a decision on child run ``run_id``: hold its root's lease under ``lease``'s token while the
    decision is stored, and keep it for the continuation when the decision succeeds; hand it back (the
    root in its former state) when the decision is refused. Yields the lease the decision claims on
    ``run_id`` (same token). A run that is no child, or no lease, changes nothing.

    ``decided()``: the refusal to raise when another reviewer decided the same pause meanwhile."""
    root_id = tree_root(store, run_id) if lease is not None else None
    if lease is None or root_id is None:
        yield lease
        return
    root_lease = replace(lease, run_id=root_id, issued_at=time.monotonic())
    before = _claim_root(store, root_lease, decided, wait)
    try:
        yield replace(lease, run_id=run_id)
    except BaseException:
        release_lease(store, root_lease)
        store.set_run_status(root_id, before, expect=("running",))
        raise


def _claim_root(store: Store, lease: Lease, decided: Callable[[], ReviewError | None], wait: float) -> str:
    """Take the root's lease; the root's status before, to hand it back in. Waits while another live
    process holds it; LeaseHeldError naming that process once the wait is over."""
    deadline = time.monotonic() + wait
    delay = 0.02
    while True:
        before = store.get_run(lease.run_id)
        if store.acquire_lease(replace(lease, issued_at=time.monotonic()), statuses=TREE_STATUSES):
            return "running" if before.status == "interrupted" else before.status
        refusal = decided()
        if refusal is not None:
            raise refusal
        run = store.get_run(lease.run_id)
        if run.status == "running" and run.owner and holder_is_gone(run.owner) \
                and store.expire_lease(lease.run_id, run.owner):
            continue
        if run.status not in ("running", "interrupted") or time.monotonic() >= deadline:
            if run.status in ("running", "interrupted"):
                raise LeaseHeldError(f"run {lease.run_id}, the root of the tree, is "
                                     f"{executed_by(run.owner, run.lease_expires_at)}; nothing was decided (decide "
                                     "once it pauses again)")
            raise ReviewError(f"run {lease.run_id}, the root of the tree, is {run.status}; nothing was decided")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
