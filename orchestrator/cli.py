"""The ``orchestrator`` command: a thin face over runner, review and store functions.

Exit codes: 0 succeeded, 1 failed or rejected, 2 invalid input, 3 paused for review.
Bad input gets one line on stderr and changes nothing stored; never a traceback.
Heavy imports (the store, Textual) happen inside commands so ``--help`` and ``validate`` stay fast.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from orchestrator.executor import RunResult
    from orchestrator.store import Store

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Run agentic workflows with quality gates, human review and step-level attribution.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: $ORCHESTRATOR_DB, "
                                                   "else sqlite:///.orchestrator/orchestrator.db)")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the JSON document instead of tables.")]
StepOption = Annotated[str | None, typer.Option("--step", help="The paused step (needed when several wait).")]
CommentOption = Annotated[str | None, typer.Option("--comment", help="Why; stored with the decision.")]
ReviewerOption = Annotated[str | None, typer.Option("--reviewer", help="Who decides (default: the OS user).")]
ConcurrencyOption = Annotated[int, typer.Option("--max-concurrency", min=1, help="Steps run at once.")]

STATUS_STYLE = {"succeeded": "green", "failed": "red", "gate_failed": "yellow", "paused": "yellow",
                "running": "cyan", "skipped": "dim", "rejected": "red", "queued": "dim", "pending": "dim"}


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, then exit with ``code``."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn OrchestratorErrors into one line and their exit code; never show a traceback for bad input."""
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from orchestrator.errors import OrchestratorError, SpecError

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except SpecError as exc:
            for problem in exc.problems:
                err.print(f"[bold red]error:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except OrchestratorError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted; the run stays resumable with `orchestrator resume RUN`", 130)
        except Exception as exc:
            if os.environ.get("ORCHESTRATOR_DEBUG"):
                raise
            db_error = type(exc).__module__.startswith("sqlalchemy")
            what = "database error" if db_error else "internal error"
            fail(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
                 "(set ORCHESTRATOR_DEBUG=1 for the traceback)", 1)
    return wrapper


