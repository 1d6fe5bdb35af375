"""``orchestrator experiment``: run a workflow version on a dataset, list and show experiments, compare two."""

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.cli.common import (
    MAX_COUNT,
    ConcurrencyOption,
    DbOption,
    JsonOption,
    err,
    guarded,
    open_store,
    out,
    print_json,
    status_markup,
)

experiment = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Experiments: a workflow version run on every example of a dataset, and comparisons.")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _interval(values: list[float] | None) -> str:
    return "" if not values else f" [{values[0]:.0%}, {values[1]:.0%}]"


@experiment.command()
@guarded
def run(file: Annotated[Path, typer.Argument(help="Workflow file (.yaml or .py): the version to try.")],
        dataset: Annotated[str, typer.Option("--dataset", help="The dataset to run it on.")],
        name: Annotated[str | None, typer.Option("--name", help="The experiment's name (default: "
                                                                "DATASET-WORKFLOW-xxxxxx).")] = None,
        parallel: Annotated[int, typer.Option("--parallel", min=1, max=MAX_COUNT, help="Runs executing at "
                                                                                       "once.")] = 4,
        queue: Annotated[bool, typer.Option("--queue", help="Queue the runs for workers instead of executing "
                                                            "them here.")] = False,
        reuse: Annotated[str, typer.Option("--reuse", help="unchanged: start each run with its source run's "
                                                           "records of the steps that did not change; none: "
                                                           "execute every step.")] = "unchanged",
        rerun_side_effects: Annotated[bool, typer.Option("--rerun-side-effects", help="Let side-effecting steps "
                                                                                      "act (default: simulated "
                                                                                      "or blocked).")] = False,
        version: Annotated[int | None, typer.Option("--version", min=1, max=MAX_COUNT,
                                                   help="The dataset version (default: the "
                                                                      "latest).")] = None,
        max_concurrency: ConcurrencyOption = DEFAULT_CONCURRENCY,
        as_json: JsonOption = False, db: DbOption = None) -> None:
    """Run a workflow on every example of a dataset: one run per example, compared later with `compare`."""
    from orchestrator.bind.loader import load_workflow
    from orchestrator.service.experiments import ExperimentOptions, run_experiment

    workflow = load_workflow(file)
    options = ExperimentOptions(name=name, parallel=parallel, queue=queue, reuse=reuse,  # type: ignore[arg-type]
                                rerun_side_effects=rerun_side_effects, max_concurrency=max_concurrency,
                                version=version)
    store = open_store(db)
    show_progress = err.is_terminal and not as_json

    def progress(done: int, total: int) -> None:
        if show_progress:
            err.print(f"\r{done}/{total} runs {'queued' if queue else 'finished'}", end="", highlight=False)

    result = run_experiment(store, workflow, dataset, options, on_progress=progress)
    if show_progress:
        err.print("")
    doc = {**result.experiment.to_json(), "runs": [
        {"position": e.position, "example_id": e.id, "run_id": run_id, "status": status}
        for e, run_id, status in result.runs]}
    if as_json:
        print_json(doc)
        return
    _print_summary(result.experiment.name, result.summary)


def _print_summary(name: str, summary: dict[str, Any]) -> None:
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(summary.get("statuses", {}).items()))
    out.print(escape(f"experiment {name}: {summary.get('runs', 0)} runs ({statuses})"), highlight=False)
    out.print(f"outcome rate {_rate(summary.get('outcome_rate'))}{_interval(summary.get('outcome_rate_ci95'))} "
              f"of {summary.get('judged', 0)} judged", highlight=False)
    reuse = summary.get("reuse", {})
    out.print(f"step executions {summary.get('step_executions', 0)}, model calls {summary.get('model_calls', 0)}; "
              f"reuse saved {reuse.get('step_executions_saved', 0)} step executions and "
              f"{reuse.get('model_calls_saved', 0)} model calls ({reuse.get('runs_reusing', 0)} runs reused "
              "recorded steps)", highlight=False)


@experiment.command("list")
@guarded
def list_experiments(dataset: Annotated[str | None, typer.Option("--dataset", help="Only experiments on this "
                                                                                   "dataset.")] = None,
                     as_json: JsonOption = False, db: DbOption = None) -> None:
    """List experiments, oldest first."""
    from rich.table import Table

    store = open_store(db, create=False)
    views = store.experiments(dataset=dataset)
    if as_json:
        print_json([v.to_json() for v in views])
        return
    if not views:
        out.print("no experiments; run one with `orchestrator experiment run WORKFLOW --dataset NAME`",
                  highlight=False)
        return
    table = Table(expand=False)
    for column in ("experiment", "dataset", "workflow", "status", "runs", "outcome rate", "created"):
        table.add_column(column)
    for v in views:
        table.add_row(escape(v.name), escape(f"{v.dataset} v{v.dataset_version}"), escape(v.workflow), v.status,
                      str(v.summary.get("runs", "-")), _rate(v.summary.get("outcome_rate")),
                      v.to_json()["created_at"] or "")
    out.print(table)


