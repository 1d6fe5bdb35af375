"""Commands that execute workflows: validate, schema, run, resume, worker."""

import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.cli.common import (
    MAX_COUNT,
    ConcurrencyOption,
    DbOption,
    JsonOption,
    OtelOption,
    RunArgument,
    err,
    exit_code,
    fail,
    guarded,
    open_store,
    out,
    print_json,
    read_json_file,
    resolve_run_id,
    show_warnings,
    status_markup,
)
from orchestrator.cli.fixes import print_critic_fixes

if TYPE_CHECKING:
    from orchestrator.engine.run_state import RunResult
    from orchestrator.service.metrics import WorkerMetrics
    from orchestrator.spec.events import Event, StepFinished, Token
    from orchestrator.spec.model import WorkflowSpec
    from orchestrator.store import Store


@guarded
def validate(file: Annotated[Path, typer.Argument(help="Workflow file (.yaml or .py).")]) -> None:
    """Load and check a workflow; every problem is listed with file, line and step."""
    from orchestrator.bind.loader import load_workflow

    workflow = load_workflow(file)
    spec = workflow.spec
    warn_about_model_keys(spec)
    out.print("[green]ok[/] " + escape(f"{file}: workflow {spec.name!r} version {spec.version}, {len(spec.steps)} "
                                       f"steps, output {spec.output_step!r}"), highlight=False, soft_wrap=True)
    out.print("order: " + escape(" -> ".join(workflow.order)), highlight=False, soft_wrap=True)
    for sid in workflow.order:
        child = workflow.step(sid).child
        if child is not None:
            out.print(escape(f"step {sid} runs workflow {workflow.step(sid).spec.workflow} ({child.name!r}, "
                             f"{len(child.order)} steps: {' -> '.join(child.order)}) as a child run"),
                      highlight=False, soft_wrap=True)


def warn_about_model_keys(spec: "WorkflowSpec") -> None:
    """A line on stderr per LLM step whose ``api_key_env`` variable is unset (see :func:`key_warnings`)."""
    if not any(step.calls_model for step in spec.steps):
        return
    from orchestrator.llm.preflight import key_warnings

    for warning in key_warnings(spec):
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


@guarded
def schema(output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None) -> None:
    """Print the JSON Schema of the workflow YAML format (for editor completion)."""
    from orchestrator.spec.json_schema import workflow_json_schema

    text = json.dumps(workflow_json_schema(), indent=2)
    if output:
        try:
            output.write_text(text + "\n")
        except OSError as exc:
            from orchestrator.core.errors import InputError

            raise InputError(f"-o {output}: cannot write the schema: {exc.strerror}") from None
    else:
        print(text)


# -- run / resume -----------------------------------------------------------------------------

