"""Deterministic paused runs for the review TUI's tests and snapshot app.

Runs are made by executing the fixture workflows (so every row is one the executor really
writes), under a stepping clock and sequential run ids so two seedings give identical files.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from orchestrator.bind.loader import load_workflow
from orchestrator.service import review
from orchestrator.service.runner import continue_run, start_run
from orchestrator.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
DEMO = FIXTURES / "review_demo.yaml"
MAP = Path(__file__).parents[1] / "fixtures" / "flow" / "map.yaml"
"""retrieve -> summarize (for_each, max_words 5 per instance: document 3 is too long) -> combine."""
TRIAGE = FIXTURES / "triage_demo.yaml"
TREE = Path(__file__).parents[1] / "fixtures" / "flow" / "tree_review.yaml"
"""plan -> research (a child run of tree_research.yaml: retrieve finds 1 item, its gate wants 2) -> write."""

EPOCH = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the seeded rows' clock starts here."""
NOW = EPOCH + 2 * 3600
"""The frozen "now" of the snapshot app: seeded runs are about two hours old."""


class SteppingClock:
    """A stand-in for the ``time`` module whose ``time()`` advances a fixed step per call."""

    def __init__(self, start: float, step: float) -> None:
        self._ticks = itertools.count()
        self.start = start
        self.step = step

    def time(self) -> float:
        return self.start + next(self._ticks) * self.step

    def __getattr__(self, name: str) -> Any:  # sleep, monotonic, perf_counter: the real ones
        return getattr(time, name)


@contextmanager
def frozen(start: float = EPOCH, step: float = 0.0, first_id: int = 1) -> Iterator[None]:
    """Timestamps from a stepping clock and run ids ``r0001``, ``r0002``, ... while seeding.

    The default step is 0 (every timestamp is ``start``), so the seeded rows do not depend on how
    many times the executor happens to read the clock.
    """
    clock = SteppingClock(start, step)
    ids = (f"r{n:04d}" for n in itertools.count(first_id))
    def next_id() -> str:
        return next(ids)

    with mock.patch("orchestrator.store.sql.time", clock), mock.patch("orchestrator.store.sqlite.time", clock), \
            mock.patch("orchestrator.store.rows.time", clock), mock.patch("orchestrator.engine.attempt.time", clock), \
            mock.patch("orchestrator.service.review.time", clock), \
            mock.patch("orchestrator.store.sql.new_run_id", next_id), \
            mock.patch("orchestrator.store.sqlite.new_run_id", next_id):
        yield


def start(store: Store, path: Path, inputs: dict[str, Any] | None = None) -> str:
    return start_run(store, load_workflow(path), inputs or {}).run_id


@dataclass(frozen=True)
class Seeded:
    """The run ids of :func:`seed_demo`, by what state each is in."""

    paused_twice: str
    """review-demo paused at ``score`` (0.35) after alice's retry of a first pause (0.1)."""
    succeeded: str
    """review-demo that passed its gates (quality 0.9)."""
    triage_paused: str
    """triage-demo paused at ``fetch`` (min_items wants 3 documents, got 2)."""
    paused_retryable: str
    """review-demo paused at ``score`` (0.3); one retry makes it pass (0.55)."""


def seed_demo(store: Store) -> Seeded:
    with frozen():
        paused_twice = start(store, DEMO, {"quality": 0.1})
        review.retry(store, paused_twice, reviewer="alice", comment="summary looks thin, try again")
        continue_run(store, paused_twice)
        succeeded = start(store, DEMO, {"quality": 0.9, "topic": "ear defenders"})
        triage = start(store, TRIAGE)
        retryable = start(store, DEMO, {"quality": 0.3, "topic": "nitrile gloves"})
    return Seeded(paused_twice, succeeded, triage, retryable)


def seed_maps(store: Store, first_id: int) -> tuple[str, str]:
    """Two map runs paused at ``summarize[3]``: one over 6 documents (r{first_id}), one over 25 (collapsed
    on the run screen, as in ``show``)."""
    with frozen(first_id=first_id):
        return start(store, MAP, {"count": 6}), start(store, MAP, {"count": 25})


def seed_tree(store: Store, first_id: int) -> tuple[str, str]:
    """A parent run paused at ``research > retrieve`` (r{first_id}) and its child run (the next id)."""
    with frozen(first_id=first_id):
        parent = start(store, TREE)
    return parent, store.child_runs(parent)[0].run_id