@experiment.command()
@guarded
def show(name: Annotated[str, typer.Argument(help="The experiment.")], as_json: JsonOption = False,
         db: DbOption = None) -> None:
    """One experiment: its settings, its runs by example, and what they came to so far."""
    from rich.table import Table

    from orchestrator.service.comparison import experiment_runs_document, experiment_summary

    store = open_store(db, create=False)
    view = store.experiment(name)
    summary = experiment_summary(store, name)  # as of now: queued runs may have ended since
    runs = experiment_runs_document(store, name)
    if as_json:
        print_json({**view.to_json(), "summary": summary, "runs": runs})
        return
    out.print(escape(f"experiment {view.name}: workflow {view.workflow} on dataset {view.dataset} version "
                     f"{view.dataset_version} ({view.status})"), highlight=False)
    _print_summary(view.name, summary)
    table = Table(expand=False)
    for column in ("#", "run", "status", "score", "correct", "reused steps"):
        table.add_column(column)
    for r in runs:
        table.add_row(str(r["position"]), r["run_id"], status_markup(r["status"]),
                      "-" if r["score"] is None else f"{r['score']:.2f}",
                      "-" if r["correct"] is None else ("yes" if r["correct"] else "no"),
                      escape(", ".join(r["reused_steps"]) or "-"))
    out.print(table)


@experiment.command()
@guarded
def compare(a: Annotated[str, typer.Argument(help="An experiment, or baseline (the dataset's source runs).")],
            b: Annotated[str, typer.Argument(help="An experiment, or baseline.")],
            as_json: JsonOption = False, db: DbOption = None) -> None:
    """Compare two experiments example by example: flips (fixed, broken) and the changed step behind each."""
    from orchestrator.service.comparison import compare as compare_experiments

    store = open_store(db, create=False)
    doc = compare_experiments(store, a, b)
    if as_json:
        print_json(doc)
        return
    _print_comparison(doc)


def _print_comparison(doc: dict[str, Any]) -> None:
    from rich.table import Table

    a, b = doc["a"], doc["b"]
    flips = doc["flips"]
    out.print(escape(f"{a} -> {b} on dataset {doc['dataset']} v{doc['dataset_version']}: {doc['examples']} "
                     f"examples; changed steps: {', '.join(doc['changed_steps']) or 'none'}"), highlight=False)
    out.print(f"flips: {flips['fixed']} fixed, {flips['broken']} broken"
              + (f" ({flips['ambiguous']} not put down to one step)" if flips["ambiguous"] else ""), highlight=False)
    for row in doc["flips_by_step"]:
        out.print(escape(f"  {row['step_id']}: {row['fixed']} fixed, {row['broken']} broken "
                         f"({row['share']:.0%} of flips)"), highlight=False)
    table = Table(title="per example (flips first)", expand=False)
    for column in ("#", "flip", f"{a}", f"{b}", "changed step"):
        table.add_column(escape(column))

    def side(s: dict[str, Any]) -> str:
        verdict = "-" if s["correct"] is None else ("correct" if s["correct"] else "incorrect")
        score = "" if s["score"] is None else f" {s['score']:.2f}"
        return f"{verdict}{score} ({s['status']})"

    for row in doc["per_example"]:
        blamed = row.get("changed_step") or (
            "ambiguous: " + ", ".join(row.get("candidates", [])) if row["flip"] else "")
        table.add_row(str(row["position"]), row["flip"] or "", escape(side(row["a"])), escape(side(row["b"])),
                      escape(blamed))
    out.print(table)
    agg = Table(title="aggregates", expand=False)
    for column in ("", a, b):
        agg.add_column(escape(column))
    ga, gb = doc["aggregates"]["a"], doc["aggregates"]["b"]

    def num(value: float | None, fmt: str = "{:.2f}") -> str:
        return "-" if value is None else fmt.format(value)

    agg.add_row("outcome rate (95% CI)", _rate(ga["outcome_rate"]) + _interval(ga["outcome_rate_ci95"]),
                _rate(gb["outcome_rate"]) + _interval(gb["outcome_rate_ci95"]))
    agg.add_row("mean score", num(ga["mean_score"]), num(gb["mean_score"]))
    agg.add_row("tokens", str(ga["tokens"]["total"]), str(gb["tokens"]["total"]))
    agg.add_row("cost", num(ga["cost"], "{:.4f}"), num(gb["cost"], "{:.4f}"))
    agg.add_row("latency p50 / p95 (s)", f"{num(ga['latency_s']['p50'])} / {num(ga['latency_s']['p95'])}",
                f"{num(gb['latency_s']['p50'])} / {num(gb['latency_s']['p95'])}")
    agg.add_row("trajectory length (mean)", num(ga["trajectory_length"]["mean"], "{:.1f}"),
                num(gb["trajectory_length"]["mean"], "{:.1f}"))
    for gate in doc["gates"]:
        agg.add_row(escape(f"gate pass rate: {gate['step_id']}"), _rate(gate["a"]), _rate(gate["b"]))
    out.print(agg)