class Progress:
    """Live per-step progress on a terminal; one line per finished step otherwise. Steps of child runs are
    shown by their path (``research > retrieve``); those of the child runs of a map's instances are counted
    on the map's row, like its instances."""

    def __init__(self, enabled: bool, *, live: bool = True) -> None:
        """``live``: a table redrawn in place on a terminal (else, and off a terminal, a line per step)."""
        self.enabled = enabled
        self.live_table = live
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Any = None
        self.run_id: str | None = None
        self.prefixes: dict[str, str] = {}
        """Child runs under way, by run id: the path of the unit that runs each (``research > ``)."""

    def __enter__(self) -> "Progress":
        if self.enabled and self.live_table and err.is_terminal:
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
            table.add_row(escape(sid), status_markup(row["status"]), str(row.get("attempt", "")),
                          f"{duration:.2f}s" if duration is not None else "", escape((row.get("note") or "")[:70]))
        return table

    def instance_finished(self, event: "StepFinished") -> None:
        """An instance of a mapped step: counted on its step's row; only a failure or a pause gets a line
        of its own (a map of 10 000 items would otherwise print 10 000 lines)."""
        row = self.rows.setdefault(event.step_id, {"status": "running"})
        counts = row.setdefault("instances", {})
        counts[event.shown_status] = counts.get(event.shown_status, 0) + 1
        row["note"] = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        if event.status not in ("succeeded", "skipped"):
            self.line(event.unit, event)

    def iteration_finished(self, event: "StepFinished") -> None:
        """An iteration of a ``repeat:`` step: its step's row says how far the loop got; each iteration gets a
        line of its own (a loop has at most 100), but in a map only a failure or a pause does, as instances."""
        row = self.rows.setdefault(event.step_id, {"status": "running"})
        row["note"] = f"iteration {event.iteration}: {event.shown_status}"
        if event.index is None or event.status not in ("succeeded", "skipped"):
            self.line(event.unit, event)

    def child_event(self, event: "Event") -> None:
        """An event of a child run: its steps by their path, or counted on the row of the mapped step whose
        instance runs the child."""
        from orchestrator.spec.events import RunStarted, StepFinished, StepStarted

        if isinstance(event, RunStarted):
            assert event.parent_run_id is not None
            self.prefixes[event.run_id] = f"{self.prefixes.get(event.parent_run_id, '')}{event.parent_step} > "
            return
        prefix = self.prefixes.get(event.run_id)
        if prefix is None or not isinstance(event, StepStarted | StepFinished):
            return
        if "[" in prefix and isinstance(event, StepFinished):  # inside an instance: a line for a failure or pause
            if event.status not in ("succeeded", "skipped"):
                self.line(prefix + event.unit, event)
        elif "[" not in prefix and isinstance(event, StepStarted):
            self.rows[prefix + event.unit] = {"status": "running", "attempt": event.attempt,
                                              "started": event.started_at}
        elif "[" not in prefix and isinstance(event, StepFinished):
            self.step_finished(event, prefix + event.unit)
        if self.live is not None:
            self.live.update(self._table())

    def path(self, run_id: str, unit: str) -> str:
        """A unit's path from the run on screen (``research > retrieve`` for a unit of a child run)."""
        return self.prefixes.get(run_id, "") + unit

    def step_finished(self, event: "StepFinished", label: str) -> None:
        row = self.rows.setdefault(label, {})
        row.update(status=event.shown_status, attempt=event.attempt, duration=event.duration, note=event.error)
        self.line(label, event)

    def line(self, label: str, event: "StepFinished") -> None:
        """A finished step's line, when progress is printed line by line (not as a live table)."""
        if self.enabled and self.live is None:
            note = f"  {event.error}" if event.error else ""
            err.print(escape(f"  {label:<24} {event.shown_status:<12} attempt {event.attempt} "
                             f"{event.duration:.3f}s{note}"), highlight=False, soft_wrap=True)

    def __call__(self, event: "Event") -> None:
        from orchestrator.spec.events import RunStarted, StepFinished, StepStarted

        if (isinstance(event, RunStarted) and event.parent_run_id is not None) or event.run_id in self.prefixes:
            self.child_event(event)
            return
        if isinstance(event, RunStarted):
            self.run_id = event.run_id
            for sid in event.steps:
                self.rows.setdefault(sid, {"status": "pending"})
            if self.enabled and self.live is None:
                err.print(escape(f"run {self.run_id} ({event.workflow})"), highlight=False)
        elif isinstance(event, StepStarted) and (event.index is not None or event.iteration is not None):
            self.rows.setdefault(event.step_id, {"status": "running", "started": event.started_at})
        elif isinstance(event, StepFinished) and event.iteration is not None:
            self.iteration_finished(event)
        elif isinstance(event, StepStarted):
            self.rows[event.step_id] = {"status": "running", "attempt": event.attempt, "started": event.started_at}
        elif isinstance(event, StepFinished) and event.index is not None:
            self.instance_finished(event)
        elif isinstance(event, StepFinished):
            self.step_finished(event, event.step_id)
        if self.live is not None:
            self.live.update(self._table())


