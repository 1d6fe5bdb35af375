"""The ``notifications`` command: the notification outbox, what was told to whom and how delivery went."""

import time
from typing import Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import MAX_COUNT, DbOption, JsonOption, guarded, open_store, out, print_json

STATUS_STYLE = {"delivered": "green", "pending": "yellow", "failed": "red"}


@guarded
def notifications(failed: Annotated[bool, typer.Option("--failed", help="Only those whose delivery failed: given "
                                                                         "up, or pending after a failed try.")] = False,
                  run: Annotated[str | None, typer.Option("--run", help="Only this run's (an id or a unique "
                                                                        "prefix).")] = None,
                  limit: Annotated[int, typer.Option("--limit", min=1, max=MAX_COUNT,
                                                          help="At most this many, newest first.")] = 50,
                  as_json: JsonOption = False, db: DbOption = None) -> None:
    """List notifications, newest first: event, run, target, status, tries and the last error."""
    from rich.table import Table

    from orchestrator.cli.common import resolve_run_id
    from orchestrator.spec.notify import NotifyTarget

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run) if run is not None else None
    notes = store.notifications(failed=failed, run_id=run_id, limit=limit)
    if failed and run_id is not None:
        notes = [n for n in notes if n.status == "failed" or (n.status == "pending" and n.last_error)]
    if as_json:
        print_json([{**n.to_json(), "target": NotifyTarget.model_validate(n.target).shown()} for n in notes])
        return
    if not notes:
        out.print("no notifications" + (" whose delivery failed" if failed else ""), highlight=False)
        return
    table = Table()
    for col in ("id", "age", "event", "run", "target", "status", "tries", "last error"):
        table.add_column(col, no_wrap=col not in ("target", "last error"),
                         overflow="fold", justify="right" if col in ("id", "tries") else "left")
    for n in notes:
        style = STATUS_STYLE.get(n.status, "")
        table.add_row(str(n.id), _age(n.created_at), n.event, n.run_id, escape(NotifyTarget.model_validate(n.target)
                                                                              .shown()),
                      f"[{style}]{n.status}[/]" if style else n.status, str(n.tries), escape(n.last_error or ""))
    out.print(table, soft_wrap=False)


def _age(ts: float) -> str:
    delta = max(0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit}"
    return f"{int(delta)}s"
