"""Which runs to list: the filters of ``orchestrator runs``, the TUI's runs screen and ``Orchestrator.list_runs``.

One function turns what a face was given (strings from a command line, or typed values from
Python) into a :class:`~orchestrator.store.triage.RunQuery`, so every face accepts and refuses
the same values with the same words.
"""

from __future__ import annotations

from datetime import datetime

from orchestrator.attribution.stats import parse_since
from orchestrator.core.errors import InputError
from orchestrator.service.names import check_names
from orchestrator.spec.model import RunStatus
from orchestrator.store.triage import RunQuery

KINDS = {"original": "run", "replay": "replay", "counterfactual": "counterfactual", "child": "child",
         "experiment": "experiment"}
"""``--kind`` names -> the stored run kind (an original run is stored as kind ``run``; ``child``: the child runs
of ``workflow:`` steps, which the default listing leaves out: their parent lists where they wait; ``experiment``:
the runs of experiments, one per dataset example)."""

DEFAULT_LIMIT = 50


MAX_LIMIT = 1_000_000
"""The most runs one page lists."""
MAX_OFFSET = 1_000_000_000
"""The most runs a page skips."""


def run_query(*, status: str | None = None, workflow: str | None = None, outcome: str | None = None,
              blamed: str | None = None, since: str | float | datetime | None = None,
              kind: str | None = "original", limit: int = DEFAULT_LIMIT, offset: int = 0) -> RunQuery:
    """The store query of the listing filters; a bad value is an InputError naming the option (exit 2).

    ``since``: epoch seconds, a datetime, an ISO date/time, or a duration back from now (``2h``,
    ``7d``, ``2w``). ``kind``: ``original``, ``replay``, ``counterfactual`` or ``child``; None lists every kind.
    """
    check_names(workflow=workflow, blamed_step=blamed)
    valid = RunStatus.__args__  # type: ignore[attr-defined]
    if status is not None and status not in valid:
        raise InputError(f"--status {status!r} is not a run status; choose from {list(valid)}")
    if outcome not in (None, "correct", "incorrect"):
        raise InputError(f"--outcome {outcome!r} must be correct or incorrect")
    if kind is not None and kind not in KINDS:
        raise InputError(f"--kind {kind!r} must be one of {list(KINDS)}")
    if limit < 0 or offset < 0:
        raise InputError("--limit and --offset must not be negative")
    if limit > MAX_LIMIT or offset > MAX_OFFSET:  # a database integer holds 64 bits; a page this big is a typo
        raise InputError(f"--limit must be at most {MAX_LIMIT} and --offset at most {MAX_OFFSET}")
    start: float | None
    if since is None or isinstance(since, float | int):
        start = since
    elif isinstance(since, datetime):
        start = since.timestamp()
    else:
        start = parse_since(since)
    return RunQuery(status=status, workflow=workflow, kind=KINDS[kind] if kind else None,
                    outcome="correct" if outcome == "correct" else ("incorrect" if outcome else None),
                    blamed=blamed, since=start, limit=limit, offset=offset)