StreamOption = Annotated[bool, typer.Option("--stream", help="Print each LLM step's answer on stdout as the model "
                                                            "writes it (progress lines go to stderr).")]


class StreamedText:
    """``run --stream``: the text of each LLM step's answer on stdout as it arrives, the progress lines on
    stderr. A block of text starts with a line naming its unit (and the model call, after the first); any
    other event ends the open block's line first, so a progress line never lands in the middle of an answer
    on a terminal that shows both streams."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.block: tuple[str, str, int, int] | None = None
        """The answer being printed: its run, unit, attempt and model call."""

    def __call__(self, event: "Event") -> None:
        from orchestrator.spec.events import Token

        if isinstance(event, Token):
            self.text(event)
            return
        self.end_line()
        self.progress(event)

    def text(self, event: "Token") -> None:
        import sys

        block = (event.run_id, event.unit, event.attempt, event.call)
        if block != self.block:
            self.end_line()
            label = self.progress.path(event.run_id, event.unit)
            if event.attempt > 1:
                label += f" attempt {event.attempt}"
            if event.call > 1:
                label += f" call {event.call}"
            sys.stdout.write(f"[{label}]\n")
            self.block = block
        sys.stdout.write(event.text)
        sys.stdout.flush()

    def end_line(self) -> None:
        import sys

        if self.block is not None:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.block = None


@dataclass
class _Stop:
    terminated: bool = False
    """The stop came from SIGTERM (``docker stop``, systemd, a CI timeout), not from Ctrl-C."""


@contextmanager
def resumable_on_interrupt(progress: Progress) -> Iterator[None]:
    """Ctrl-C or SIGTERM stops the execution at once (steps in flight are abandoned, unrecorded) and its
    lease is handed back; this names the run and how to continue it, and exits 130 (143 on SIGTERM)."""
    with _sigterm_as_interrupt() as stop:
        try:
            yield
        except KeyboardInterrupt:
            code, what = (143, "terminated (SIGTERM)") if stop.terminated else (130, "interrupted")
            run_id = progress.run_id
            if run_id is None:
                fail(f"{what} before the run started", code)
            fail(f"{what}; run {run_id} is resumable: `orchestrator resume {run_id}` finishes it without "
                 "re-running its completed steps", code)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[_Stop]:
    """SIGTERM takes the path of Ctrl-C: whatever handles SIGINT right now is called (during an execution,
    the handler that cancels it so that its lease is handed back), else KeyboardInterrupt is raised."""
    stop = _Stop()

    def on_sigterm(_signum: int, frame: FrameType | None) -> None:
        stop.terminated = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt()

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: no signal reaches this call
        yield stop
        return
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def report_result(store: "Store", result: "RunResult", as_json: bool) -> None:
    """Print a finished (or paused) run and exit with its code."""
    if as_json:
        from orchestrator.engine.documents import run_document

        print_json(run_document(store, result.run_id))
    else:
        out.print(f"run [bold]{escape(result.run_id)}[/] {status_markup(result.status)}", highlight=False)
        if result.status == "paused":
            print_pauses(store, result.run_id)
            out.print(f"  review with `orchestrator review` or `orchestrator approve|edit|retry|reject "
                      f"{result.run_id}`", highlight=False)
            print_critic_fixes(store, result.run_id)
        elif result.status == "failed":
            out.print(f"  {escape(result.error or '')}", highlight=False, soft_wrap=True)
            out.print(f"  `orchestrator resume {result.run_id}` retries the failed step; `orchestrator edit|retry "
                      f"{result.run_id} --step STEP` fixes a completed step upstream of it", highlight=False)
        elif result.status == "succeeded":
            text = json.dumps(result.output, default=str)
            out.print(f"  output: {escape(text[:400])}{'...' if len(text) > 400 else ''}", highlight=False,
                      soft_wrap=True)
            for o in store.outcomes(result.run_id):
                out.print(escape(f"  outcome ({o.source}): {o.value:.3f} {'correct' if o.correct else 'incorrect'}"),
                          highlight=False)
            error = store.get_run(result.run_id).error  # an evaluator error leaves the run succeeded
            if error:
                out.print(f"  [yellow]{escape(error)}[/]", highlight=False, soft_wrap=True)
    raise typer.Exit(exit_code(result.status))


def print_pauses(store: "Store", run_id: str) -> None:
    """``paused at PATH: reason`` for every open pause of the run's tree: its own steps' and, by their paths
    (``research > retrieve``), those inside its child runs, which hold the run up as much."""
    from orchestrator.engine.documents import pause_reasons
    from orchestrator.engine.tree import open_pauses

    for pause in open_pauses(store, run_id):
        out.print(f"  paused at [yellow]{escape(pause.path)}[/]: {escape(pause_reasons(pause.record))}",
                  highlight=False, soft_wrap=True)


def announce_review_wait(paused: "RunResult", deadline: float) -> None:
    """What a long wait for a review timeout waits for, and until when (a silent wait looks hung)."""
    from orchestrator.spec.records import iso

    steps = ", ".join(paused.paused_steps)
    err.print(f"run {escape(paused.run_id)} paused at {escape(steps)}: waiting for a review until {iso(deadline)}, "
              f"when its review_timeout applies; decide now with `orchestrator review` or `orchestrator "
              f"approve|edit|retry|reject {escape(paused.run_id)}` from another terminal", highlight=False,
              soft_wrap=True)


@guarded
def run(
    file: Annotated[Path, typer.Argument(help="Workflow file (.yaml or .py).")],
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="key=value, converted to the "
                                                     "declared type; repeatable.")] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", help="JSON object of inputs; a .jsonl file "
                                                     "(one object per line) starts one run per line.")] = None,
    as_json: JsonOption = False,
    max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY,
    queue: Annotated[bool, typer.Option("--queue", help="Only enqueue the run; `orchestrator worker` "
                                                     "executes it.")] = False,
    parallel: Annotated[int, typer.Option("--parallel", min=1, max=MAX_COUNT,
                                          help="With a .jsonl --input-file: runs executed "
                                               "at once.")] = 16,
    otel: OtelOption = None,
    reference: Annotated[Path | None, typer.Option("--reference", help="JSON file with the run's reference "
                                                   "answer, for an evaluator that declares `reference`.")] = None,
    stream: StreamOption = False,
    db: DbOption = None,
) -> None:
    """Run a workflow to its end or to its first pause for review (or one run per line of a .jsonl file)."""
    from orchestrator.bind.loader import load_workflow
    from orchestrator.core.errors import InputError
    from orchestrator.service.runner import start_run, wait_for_review_timeouts
    from orchestrator.spec.inputs import parse_pairs, resolve_inputs

    if stream and (as_json or queue):
        clash = "--json (whose document is all stdout holds)" if as_json else "--queue (a worker runs the run)"
        raise InputError(f"--stream prints the models' answers as they are written; it cannot go with {clash}")
    workflow = load_workflow(file)
    warn_about_model_keys(workflow.spec)
    given: dict[str, Any] = {}
    if input_file is not None:
        from orchestrator.cli.bulk import bulk_run, is_bulk

        if is_bulk(input_file):
            if stream:
                raise InputError("--stream prints one run's answers as they are written; a .jsonl --input-file "
                                 "starts many runs at once")
            if reference is not None:
                raise InputError("--reference gives one run's reference answer; in a file of many runs give each "
                                 "line its own \"$reference\" key")
            bulk_run(workflow, input_file, parse_pairs(input or []), db=db, as_json=as_json, parallel=parallel,
                     max_concurrency=max_concurrency, queue=queue, otel=otel)
            return
        loaded = read_json_file(input_file, "--input-file")
        if not isinstance(loaded, dict):
            raise InputError(f"--input-file {input_file} must hold a JSON object of inputs")
        from orchestrator.cli.bulk import split_reference

        loaded, in_file_reference = split_reference(loaded, workflow.spec.inputs)
        given.update(loaded)
    given.update(parse_pairs(input or []))
    resolve_inputs(workflow.spec, given)  # fail on bad inputs before anything is stored
    answer = read_json_file(reference, "--reference") if reference is not None else None
    if answer is None and input_file is not None:
        answer = in_file_reference
    show_warnings()
    store = open_store(db)
    if queue:
        from orchestrator.service.runner import enqueue_run

        run_id = enqueue_run(store, workflow, given, reference=answer)
        if as_json:
            print_json(store.get_run(run_id).summary_json())
        else:
            out.print(f"run [bold]{run_id}[/] queued", highlight=False)
        return
    progress = Progress(enabled=not as_json, live=not stream)
    listener = StreamedText(progress) if stream else progress
    with resumable_on_interrupt(progress), progress:
        result = start_run(store, workflow, given, max_concurrency=max_concurrency, on_event=listener, otel=otel,
                           reference=answer, stream_tokens=stream)
        result = wait_for_review_timeouts(store, result, max_concurrency=max_concurrency, on_event=listener,
                                          on_wait=announce_review_wait, stream_tokens=stream)
    report_result(store, result, as_json)


@guarded
def resume(run_id: RunArgument, as_json: JsonOption = False,
           max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY, otel: OtelOption = None,
           stream: StreamOption = False, db: DbOption = None) -> None:
    """Continue a paused, interrupted or failed run; completed steps are not run again. A child run is
    continued through the run at the top of its tree, which one process executes as a whole."""
    from orchestrator.engine.run_state import RunResult
    from orchestrator.engine.stored_workflow import load_run_workflow
    from orchestrator.engine.tree import is_child, path_from_root, root_of
    from orchestrator.service.review import apply_review_timeouts
    from orchestrator.service.runner import continue_run

    if stream and as_json:
        from orchestrator.core.errors import InputError

        raise InputError("--stream prints the models' answers as they are written; it cannot go with --json "
                         "(whose document is all stdout holds)")
    show_warnings()
    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    run_view = store.get_run(run_id)
    if is_child(run_view):
        root = root_of(store, run_view.run_id)
        (err if as_json else out).print(escape(f"run {run_view.run_id} is the child run at "
                                               f"{path_from_root(store, run_view.run_id)!r} of run {root.run_id}; "
                                               f"continuing run {root.run_id}, which continues it"), highlight=False)
        run_id, run_view = root.run_id, root
    if run_view.status == "paused":
        apply_review_timeouts(store, run_id, load_run_workflow(store, run_id)[0].spec)
    status = store.get_run(run_id).status
    if status in ("rejected", "succeeded"):
        report_result(store, RunResult(run_id, status, output=run_view.output), as_json)
    progress = Progress(enabled=not as_json, live=not stream)
    with resumable_on_interrupt(progress), progress:
        result = continue_run(store, run_id, max_concurrency=max_concurrency, otel=otel, stream_tokens=stream,
                              on_event=StreamedText(progress) if stream else progress)
    report_result(store, result, as_json)


def worker_metrics(store: "Store", host: str, port: int | None, otel: str | None) -> "WorkerMetrics | None":
    """The worker's metrics: served at ``http://HOST:PORT/metrics`` with a port, exported over OTLP when telemetry
    is on (``--otel`` or the variables), both at once, or None. A port that cannot be bound is exit 2, as is
    telemetry asked for that cannot work; both are said before any run is claimed."""
    from orchestrator.core.errors import InputError
    from orchestrator.service.metrics import StoreReadings, WorkerMetrics
    from orchestrator.telemetry import get_tracer, otel_recorder, resolve_metrics_endpoint
    from orchestrator.telemetry.metrics import MetricsRecorder

    get_tracer(otel)  # the runs' spans: a bad endpoint or a missing extra is refused now, not at each run
    readings = StoreReadings(store)
    recorders: list[MetricsRecorder] = []
    exported = otel_recorder(otel, readings)
    if exported is not None:
        recorders.append(exported)
        err.print(f"metrics exported to {resolve_metrics_endpoint(otel)}", highlight=False)
    if port is not None:
        from orchestrator.telemetry.prometheus_metrics import PrometheusRecorder

        served = PrometheusRecorder(readings)
        try:
            served.serve(port, host)
        except OSError as exc:
            if exported is not None:
                exported.close()
            raise InputError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; "
                             "choose another --metrics-port") from None
        err.print(f"metrics at http://{host}:{port}/metrics", highlight=False)
        recorders.append(served)
    return WorkerMetrics(recorders) if recorders else None


@guarded
def worker(once: Annotated[bool, typer.Option("--once", help="Exit when the queue is empty.")] = False,
           poll: Annotated[float, typer.Option("--poll", min=0.05, max=3600.0,
                                               help="Seconds between queue checks.")] = 1.0,
           max_runs: Annotated[int | None, typer.Option("--max-runs", min=1, max=MAX_COUNT,
                                                        help="Exit after this many runs.")]
           = None,
           max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY,
           concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=MAX_COUNT,
                                                    help="Runs executed at once, each "
                                                         "under its own lease.")] = 1,
           recover: Annotated[bool, typer.Option("--recover/--no-recover", help="Also take over interrupted runs "
                                                 "(their executor died).")] = True,
           metrics_port: Annotated[int | None, typer.Option("--metrics-port", min=1, max=65535,
                                                             help="Serve Prometheus metrics on this port "
                                                                  "(/metrics).")] = None,
           metrics_host: Annotated[str, typer.Option("--metrics-host", help="The address the metrics are "
                                                     "served on.")] = "127.0.0.1",
           otel: Annotated[str | None, typer.Option("--otel", help="Export the runs' OpenTelemetry spans and the "
                                                    "worker's metrics to this OTLP/HTTP endpoint (default: "
                                                    "$OTEL_EXPORTER_OTLP_ENDPOINT).")] = None,
           db: DbOption = None) -> None:
    """Claim and execute queued runs from a shared database (run several for more throughput).

    SIGTERM or Ctrl-C drains: no more claims, the steps in flight finish and are recorded, unfinished
    runs are handed back (resumable at once), exit 0; a second signal stops at once (exit 130).
    """
    from orchestrator.service.worker import open_when_answering, work

    show_warnings()
    store = open_when_answering(lambda: open_store(db))
    if store is None:
        err.print("worker stopped before its database answered: 0 run(s) executed", highlight=False)
        return

    def report(result: "RunResult") -> None:
        out.print(f"run {escape(result.run_id)} {status_markup(result.status)}", highlight=False)

    def stopping(signal_name: str, runs: int) -> None:
        err.print(f"{signal_name}: draining {runs} run(s): the steps in flight finish, then their runs are handed "
                  "back; send it again to stop at once", highlight=False, soft_wrap=True)

    metrics = worker_metrics(store, metrics_host, metrics_port, otel)
    try:
        summary = work(store, once=once, poll=poll, max_runs=max_runs, concurrency=concurrency,
                       max_concurrency=max_concurrency, on_result=report, recover=recover, stop_on_signals=True,
                       on_stopping=stopping, on_event=metrics.listen if metrics else None,
                       on_takeover=metrics.took_over if metrics else None, otel=otel)
    finally:
        if metrics is not None:
            metrics.close()  # an exporter sends the last counts
    if summary.signal is None:
        err.print(f"worker done: {summary.executed} run(s) executed", highlight=False)
        return
    how = "at once by a second signal (steps in flight abandoned)" if summary.forced else f"by {summary.signal}"
    back = f" ({', '.join(summary.handed_back)}: `orchestrator resume RUN` or any worker continues them)" \
        if summary.handed_back else ""
    err.print(f"worker stopped {how}: {summary.executed} run(s) executed, {len(summary.handed_back)} handed back"
              f"{back}", highlight=False, soft_wrap=True)
    if summary.forced:
        raise typer.Exit(130)


