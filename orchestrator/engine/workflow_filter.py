"""The ``--workflow NAME`` filter of the read commands (``runs``, ``stats``, ``report``), checked the same
way by each: a name that no stored run has is a typo far more often than a question, so it is an
InputError naming the workflows that have runs, never an empty answer that reads like "0 runs"."""

from __future__ import annotations

from orchestrator.core.errors import InputError
from orchestrator.store import Store
from orchestrator.store.analytics import PRODUCTION_KINDS


def workflows_with_runs(store: Store) -> list[str]:
    """The names of the workflows with at least one original run, started alone or as a child run (replays and
    forks aside), sorted."""
    return sorted({c.workflow for c in store.run_counts() if c.kind in PRODUCTION_KINDS})


def check_workflow_filter(store: Store, workflow: str | None) -> list[str]:
    """The workflows with runs; an InputError (exit 2) naming them when ``workflow`` is not among them."""
    names = workflows_with_runs(store)
    if workflow is not None and workflow not in names:
        known = f"workflows with runs: {names}" if names else "no runs are stored yet"
        raise InputError(f"no runs of workflow {workflow!r} are stored; {known}")
    return names
