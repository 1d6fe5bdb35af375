"""What the CLI says about fixing a pause at its cause: a critic's evidence, and superseded records.

A critic that checks step 2 against step 4 pauses on the critic, but the wrong output is usually
one of the verified steps. Approving or retrying the critic cannot help; editing or retrying the
wrong step can (``orchestrator edit RUN --step N``), so the message shows the evidence and the
commands. ``run``, ``resume``, the review commands and ``show`` print it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from orchestrator.cli.common import out

if TYPE_CHECKING:
    from orchestrator.store import Store

CELL_CHARS = 600
"""An output longer than this is cut in the table; ``show --json`` has it whole."""


def _cell(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def print_critic_fixes(store: Store, run_id: str) -> None:
    """For each waiting critic: its verdict, the verified outputs side by side, the fix commands."""
    from rich.table import Table

    from orchestrator.service.review import critic_pauses

    for pause in critic_pauses(store, run_id):
        names = [sid for sid, _ in pause.verified]
        out.print(f"  critic [yellow]{escape(pause.step_id)}[/] verified {escape(', '.join(names))}: "
                  f"{escape(pause.reason)}",
                  highlight=False, soft_wrap=True)
        if not pause.verified:
            continue
        table = Table(title=None, expand=False)
        for sid, rec in pause.verified:
            table.add_column(escape(f"{sid} ({rec.status if rec else 'no record'})"), overflow="fold")
        table.add_row(*(escape(_cell(rec.output)) if rec else "" for _, rec in pause.verified))
        out.print(table)
        fixable = [sid for sid, rec in pause.verified if rec is not None and rec.status == "succeeded"]
        if fixable:
            out.print("  fix the wrong step at its cause (its descendants are superseded and run again):",
                      highlight=False)
        for sid in fixable:
            out.print(escape(f"    orchestrator edit {run_id} --step {sid} --output FILE.json   "
                             f"or   orchestrator retry {run_id} --step {sid}"), highlight=False, soft_wrap=True)


def print_superseded(doc: dict[str, Any]) -> None:
    """``show``: the records a fix superseded (kept in ``attempts``), grouped by the review that did it."""
    by_review: dict[int, list[str]] = {}
    for attempt in doc["attempts"]:
        if attempt.get("superseded_by") is not None:
            by_review.setdefault(attempt["superseded_by"], []).append(
                f"{attempt['step_id']} (attempt {attempt['attempt']}, record {attempt['record_id']})")
    for review_id, records in by_review.items():
        out.print(escape(f"superseded by review {review_id}: {', '.join(records)}"), highlight=False, soft_wrap=True)
