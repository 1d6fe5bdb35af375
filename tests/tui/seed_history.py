"""Three weeks of labelled runs of a small gated workflow: data for the dashboard and trace view.

Every row is one the executor, the review functions and ``label_run`` really write, under the
frozen clock and run ids of seed.py, so two seedings give identical files.

==========  ============================================================  =================
week        runs (fetch gate wants 3 documents, score gate wants 0.5)     pass rate
==========  ============================================================  =================
2025-W51    3 clean runs                                                  fetch 100%, score 100%
2025-W52    2 runs whose score fails, approved, labelled incorrect;       fetch 100%, score 33%
            1 clean run
2026-W01    fetch fails: approved + incorrect, approved + unlabelled,     fetch 40%, score 100%
            still paused; 1 clean run labelled incorrect (nothing to
            blame), 1 clean run labelled correct
==========  ============================================================  =================

So four incorrect outcomes: score is blamed for 50%, fetch for 25%, and 25% are unattributed;
fetch's pass rate fell 60 points in the latest week (an alert), score's rose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.bind.loader import load_workflow
from orchestrator.service import review
from orchestrator.service.labels import label_run
from orchestrator.service.runner import continue_run, start_run
from orchestrator.store import Store
from tests.tui.seed import EPOCH, FIXTURES, frozen

DASHBOARD = FIXTURES / "dashboard_demo.yaml"
WORKFLOW = "dashboard-demo"
DAY = 86400.0
WEEKS = (EPOCH - 14 * DAY, EPOCH - 7 * DAY, EPOCH)
"""Thursdays of 2025-W51, 2025-W52 and 2026-W01 (the week of the snapshot app's "now")."""


@dataclass(frozen=True)
class History:
    """Run ids of :func:`seed_history`, by what the trace view has to say about them."""

    score_blamed: str
    """W52: score 0.3 failed its gate, bob approved it, carol labelled the run incorrect."""
    fetch_blamed: str
    """W01: fetch found 2 documents, bob approved, carol labelled it incorrect."""
    unattributed: str
    """W01: every gate passed, yet carol labelled it incorrect; the trace blames no step."""
    unlabelled: str
    """W01: fetch failed and was approved; the run succeeded and nobody labelled it."""
    paused: str
    """W01: waiting for review at fetch; no outcome to explain yet."""


def seed_history(store: Store, *, first_id: int = 1) -> History:
    spec = load_workflow(DASHBOARD)
    ids = iter(range(first_id, first_id + 1000))

    def run(week: int, n: int, *, found: int = 3, quality: float = 0.9, approve: bool = False,
            label: bool | None = None) -> str:
        with frozen(start=WEEKS[week] + n * 1200, first_id=next(ids)):
            inputs: dict[str, Any] = {"found": found, "quality": quality}
            run_id = start_run(store, spec, inputs).run_id
            if approve:
                review.approve(store, run_id, reviewer="bob", comment="close enough")
                continue_run(store, run_id)
            if label is not None:
                label_run(store, run_id, correct=label, reviewer="carol",
                          reason=None if label else "recommended the wrong supplier")
        return run_id

    for n in range(3):
        run(0, n)
    score_blamed = run(1, 0, quality=0.3, approve=True, label=False)
    run(1, 1, quality=0.3, approve=True, label=False)
    run(1, 2)
    fetch_blamed = run(2, 0, found=2, approve=True, label=False)
    unlabelled = run(2, 1, found=2, approve=True)
    unattributed = run(2, 2, label=False)
    run(2, 3, label=True)
    paused = run(2, 4, found=2)
    return History(score_blamed, fetch_blamed, unattributed, unlabelled, paused)
