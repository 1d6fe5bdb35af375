"""Review decisions without the TUI (approve, retry, reject, edit) and the TUI itself (review)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.cli.common import (
    CommentOption,
    ConcurrencyOption,
    DbOption,
    JsonOption,
    ReviewerOption,
    RunArgument,
    StepOption,
    err,
    guarded,
    open_store,
    out,
    read_json_file,
    resolve_run_id,
)
from orchestrator.cli.running import Progress, report_result, resumable_on_interrupt

if TYPE_CHECKING:
    from orchestrator.store import Lease, Store

FixStepOption = Annotated[str | None, typer.Option(
    "--step", help="The paused step (needed when several wait), or any completed step of a paused or failed run "
                   "to fix at the cause: its completed descendants are superseded and run again. A path such as "
                   "'research > retrieve' names a step inside a child run.")]
RerunSideEffectsOption = Annotated[bool, typer.Option(
    "--rerun-side-effects", help="Accept that fixing a completed step runs again descendants with side effects "
                                 "that already ran; the choice is recorded in the review.")]


def _lease(run_id: str) -> "Lease":
    """The lease a continuing decision claims in its own transaction, so the run cannot be taken between."""
    from orchestrator.engine.executor import new_lease

    return new_lease(run_id)


def decision_summary(decision: Any, forced: str = "") -> str:
    """The decision's first line: what was decided, and for a rejection how far it reached."""
    if decision.whole_run:
        said = f"run {decision.shown_run_id} rejected as a whole"
    else:
        said = f"{decision.decision} recorded for step {decision.shown_step!r} of run {decision.shown_run_id}{forced}"
    if decision.rejected_instance:
        said += (f"; instance {decision.rejected_instance} of run {decision.run_id} ended rejected (its consumers "
                 "read null) and the run goes on")
    if decision.closed:
        said += f"; pauses closed with it: {', '.join(decision.closed)}"
    return said


def _continue_after(store: "Store", decision: Any, as_json: bool, max_concurrency: int) -> None:
    from orchestrator.engine.run_state import RunResult
    from orchestrator.service.runner import continue_run

    said = err if as_json else out  # with --json, stdout holds the JSON document alone
    forced = " (forced past its failing checks)" if decision.forced else ""
    said.print(escape(decision_summary(decision, forced)), highlight=False)
    if decision.superseded:
        said.print(escape(f"superseded (kept, and run again now): {', '.join(decision.superseded)}"),
                   highlight=False)
    if not decision.continue_run:
        report_result(store, RunResult(decision.shown_run_id, store.get_run(decision.shown_run_id).status), as_json)
    progress = Progress(enabled=not as_json)
    progress.run_id = decision.run_id
    with resumable_on_interrupt(progress), progress:
        result = continue_run(store, decision.run_id, max_concurrency=max_concurrency, on_event=progress,
                              lease=decision.lease)
    report_result(store, result, as_json)


@guarded
def approve(run_id: RunArgument, step: StepOption = None, comment: CommentOption = None,
            reviewer: ReviewerOption = None, as_json: JsonOption = False,
            max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Accept the paused step's output as it is and continue the run."""
    from orchestrator.service import review

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    _continue_after(store, review.approve(store, run_id, step=step, reviewer=reviewer, comment=comment,
                                          lease=_lease(run_id)), as_json, max_concurrency)


@guarded
def retry(run_id: RunArgument, step: FixStepOption = None, comment: CommentOption = None,
          reviewer: ReviewerOption = None, rerun_side_effects: RerunSideEffectsOption = False,
          as_json: JsonOption = False,
          max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Run the paused step again (it sees the failed gates as ctx.gate_feedback), or any completed step
    and its descendants, and continue."""
    from orchestrator.service import review

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    _continue_after(store, review.retry(store, run_id, step=step, reviewer=reviewer, comment=comment,
                                        rerun_side_effects=rerun_side_effects, lease=_lease(run_id)),
                    as_json, max_concurrency)


ReasonOption = Annotated[str | None, typer.Option(
    "--comment", "--reason", help="Why; stored with the decision. A rejected tool call's reason is the tool's "
                                  "answer the model reads.")]


@guarded
def reject(run_id: RunArgument, step: StepOption = None, comment: ReasonOption = None, reviewer: ReviewerOption = None,
           as_json: JsonOption = False, max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY,
           db: DbOption = None) -> None:
    """Reject a pause, or the whole run. Without --step the run ends rejected as a whole (exit 1), every open
    pause of its tree closed with it. With --step, a pause of a mapped instance (or one inside an instance's
    child run) ends that instance rejected, its consumers reading null, and the run goes on; any other pause
    ends the run (and the runs above a child's pause). A step paused at a tool call is told the call was
    rejected, with --reason, and the run goes on (also without --step when that is the run's only pause)."""
    from orchestrator.service import review

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    _continue_after(store, review.reject(store, run_id, step=step, reviewer=reviewer, comment=comment,
                                         lease=_lease(run_id)), as_json, max_concurrency)


@guarded
def edit(run_id: RunArgument,
         output: Annotated[Path, typer.Option("--output", help="JSON file with the replacement output.")],
         step: FixStepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
         force: Annotated[bool, typer.Option("--force", help="Accept an output that fails the step's gates; "
                                                         "the override is recorded.")] = False,
         rerun_side_effects: RerunSideEffectsOption = False, as_json: JsonOption = False,
         max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, db: DbOption = None) -> None:
    """Replace the output of the paused step, or of any completed step (its descendants run again), and
    continue. The output must pass the step's gates."""
    from orchestrator.service import review

    value = read_json_file(output, "--output")
    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    _continue_after(store, review.edit(store, run_id, value, step=step, reviewer=reviewer, comment=comment,
                                       force=force, rerun_side_effects=rerun_side_effects, lease=_lease(run_id)),
                    as_json, max_concurrency)


@guarded
def review(reviewer: ReviewerOption = None, db: DbOption = None) -> None:
    """Open the terminal UI over paused runs."""
    store = open_store(db, create=False)  # a mistyped --db is said, not answered with an empty new database
    from tui.app import make_app

    make_app(store, reviewer=reviewer).run()


