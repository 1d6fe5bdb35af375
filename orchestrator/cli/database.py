"""``orchestrator db``: the database's schema revision, and upgrading it explicitly.

Opening a store already upgrades its schema; ``db upgrade`` does it on purpose (before starting
many workers, or to see what changes), and ``db revision`` says where a database stands.
"""

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import DbOption, JsonOption, guarded, out, print_json

db = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                 help="The database schema: its revision, and upgrading it.")


def schema_url(option: str | None) -> tuple[str, str]:
    """(the SQLAlchemy URL of ``--db``, its display form); InputError for a database with no schema
    (``memory://``), an empty ``--db``, or a SQLite path that holds no database or a damaged one."""
    from orchestrator.core.errors import InputError
    from orchestrator.store import default_url, normalize_url

    if option is not None and not option.strip():
        raise InputError("--db is empty; give a database URL such as sqlite:///path/to/orchestrator.db "
                         "(or leave --db out for the default)")
    url = normalize_url(option or default_url())
    display = url.split("@")[-1] if "@" in url else url
    if url.startswith("memory://"):
        raise InputError("memory:// keeps nothing between commands and has no schema; give a SQLite path or a "
                         "PostgreSQL URL with --db")
    if not url.startswith("sqlite"):
        return url, display
    from orchestrator.store.sqlite import connect_target, corrupt, split_synchronous, sqlite_file_problem

    _target, path, sql_url = connect_target(split_synchronous(url)[0])
    if path is not None:
        display = path
        file = Path(path)
        if not file.is_file():
            raise InputError(f"no database at {path}; nothing has run with this --db yet "
                             "(check --db or ORCHESTRATOR_DB)")
        why = sqlite_file_problem(file)
        if why:
            raise corrupt(path, why)
    return sql_url, display


def cannot_open(display: str, exc: Exception) -> Exception:
    """A driver's error on connecting, as one line naming the database (exit 2)."""
    from orchestrator.core.errors import InputError

    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return InputError(f"cannot open the database {display}: {detail}; check --db or ORCHESTRATOR_DB")


@db.command()
@guarded
def upgrade(db: DbOption = None) -> None:
    """Bring the database's schema to this orchestrator's revision (opening a store does it too)."""
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.store.migrate import ensure_schema

    url, display = schema_url(db)
    try:
        change = ensure_schema(url)
    except SQLAlchemyError as exc:
        raise cannot_open(display, exc) from None
    said = {"current": f"{display} is at {change.after} (head); nothing to do",
            "created": f"{display}: created the schema at {change.after}",
            "adopted": f"{display}: recorded the release schema as {change.before or '0001'} and upgraded it "
                       f"to {change.after}",
            "upgraded": f"{display}: upgraded the schema from {change.before} to {change.after}"}
    out.print(said[change.action], highlight=False, soft_wrap=True)


@db.command()
@guarded
def revision(as_json: JsonOption = False, db: DbOption = None,
             check: Annotated[bool, typer.Option("--check", help="Exit 1 when an upgrade is pending.")] = False,
             ) -> None:
    """The schema revision stored in the database beside the one this orchestrator writes (head)."""
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.store.migrate import (
        HEAD_REVISION,
        alembic_config,
        known_revisions,
        refuse_unless_ours,
        schema_state,
        stored_revision,
        table_names,
    )

    url, display = schema_url(db)
    try:
        tables = table_names(url)
        if schema_state(tables) == "foreign":  # its alembic_version, if any, is not ours
            refuse_unless_ours(display, tables, create=False)
        stored = stored_revision(url)
    except SQLAlchemyError as exc:
        raise cannot_open(display, exc) from None
    current = stored == HEAD_REVISION
    newer = stored is not None and not current and stored not in known_revisions(alembic_config())
    if as_json:
        print_json({"database": display, "stored": stored, "head": HEAD_REVISION, "current": current,
                    "newer": newer})
    else:
        out.print(f"stored: {stored or 'none'}\nhead:   {HEAD_REVISION}", highlight=False)
        if newer:
            out.print(f"a newer orchestrator wrote this database (schema {stored}; this one knows revisions up to "
                      f"{HEAD_REVISION}): upgrade the package; `orchestrator db upgrade` cannot downgrade it",
                      highlight=False, soft_wrap=True)
        elif not current:
            out.print("an upgrade is pending: it applies when a command opens the database, or now with "
                      "`orchestrator db upgrade`", highlight=False, soft_wrap=True)
    if check and not current:
        raise typer.Exit(2 if newer else 1)  # newer: this orchestrator cannot use it at all
