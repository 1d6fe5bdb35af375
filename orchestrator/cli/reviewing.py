"""Review decisions without the TUI (approve, retry, reject, edit) and the TUI itself (review)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.common import (
    CommentOption,
    ConcurrencyOption,
    DbOption,
    JsonOption,
    ReviewerOption,
    StepOption,
    guarded,
    open_store,
    out,
    read_json_file,
)
from orchestrator.cli.running import Progress, report_result
from orchestrator.threads import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from orchestrator.store import Store

def _continue_after(store: Store, decision: Any, as_json: bool, max_concurrency: int) -> None:
    from orchestrator.runner import continue_run
    from orchestrator.runstate import RunResult

    out.print(f"{decision.decision} recorded for step {decision.step_id!r} of run {decision.run_id}",
              highlight=False)
    if not decision.continue_run:
        report_result(store, RunResult(decision.run_id, store.get_run(decision.run_id).status), as_json)
    progress = Progress(enabled=not as_json)
    with progress:
        result = continue_run(store, decision.run_id, max_concurrency=max_concurrency, on_event=progress)
    report_result(store, result, as_json)


@guarded
def approve(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
            as_json: JsonOption = False,
            max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Accept the paused step's output as it is and continue the run."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.approve(store, run_id, step=step, reviewer=reviewer, comment=comment),
                    as_json, max_concurrency)


@guarded
def retry(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
          as_json: JsonOption = False,
            max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Run the paused step again (it sees the failed gates as ctx.gate_feedback) and continue."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.retry(store, run_id, step=step, reviewer=reviewer, comment=comment),
                    as_json, max_concurrency)


@guarded
def reject(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
           as_json: JsonOption = False, db: DbOption = None) -> None:
    """End the paused run as rejected (exit 1)."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.reject(store, run_id, step=step, reviewer=reviewer, comment=comment), as_json, 1)


@guarded
def edit(run_id: str,
         output: Annotated[Path, typer.Option("--output", help="JSON file with the replacement output.")],
         step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
         force: Annotated[bool, typer.Option("--force", help="Accept an output that fails the step's gates; "
                                                         "the override is recorded.")] = False,
         as_json: JsonOption = False,
            max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Replace the paused step's output (it must pass the step's gates) and continue."""
    from orchestrator import review

    value = read_json_file(output, "--output")
    store = open_store(db)
    _continue_after(store, review.edit(store, run_id, value, step=step, reviewer=reviewer, comment=comment,
                                       force=force), as_json, max_concurrency)


@guarded
def review(reviewer: ReviewerOption = None, db: DbOption = None) -> None:
    """Open the terminal UI over paused runs."""
    from tui.app import make_app

    store = open_store(db)
    make_app(store, reviewer=reviewer).run()


