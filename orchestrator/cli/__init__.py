"""The ``orchestrator`` command: a thin face over the runner, review, store and attribution functions.

One module per command group; this module builds the app and registers each group's commands,
in the order ``--help`` lists them. The modules that define commands do without ``from __future__
import annotations``: typer reads every command's annotations at each start, and string annotations
would be compiled and evaluated there every time (about 10 ms of each command's start-up).
"""

from __future__ import annotations

import sys

import typer

from orchestrator.cli import (
    attribution,
    database,
    datasets,
    experiments,
    gating,
    inspecting,
    notifying,
    reviewing,
    running,
)
from orchestrator.cli.common import collect_after_start_up, quiet_stdout

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Run agentic workflows with quality gates, human review and step-level attribution.")

for command in (running.validate, running.schema, running.run, running.resume, reviewing.approve, reviewing.retry,
                reviewing.reject, reviewing.edit, inspecting.runs, inspecting.show, running.worker, reviewing.review,
                attribution.label, attribution.trace, attribution.attribute, attribution.replay, attribution.stats,
                attribution.report, notifying.notifications):
    app.command()(command)
app.add_typer(datasets.dataset, name="dataset")
app.add_typer(experiments.experiment, name="experiment")
app.add_typer(database.db, name="db")
app.add_typer(gating.gates, name="gates")


def main() -> None:
    """Console-script entry point.

    A reader that leaves early (``orchestrator show RUN --json | head -1``) ends the command
    quietly with exit 1, as the Python docs recommend: stdout goes to devnull, no traceback.
    Start-up spares the garbage collector its long-lived objects (:func:`collect_after_start_up`).
    """
    code: int | str | None = 0
    collect_after_start_up()
    try:
        try:
            app(prog_name="orchestrator")
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()  # output still buffered is written now, where a broken pipe can be handled
    except BrokenPipeError:
        quiet_stdout()
        code = 1
    sys.exit(code)