def read_json_file(path: Path, option: str) -> Any:
    """A JSON file named by an option; InputError (exit 2) naming the option, line and column."""
    from orchestrator.errors import InputError

    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{option} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{option} {path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


def open_store(db: str | None) -> Store:
    from orchestrator.store import Store

    return Store(db)


# -- validate / schema -------------------------------------------------------------------------------

@app.command()
@guarded
def validate(file: Annotated[Path, typer.Argument(help="Workflow file (.yaml or .py).")]) -> None:
    """Load and check a workflow; every problem is listed with file, line and step."""
    from orchestrator.graph import topological_order
    from orchestrator.spec import load_workflow

    spec = load_workflow(file)
    out.print(f"[green]ok[/] {escape(str(file))}: workflow {spec.name!r} version {spec.version}, "
              f"{len(spec.steps)} steps, output {spec.output_step!r}", highlight=False, soft_wrap=True)
    out.print("order: " + " -> ".join(topological_order(spec)), highlight=False, soft_wrap=True)


@app.command()
@guarded
def schema(output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None) -> None:
    """Print the JSON Schema of the workflow YAML format (for editor completion)."""
    from orchestrator.jsonschema import workflow_json_schema

    text = json.dumps(workflow_json_schema(), indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        print(text)


# -- run / resume -----------------------------------------------------------------------------

class Progress:
    """Live per-step progress on a terminal; one line per finished step otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Any = None
        self.run_id: str | None = None

    def __enter__(self) -> Progress:
        if self.enabled and err.is_terminal:
            from rich.live import Live

            self.live = Live(self._table(), console=err, refresh_per_second=8, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"run {self.run_id}" if self.run_id else None, expand=False)
        for col in ("step", "status", "attempt", "duration", "note"):
            table.add_column(col)
        now = time.time()
        for sid, row in self.rows.items():
            duration = row.get("duration")
            if duration is None and row["status"] == "running":
                duration = now - row["started"]
            style = STATUS_STYLE.get(row["status"], "")
            table.add_row(sid, f"[{style}]{row['status']}[/]", str(row.get("attempt", "")),
                          f"{duration:.2f}s" if duration is not None else "", escape(row.get("note") or "")[:70])
        return table

    def __call__(self, event: str, **fields: Any) -> None:
        if event == "run_started":
            self.run_id = fields["run_id"]
            for sid in fields.get("steps", []):
                self.rows.setdefault(sid, {"status": "pending"})
            if self.enabled and self.live is None:
                err.print(f"run {self.run_id} ({fields.get('workflow')})", highlight=False)
        elif event == "step_started":
            self.rows[fields["step_id"]] = {"status": "running", "attempt": fields["attempt"],
                                            "started": fields["started_at"]}
        elif event == "step_finished":
            row = self.rows.setdefault(fields["step_id"], {})
            row.update(status=fields["status"], attempt=fields["attempt"], duration=fields["duration"],
                       note=fields.get("error"))
            if self.enabled and self.live is None:
                note = f"  {fields.get('error')}" if fields.get("error") else ""
                err.print(f"  {fields['step_id']:<24} {fields['status']:<12} attempt {fields['attempt']} "
                          f"{fields['duration']:.3f}s{escape(note)}", highlight=False, soft_wrap=True)
        if self.live is not None:
            self.live.update(self._table())


def report_result(store: Store, result: RunResult, as_json: bool) -> None:
    """Print a finished (or paused) run and exit with its code."""
    from orchestrator.documents import run_document

    if as_json:
        print(json.dumps(run_document(store, result.run_id), indent=2, default=str))
    else:
        style = STATUS_STYLE.get(result.status, "")
        out.print(f"run [bold]{result.run_id}[/] [{style}]{result.status}[/]", highlight=False)
        if result.status == "paused":
            for rec in store.step_records(result.run_id, latest_only=True):
                if rec.step_id in result.paused_steps:
                    reasons = "; ".join(g.reason for g in rec.failed_gates) or rec.error_message or ""
                    out.print(f"  paused at [yellow]{rec.step_id}[/]: {escape(reasons)}", highlight=False,
                              soft_wrap=True)
            out.print(f"  review with `orchestrator review` or `orchestrator approve|edit|retry|reject "
                      f"{result.run_id}`", highlight=False)
        elif result.status == "failed":
            out.print(f"  {escape(result.error or '')}", highlight=False, soft_wrap=True)
        elif result.status == "succeeded":
            text = json.dumps(result.output, default=str)
            out.print(f"  output: {escape(text[:400])}{'...' if len(text) > 400 else ''}", highlight=False,
                      soft_wrap=True)
            for o in store.outcomes(result.run_id):
                out.print(f"  outcome ({o.source}): {o.value:.3f} {'correct' if o.correct else 'incorrect'}",
                          highlight=False)
    raise typer.Exit(result.exit_code)


def _wait_for_review_timeouts(store: Store, result: RunResult, progress: Progress, max_concurrency: int) -> RunResult:
    """An unattended pause with ``review_timeout`` waits here and continues when the default applies."""
    from orchestrator.executor import RunResult
    from orchestrator.review import apply_review_timeouts, next_review_deadline
    from orchestrator.runner import continue_run, spec_for_run

    while result.status == "paused":
        spec, _ = spec_for_run(store, result.run_id)
        deadline = next_review_deadline(store, result.run_id, spec)
        if deadline is None:
            return result
        while time.time() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.time())))
            if store.get_run(result.run_id).status != "paused":
                # someone decided meanwhile and continues the run in their process
                return RunResult(result.run_id, store.get_run(result.run_id).status)
        decisions = apply_review_timeouts(store, result.run_id, spec)
        if not decisions:
            return result
        if any(d.decision == "reject" for d in decisions):
            return RunResult(result.run_id, "rejected")
        result = continue_run(store, result.run_id, max_concurrency=max_concurrency, on_event=progress)
    return result


@app.command()
@guarded
def run(
    file: Annotated[Path, typer.Argument(help="Workflow file (.yaml or .py).")],
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="key=value, converted to the "
                                                     "declared type; repeatable.")] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", help="JSON object of inputs.")] = None,
    as_json: JsonOption = False,
    max_concurrency: ConcurrencyOption = 8,
    queue: Annotated[bool, typer.Option("--queue", help="Only enqueue the run; `orchestrator worker` "
                                                     "executes it.")] = False,
    db: DbOption = None,
) -> None:
    """Run a workflow to its end or to its first pause for review."""
    from orchestrator.errors import InputError
    from orchestrator.inputs import parse_pairs, resolve_inputs
    from orchestrator.runner import start_run
    from orchestrator.spec import load_workflow

    spec = load_workflow(file)
    given: dict[str, Any] = {}
    if input_file is not None:
        loaded = read_json_file(input_file, "--input-file")
        if not isinstance(loaded, dict):
            raise InputError(f"--input-file {input_file} must hold a JSON object of inputs")
        given.update(loaded)
    given.update(parse_pairs(input or []))
    resolve_inputs(spec, given)  # fail on bad inputs before anything is stored
    store = open_store(db)
    if queue:
        from orchestrator.runner import enqueue_run

        run_id = enqueue_run(store, spec, given)
        if as_json:
            print(json.dumps(store.get_run(run_id).summary_json(), indent=2))
        else:
            out.print(f"run [bold]{run_id}[/] queued", highlight=False)
        return
    progress = Progress(enabled=not as_json)
    with progress:
        result = start_run(store, spec, given, max_concurrency=max_concurrency, on_event=progress)
        result = _wait_for_review_timeouts(store, result, progress, max_concurrency)
    report_result(store, result, as_json)


@app.command()
@guarded
def resume(run_id: Annotated[str, typer.Argument(help="Run id.")], as_json: JsonOption = False,
           max_concurrency: ConcurrencyOption = 8, db: DbOption = None) -> None:
    """Continue a paused, interrupted or failed run; completed steps are not run again."""
    from orchestrator.review import apply_review_timeouts
    from orchestrator.runner import continue_run, spec_for_run

    store = open_store(db)
    run_view = store.get_run(run_id)
    if run_view.status == "paused":
        spec, _ = spec_for_run(store, run_id)
        apply_review_timeouts(store, run_id, spec)
    if store.get_run(run_id).status in ("rejected", "succeeded"):
        from orchestrator.executor import RunResult

        report_result(store, RunResult(run_id, store.get_run(run_id).status, output=run_view.output), as_json)
    progress = Progress(enabled=not as_json)
    with progress:
        result = continue_run(store, run_id, max_concurrency=max_concurrency, on_event=progress)
    report_result(store, result, as_json)


# -- review decisions -------------------------------------------------------------------------------

def _continue_after(store: Store, decision: Any, as_json: bool, max_concurrency: int) -> None:
    from orchestrator.executor import RunResult
    from orchestrator.runner import continue_run

    out.print(f"{decision.decision} recorded for step {decision.step_id!r} of run {decision.run_id}",
              highlight=False)
    if not decision.continue_run:
        report_result(store, RunResult(decision.run_id, store.get_run(decision.run_id).status), as_json)
    progress = Progress(enabled=not as_json)
    with progress:
        result = continue_run(store, decision.run_id, max_concurrency=max_concurrency, on_event=progress)
    report_result(store, result, as_json)


@app.command()
@guarded
def approve(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
            as_json: JsonOption = False, max_concurrency: ConcurrencyOption = 8, db: DbOption = None) -> None:
    """Accept the paused step's output as it is and continue the run."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.approve(store, run_id, step=step, reviewer=reviewer, comment=comment),
                    as_json, max_concurrency)


@app.command()
@guarded
def retry(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
          as_json: JsonOption = False, max_concurrency: ConcurrencyOption = 8, db: DbOption = None) -> None:
    """Run the paused step again (it sees the failed gates as ctx.gate_feedback) and continue."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.retry(store, run_id, step=step, reviewer=reviewer, comment=comment),
                    as_json, max_concurrency)


@app.command()
@guarded
def reject(run_id: str, step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
           as_json: JsonOption = False, db: DbOption = None) -> None:
    """End the paused run as rejected (exit 1)."""
    from orchestrator import review

    store = open_store(db)
    _continue_after(store, review.reject(store, run_id, step=step, reviewer=reviewer, comment=comment), as_json, 1)


@app.command()
@guarded
def edit(run_id: str,
         output: Annotated[Path, typer.Option("--output", help="JSON file with the replacement output.")],
         step: StepOption = None, comment: CommentOption = None, reviewer: ReviewerOption = None,
         force: Annotated[bool, typer.Option("--force", help="Accept an output that fails the step's gates; "
                                                         "the override is recorded.")] = False,
         as_json: JsonOption = False, max_concurrency: ConcurrencyOption = 8, db: DbOption = None) -> None:
    """Replace the paused step's output (it must pass the step's gates) and continue."""
    from orchestrator import review

    value = read_json_file(output, "--output")
    store = open_store(db)
    _continue_after(store, review.edit(store, run_id, value, step=step, reviewer=reviewer, comment=comment,
                                       force=force), as_json, max_concurrency)


# -- inspection -------------------------------------------------------------------------------------

def _age(ts: float) -> str:
    delta = max(0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit}"
    return f"{int(delta)}s"


@app.command()
@guarded
def runs(status: Annotated[str | None, typer.Option("--status", help="Only runs in this state.")] = None,
         workflow: Annotated[str | None, typer.Option("--workflow", help="Only runs of this workflow.")] = None,
         as_json: JsonOption = False, db: DbOption = None) -> None:
    """List runs, newest first."""
    from orchestrator.documents import runs_document
    from orchestrator.errors import InputError
    from orchestrator.model import RunStatus

    valid = RunStatus.__args__  # type: ignore[attr-defined]
    if status is not None and status not in valid:
        raise InputError(f"--status {status!r} is not a run status; choose from {list(valid)}")
    store = open_store(db)
    docs = runs_document(store, status=status, workflow=workflow)
    if as_json:
        print(json.dumps(docs, indent=2))
        return
    from rich.table import Table

    table = Table()
    for col in ("run", "workflow", "status", "age", "waiting at"):
        table.add_column(col)
    from orchestrator.review import waiting_records

    for view in store.list_runs(status=status, workflow=workflow):
        waiting = ", ".join(r.step_id for r in waiting_records(store, view.run_id)) if view.status == "paused" else ""
        style = STATUS_STYLE.get(view.status, "")
        table.add_row(view.run_id, view.workflow, f"[{style}]{view.status}[/]", _age(view.created_at), waiting)
    out.print(table)


def _preview(value: Any, width: int = 48) -> str:
    text = json.dumps(value, default=str) if value is not None else ""
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command()
@guarded
def show(run_id: str, as_json: JsonOption = False, db: DbOption = None) -> None:
    """One run, step by step, with gate results, reviews and outcomes."""
    from orchestrator.documents import run_document

    store = open_store(db)
    doc = run_document(store, run_id)
    if as_json:
        print(json.dumps(doc, indent=2, default=str))
        return
    from rich.table import Table

    style = STATUS_STYLE.get(doc["status"], "")
    out.print(f"run [bold]{doc['run_id']}[/]  workflow {doc['workflow']}  [{style}]{doc['status']}[/]",
              highlight=False)
    if doc.get("parent_run_id"):
        out.print(f"forked from {doc['parent_run_id']} at step {doc.get('parent_step')}", highlight=False)
    table = Table(expand=True)
    for col, kw in (("step", {}), ("agent", {}), ("status", {}), ("try", {"justify": "right"}),
                    ("duration", {"justify": "right"}), ("gates", {}), ("error / output", {"ratio": 1})):
        table.add_column(col, **kw)
    for s in doc["steps"]:
        st = STATUS_STYLE.get(s["status"], "")
        gates = s["gates"]
        gate_text = " ".join(("[green]✓[/]" if g["passed"] else "[red]✗[/]") + escape(g["gate"]) for g in gates)
        note = s["error"] or _preview(s["output"])
        if s["origin"] != "executed":
            note = f"[{s['origin']}] {note}"
        table.add_row(s["step_id"], s["agent"], f"[{st}]{s['status']}[/]", str(s["attempt"]),
                      f"{s['duration']:.3f}s", gate_text, escape(note))
    out.print(table)
    for s in doc["steps"]:
        for g in s["gates"]:
            if not g["passed"]:
                extra = ""
                if g["gate"] == "critic" and g["details"].get("verifies"):
                    extra = f" (verifies {', '.join(g['details']['verifies'])})"
                out.print(f"[red]✗[/] {s['step_id']} / {escape(g['gate'])}{extra}: {escape(g['reason'])}",
                          highlight=False, soft_wrap=True)
    for r in doc["reviews"]:
        out.print(f"review: {r['decision']} {r['step_id']} by {r['reviewer']} at {r['created_at']}"
                  + (" (forced)" if r["forced"] else "") + (f": {escape(r['comment'])}" if r["comment"] else ""),
                  highlight=False, soft_wrap=True)
    for o in doc["outcomes"]:
        verdict = "correct" if o["correct"] else ("incorrect" if o["correct"] is False else "")
        out.print(f"outcome: {o['value']:.3f} {verdict} ({o['source']}, {o['termination']})", highlight=False)
    if doc["status"] == "succeeded":
        out.print(f"output: {escape(_preview(doc['output'], 400))}", highlight=False, soft_wrap=True)
    if doc.get("error"):
        out.print(f"error: {escape(doc['error'])}", highlight=False, soft_wrap=True)


@app.command()
@guarded
def worker(once: Annotated[bool, typer.Option("--once", help="Exit when the queue is empty.")] = False,
           poll: Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between queue checks.")] = 1.0,
           max_runs: Annotated[int | None, typer.Option("--max-runs", min=1, help="Exit after this many runs.")]
           = None,
           max_concurrency: ConcurrencyOption = 8, db: DbOption = None) -> None:
    """Claim and execute queued runs from a shared database (run several for more throughput)."""
    from orchestrator.runner import work

    store = open_store(db)

    def report(result: RunResult) -> None:
        style = STATUS_STYLE.get(result.status, "")
        out.print(f"run {result.run_id} [{style}]{result.status}[/]", highlight=False)

    count = work(store, once=once, poll=poll, max_runs=max_runs, max_concurrency=max_concurrency,
                 on_result=report)
    err.print(f"worker done: {count} run(s) executed", highlight=False)


@app.command()
@guarded
def review(reviewer: ReviewerOption = None, db: DbOption = None) -> None:
    """Open the terminal UI over paused runs."""
    from tui.app import make_app

    store = open_store(db)
    make_app(store, reviewer=reviewer).run()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="orchestrator")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


from orchestrator import cli_attribution  # noqa: E402,F401  (registers label/trace/attribute/... on app)
