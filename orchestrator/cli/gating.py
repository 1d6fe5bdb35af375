"""``orchestrator gates``: what gates would do, judged on the runs already stored.

``gates backtest FILE`` checks a new or changed workflow's gates against the stored outputs of past
runs of that workflow, without executing any step (:mod:`orchestrator.service.backtest`).
"""

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import DbOption, JsonOption, guarded, open_store, out, print_json

if TYPE_CHECKING:
    from orchestrator.service.backtest import BacktestReport, GateBacktest, Rate

gates = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                    help="Gates judged on stored runs: backtest a new or changed gate.")

SHOWN_RUNS = 10
"""Changed verdicts listed per gate in the table view (``--json`` lists every one)."""

RUNS_HELP = ("Which stored runs: KEY=VALUE, repeatable or comma-separated; keys status, since (2026-11-01, 7d), "
             "limit (default 1000, newest first), outcome (correct | incorrect), blamed (a step), workflow (runs "
             "of another workflow name; default: the file's).")


@gates.command()
@guarded
def backtest(file: Annotated[Path, typer.Argument(help="The new or changed workflow file (.yaml or .py).")],
             step: Annotated[str | None, typer.Option("--step", help="Only this step's gates.")] = None,
             runs: Annotated[list[str] | None, typer.Option("--runs", metavar="FILTER", help=RUNS_HELP)] = None,
             judges: Annotated[bool, typer.Option("--judges", help="Call model judges (llm_judge, model critics); "
                                                                   "otherwise they are reported as skipped.")] = False,
             as_json: JsonOption = False, db: DbOption = None) -> None:
    """Evaluate the workflow's gates on the stored outputs of its past runs (no step runs) and set each
    verdict against the outcomes recorded: failures caught, false alarms, pauses per 100 runs, precision
    and recall, and the runs whose verdict changed."""
    from orchestrator.bind.loader import load_workflow
    from orchestrator.service.backtest import backtest as run_backtest
    from orchestrator.service.backtest import parse_run_filters

    filters = parse_run_filters(runs or [])
    workflow = load_workflow(file)
    store = open_store(db, create=False)
    report = run_backtest(store, workflow, step=step, filters=filters, judges=judges)
    if as_json:
        print_json(report.to_json())
        return
    print_report(report)


def _rate(rate: "Rate") -> str:
    return "-" if rate.value is None else f"{rate.value:.0%} ({rate.hits}/{rate.of})"


def print_report(report: "BacktestReport") -> None:
    from rich.table import Table

    of = "" if report.runs_of == report.workflow else f" (runs of {escape(report.runs_of)})"
    cut = f" of {report.matching_runs}" if report.matching_runs > report.runs else ""
    out.print(f"backtest of [bold]{escape(report.workflow)}[/]{of}: {report.runs}{cut} stored runs, no step "
              f"executed, {report.model_calls} model calls", highlight=False)
    table = Table()
    for col in ("step", "gate", "evaluated", "would pause", "per 100", "caught", "false alarms", "precision",
                "recall", "changed"):
        table.add_column(col, justify="left" if col in ("step", "gate") else "right")
    for g in report.gates:
        name = g.gate + (" (new)" if g.new and g.evaluated else "") + (" (judge)" if g.judge else "")
        evaluated = str(g.evaluated) + (f" +{g.not_evaluable} n/a" if g.not_evaluable else "") + \
            (f" +{g.skipped} skipped" if g.skipped else "")
        table.add_row(escape(g.step_id), escape(name), evaluated, str(g.would_pause),
                      "-" if g.pauses_per_100_runs is None else f"{g.pauses_per_100_runs:g}",
                      f"{g.caught}/{g.failures}", str(g.false_alarms), _rate(g.precision), _rate(g.recall),
                      str(len(g.changed)))
    out.print(table, soft_wrap=False)
    for g in report.gates:
        print_details(g)


def print_details(g: "GateBacktest") -> None:
    """The runs that changed verdict, and why runs could not be judged, under the gate's name."""
    if not g.changed and not g.not_evaluated:
        return
    out.print(f"[bold]{escape(g.step_id)} / {escape(g.gate)}[/]", highlight=False)
    for change in g.changed[:SHOWN_RUNS]:
        out.print(f"  {escape(change.run_id)} {escape(change.unit)}: {change.change.replace('_', ' ')}: "
                  f"{escape(change.reason)}", highlight=False)
    if len(g.changed) > SHOWN_RUNS:
        out.print(f"  ... {len(g.changed) - SHOWN_RUNS} more changed (--json lists them all)", highlight=False)
    for reason, count in Counter(n.reason for n in g.not_evaluated).most_common():
        runs = "run" if count == 1 else "runs"
        out.print(f"  not evaluated in {count} {runs}: {escape(reason)}", highlight=False)
