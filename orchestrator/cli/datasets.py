"""``orchestrator dataset``: named, versioned sets of examples, from stored runs or a JSONL file."""

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import MAX_COUNT, DbOption, JsonOption, guarded, open_store, out, print_json

dataset = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                      help="Datasets of examples (inputs, reference answer, label), from stored runs or a file.")

VersionOption = Annotated[int | None, typer.Option("--version", min=1, max=MAX_COUNT,
                                                  help="A dataset version (default: the latest).")]


def _short(value: object, width: int = 60) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[:width - 1] + "…"


@dataset.command()
@guarded
def create(name: Annotated[str, typer.Argument(help="The new dataset's name.")],
           from_runs: Annotated[bool, typer.Option("--from-runs", help="Take the examples from stored runs "
                                                                       "(required: the one source for now).")] = False,
           workflow: Annotated[str | None, typer.Option("--workflow", help="Only runs of this workflow.")] = None,
           outcome: Annotated[str | None, typer.Option("--outcome", help="correct | incorrect: by the run's latest "
                                                                         "outcome.")] = None,
           blamed: Annotated[str | None, typer.Option("--blamed", help="Only runs whose attribution blamed this "
                                                                       "step.")] = None,
           status: Annotated[str | None, typer.Option("--status", help="Only runs in this state.")] = None,
           since: Annotated[str | None, typer.Option("--since", help="Created since: 2026-11-01, an ISO datetime, "
                                                                     "or 2h / 7d / 2w.")] = None,
           limit: Annotated[int, typer.Option("--limit", min=1, max=MAX_COUNT,
                                                      help="At most this many runs, newest first.")] = 1000,
           description: Annotated[str | None, typer.Option("--description", help="What the dataset is for.")] = None,
           as_json: JsonOption = False, db: DbOption = None) -> None:
    """Make a dataset of stored runs: each run's inputs, reference answer and label, its run id kept."""
    from orchestrator.core.errors import InputError
    from orchestrator.service.datasets import create_from_runs
    from orchestrator.service.listing import run_query

    if not from_runs:
        raise InputError("say where the examples come from: --from-runs (or `orchestrator dataset add NAME --file "
                         "examples.jsonl`)")
    if limit < 1:
        raise InputError(f"--limit must be at least 1; got {limit}")
    query = run_query(status=status, workflow=workflow, outcome=outcome, blamed=blamed, since=since, limit=limit)
    store = open_store(db, create=False)
    view = create_from_runs(store, name, query, description=description)
    if as_json:
        print_json(view.to_json())
        return
    out.print(escape(f"dataset {view.name} version {view.version}: {view.examples} examples"), highlight=False)


@dataset.command()
@guarded
def add(name: Annotated[str, typer.Argument(help="The dataset (made when it does not exist).")],
        file: Annotated[Path, typer.Option("--file", help="JSONL: {\"inputs\": {...}, \"reference\": ..., "
                                                          "\"label\": ...} per line.")],
        as_json: JsonOption = False, db: DbOption = None) -> None:
    """Add a file's examples to a dataset as its next version."""
    from orchestrator.service.datasets import add_from_file, read_examples

    read_examples(file)  # a bad line is said before any database is opened
    store = open_store(db)
    view = add_from_file(store, name, file)
    if as_json:
        print_json(view.to_json())
        return
    out.print(escape(f"dataset {view.name} version {view.version}: {view.examples} examples"), highlight=False)


@dataset.command("list")
@guarded
def list_datasets(as_json: JsonOption = False, db: DbOption = None) -> None:
    """List datasets with their latest version and size."""
    from rich.table import Table

    store = open_store(db, create=False)
    views = store.datasets()
    if as_json:
        print_json([v.to_json() for v in views])
        return
    if not views:
        out.print("no datasets; make one with `orchestrator dataset create NAME --from-runs`", highlight=False)
        return
    table = Table(expand=False)
    for column in ("dataset", "version", "examples", "updated", "description"):
        table.add_column(column)
    for v in views:
        table.add_row(escape(v.name), str(v.version), str(v.examples), v.to_json()["updated_at"] or "",
                      escape(v.description or ""))
    out.print(table)


@dataset.command()
@guarded
def show(name: Annotated[str, typer.Argument(help="The dataset.")], version: VersionOption = None,
         as_json: JsonOption = False, db: DbOption = None) -> None:
    """One dataset and its examples (of a version)."""
    from rich.table import Table

    store = open_store(db, create=False)
    view = store.dataset(name)
    examples = store.examples(name, version=version)
    if as_json:
        print_json({**view.to_json(), "shown_version": version or view.version,
                    "examples": [e.to_json() for e in examples]})
        return
    out.print(escape(f"dataset {view.name}, version {version or view.version} of {view.version}: "
                     f"{len(examples)} examples"), highlight=False)
    table = Table(expand=False)
    for column in ("#", "version", "inputs", "reference", "label", "source run"):
        table.add_column(column)
    for e in examples:
        table.add_row(str(e.position), str(e.version), escape(_short(e.inputs)),
                      escape(_short(e.reference, 30)) if e.reference is not None else "-",
                      escape(_short(e.label, 12)) if e.label is not None else "-", e.source_run_id or "-")
    out.print(table)


@dataset.command()
@guarded
def export(name: Annotated[str, typer.Argument(help="The dataset.")], version: VersionOption = None,
           db: DbOption = None) -> None:
    """Print a dataset's examples as JSONL (what `dataset add --file` reads)."""
    import sys

    from orchestrator.service.datasets import export_lines

    store = open_store(db, create=False)
    for line in export_lines(store, name, version=version):
        sys.stdout.write(line + "\n")
