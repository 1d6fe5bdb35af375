"""Runs as a reviewer triages them: one page of runs with their outcome, pause and blame.

:meth:`~orchestrator.store.base.Store.triage_runs` answers ``orchestrator runs``, the TUI's runs
screen and ``Orchestrator.list_runs`` with one :class:`RunPage`, computed with joins and
subqueries (a page costs the same few queries whatever the number of runs). The rules
(``tests/store/`` holds every store to them):

- Runs are listed newest first (by creation order); ``total`` counts every run the filters keep.
- **A run's outcome** is its latest outcome record (value and ``correct``); ``outcome="correct"``
  keeps runs whose latest outcome has ``correct`` true, ``"incorrect"`` those with it false.
- **A run's blamed step** is the ``blamed_step`` of its explaining attribution record
  (:func:`~orchestrator.store.analytics.attribution_rank`: the most informative method, newest within it).
- **The waiting step** of a paused run is its earliest-started live ``gate_failed`` record that no
  review answered (as :func:`orchestrator.service.review.waiting_records` orders them); ``gate_reason`` is
  the reason of that record's first failing gate.
- ``workflow`` keeps runs of that workflow name exactly; ``workflow_part`` those whose name contains the
  text, ASCII letters compared case-blind (``_`` and ``%`` are plain characters there, not wildcards).
- ``since`` keeps runs created at or after it; ``kind`` is ``run``, ``replay`` or
  ``counterfactual`` (None: every kind); ``status`` works as in ``list_runs`` (``interrupted``
  included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.spec.records import RunView

OutcomeFilter = Literal["correct", "incorrect"]


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Which runs to list, and which page of them."""

    status: str | None = None
    workflow: str | None = None
    workflow_part: str | None = None
    """Only runs whose workflow name contains this text, case ignored (ASCII letters; the review app's filter)."""
    kind: str | None = "run"
    outcome: OutcomeFilter | None = None
    blamed: str | None = None
    """Only runs whose explaining attribution record blamed this step."""
    since: float | None = None
    """Only runs created at or after this time (epoch seconds)."""
    limit: int = 50
    offset: int = 0


@dataclass(slots=True)
class TriageRow:
    """One listed run and what a reviewer triaging it wants to see."""

    run: RunView
    outcome_value: float | None = None
    outcome_correct: bool | None = None
    blamed_step: str | None = None
    waiting_steps: list[str] = field(default_factory=list)
    """The steps a paused run waits at, in the order they started."""
    gate_reason: str | None = None
    """Why the first waiting step's gate failed."""

    @property
    def waiting_step(self) -> str | None:
        """The first step the run waits at (None unless paused)."""
        return self.waiting_steps[0] if self.waiting_steps else None

    def to_json(self) -> dict[str, Any]:
        """The ``runs --json`` keys of the run: the summary keys plus the triage ones."""
        return {**self.run.summary_json(), "outcome": self.outcome_value, "correct": self.outcome_correct,
                "blamed_step": self.blamed_step, "waiting_step": self.waiting_step,
                "waiting_steps": list(self.waiting_steps), "gate_reason": self.gate_reason}


@dataclass(slots=True)
class RunPage:
    """One page of listed runs and how many runs the filters keep in all."""

    rows: list[TriageRow]
    total: int
    offset: int
    limit: int

    @property
    def more(self) -> bool:
        """Whether runs after this page exist."""
        return self.offset + len(self.rows) < self.total

    def range_note(self) -> str:
        """``showing 1-50 of 1234; --offset 50 for more`` (what a reader needs when the list is cut)."""
        if not self.rows:
            return f"no runs on this page (offset {self.offset}) of {self.total}"
        first, last = self.offset + 1, self.offset + len(self.rows)
        note = f"showing {first}-{last} of {self.total}"
        return note + (f"; --offset {last} for more" if self.more else "")
