"""The ``orchestrator`` command: a thin face over the runner, review, store and attribution functions.

One module per command group; this module builds the app and registers each group's commands,
in the order ``--help`` lists them.
"""

from __future__ import annotations

import typer

from orchestrator.cli import attribution, inspecting, reviewing, running

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Run agentic workflows with quality gates, human review and step-level attribution.")

for command in (running.validate, running.schema, running.run, running.resume, reviewing.approve, reviewing.retry,
                reviewing.reject, reviewing.edit, inspecting.runs, inspecting.show, running.worker, reviewing.review,
                attribution.label, attribution.trace, attribution.attribute, attribution.replay, attribution.stats,
                attribution.report):
    app.command()(command)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="orchestrator")
