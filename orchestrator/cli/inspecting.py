"""Commands that read runs: runs, show."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from orchestrator.cli.common import STATUS_STYLE, DbOption, JsonOption, guarded, open_store, out, print_json


def _age(ts: float) -> str:
    delta = max(0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit}"
    return f"{int(delta)}s"



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
    store = open_store(db, create=False)
    docs = runs_document(store, status=status, workflow=workflow)
    if as_json:
        print_json(docs)
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



@guarded
def show(run_id: str, as_json: JsonOption = False, db: DbOption = None) -> None:
    """One run, step by step, with gate results, reviews and outcomes."""
    from orchestrator.documents import run_document

    store = open_store(db, create=False)
    doc = run_document(store, run_id)
    if as_json:
        print_json(doc)
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
    if doc.get("llm"):
        t = doc["llm"]
        cost = "unknown cost" if t["cost"] is None else f"${t['cost']:.6f}"
        out.print(f"model calls: {t['calls']}, {t['input_tokens']} tokens in, {t['output_tokens']} out, {cost}",
                  highlight=False)
    if doc.get("error"):
        out.print(f"error: {escape(doc['error'])}", highlight=False, soft_wrap=True)


