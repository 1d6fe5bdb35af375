"""Commands that read runs: runs, show."""

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.bind.approvals import AWAITING_APPROVAL
from orchestrator.cli.common import (
    DbOption,
    JsonOption,
    RunArgument,
    err,
    guarded,
    open_store,
    out,
    print_json,
    resolve_run_id,
    status_markup,
)
from orchestrator.cli.fixes import print_critic_fixes, print_superseded

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console
    from rich.table import Table

    from orchestrator.spec.records import StepRecordView


BLAMED_HELP = ("Only runs whose latest attribution blamed this step, or a part of it: an instance, an iteration, "
               "a step inside its child run.")


@guarded
def runs(status: Annotated[str | None, typer.Option("--status", help="Only runs in this state.")] = None,
         workflow: Annotated[str | None, typer.Option("--workflow", help="Only runs of this workflow.")] = None,
         outcome: Annotated[str | None, typer.Option("--outcome", help="correct | incorrect: by the run's latest "
                                                                       "outcome.")] = None,
         blamed: Annotated[str | None, typer.Option("--blamed", help=BLAMED_HELP)] = None,
         since: Annotated[str | None, typer.Option("--since", help="Created since: 2026-11-01, an ISO datetime, "
                                                                   "or 2h / 7d / 2w.")] = None,
         kind: Annotated[str, typer.Option("--kind", help="original | replay | counterfactual | child | experiment "
                                                          "(child: the child runs of workflow: steps; their parents "
                                                          "list where they wait)")] = "original",
         limit: Annotated[int, typer.Option("--limit", help="Runs per page.")] = 50,
         offset: Annotated[int, typer.Option("--offset", help="Runs to skip (newest first).")] = 0,
         full: Annotated[bool, typer.Option("--full", help="Print whole run ids, every place a run waits and "
                                                           "every value whole (else one line per run, fitted "
                                                           "to the terminal).")] = False,
         as_json: JsonOption = False, db: DbOption = None) -> None:
    """List runs, newest first, for triage: outcome, where a paused run waits and why, blame, model cost.

    One line per run: a run is named by the shortest prefix of its id (8 characters or more) that names it
    alone, which every command takes for the run; a run waiting in many places shows the first and a count;
    at a narrow width the least important columns are left out."""
    from orchestrator.cli.run_list import runs_table
    from orchestrator.engine.documents import runs_page_document
    from orchestrator.engine.workflow_filter import check_workflow_filter
    from orchestrator.service.listing import run_query
    from orchestrator.store.run_prefix import short_run_ids

    query = run_query(status=status, workflow=workflow, outcome=outcome, blamed=blamed, since=since, kind=kind,
                      limit=limit, offset=offset)
    store = open_store(db, create=False)
    page, docs = runs_page_document(store, query)
    if not docs and workflow is not None:  # none listed: a typo in the name, or none in this state?
        check_workflow_filter(store, workflow)
    if as_json:
        print_json(docs)
        if page.more:
            err.print(page.range_note(), highlight=False)
        return
    if not docs and not page.offset:
        out.print("no runs", highlight=False)
    elif docs:
        ids = [d["run_id"] for d in docs]
        shown = dict(zip(ids, ids, strict=True)) if full else short_run_ids(store, ids)
        out.print(runs_table(docs, shown.__getitem__, width=out.width, full=full), soft_wrap=False)
    if page.more or page.offset:
        out.print(page.range_note(), highlight=False)


def _preview(value: Any, width: int = 48) -> str:
    text = json.dumps(value, default=str) if value is not None else ""
    return text if len(text) <= width else text[: width - 1] + "…"



NARROW = 110
"""Below this many columns ``show`` prints one block per step instead of a table."""


def step_note(step: dict[str, Any], width: int | None = 48) -> str:
    """A step's error, else its output as JSON (cut to ``width`` characters; None: in full), marked with
    how the output came to be when a reviewer gave it, and with any gate it passed despite failing."""
    from orchestrator.spec.overrides import override_note

    if step.get("summary"):
        return str(step["summary"])
    waiting = f"{AWAITING_APPROVAL}: "
    if step["error"] and step["error"].startswith(waiting):  # the proposal a person decides on
        proposal = json.dumps(step["output"], default=str) if width is None else _preview(step["output"], width)
        note = f"{step['error'][len(waiting):]}: {proposal}"
    elif step["error"]:
        note = step["error"]
    elif step.get("skip_reason"):
        note = f"skipped: {step['skip_reason']}"
    elif width is None:
        note = json.dumps(step["output"], default=str) if step["output"] is not None else ""
    else:
        note = _preview(step["output"], width)
    if step["origin"] != "executed":
        note = f"[{step['origin']}] {note}"
    override = override_note(step)
    return f"{override} | {note}" if override else note


def step_status(step: dict[str, Any], doc: dict[str, Any]) -> str:
    """A ``show`` entry's status as printed: a pause for an approval (an approval step, a tool call) reads
    ``waiting`` while open, then what was decided; everything else, a pause at failed gates included, its
    stored status (the JSON keeps ``status`` and says the kind of pause in ``pause``)."""
    from orchestrator.spec.records import shown_status

    decision = next((r["decision"] for r in doc.get("reviews", []) if r.get("record_id") == step.get("record_id")),
                    None)
    waiting = decision is None and (step.get("unit") or step["step_id"]) in (doc.get("paused_steps") or [])
    return shown_status(step["status"], step.get("pause"), waiting=waiting, decision=decision)


def waiting_in_children(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A row for each of the run's own units that waits on a pause inside the child run it started: the unit
    has no record until its child finishes, yet it is the run's step that holds the run up."""
    from orchestrator.spec.records import PATH_SEPARATOR, parse_unit

    recorded = {s.get("unit") or s["step_id"] for s in doc["steps"] if s["status"] != "failed"}
    started = {c["step"]: c["run_id"] for c in doc.get("children") or []}
    rows: dict[str, dict[str, Any]] = {}
    for pause in doc.get("pauses") or []:
        unit = pause["step"]
        if PATH_SEPARATOR not in pause["path"] or unit in recorded:
            continue
        inner = pause["path"][len(unit) + len(PATH_SEPARATOR):]
        note = f"in child run {started.get(unit, pause['run_id'])}: paused at {inner}: {pause['reason']}"
        if unit in rows:
            rows[unit]["summary"] += f"; {inner}: {pause['reason']}"
            continue
        rows[unit] = {"step_id": unit, "unit": unit, "agent": parse_unit(unit)[0], "status": "waiting",
                      "attempt": 0, "duration": 0.0, "gates": [], "error": None, "output": None,
                      "origin": "executed", "summary": note}
    return list(rows.values())


def gate_marks(step: dict[str, Any]) -> str:
    """``✓range ✗min_items``: each gate's verdict on the step (rich markup)."""
    return " ".join(("[green]✓[/]" if g["passed"] else "[yellow]![/]" if g.get("error") else "[red]✗[/]")
                    + escape(g["gate"]) for g in step["gates"])


def print_steps(doc: dict[str, Any], console: "Console", *, full: bool = False) -> None:
    """The steps of a ``show`` document: a table from ``NARROW`` columns up, else one block per step.

    Each output, error, prompt and answer is cut to one line of the console's width (a pipe's too: a
    whole JSON output can run to thousands of characters); ``full`` prints every value whole instead, one
    block per step, whatever the width (``show --full``).
    """
    doc = {**doc, "steps": [*doc["steps"], *waiting_in_children(doc)]}
    if console.width >= NARROW and not full:
        console.print(steps_table(doc))
        print_model_exchanges(doc, console)
    else:
        print_step_blocks(doc, console, cut=not full)


def last_prompt(llm: dict[str, Any]) -> str:
    """The prompt of an LLM step's attempt: the last user message it sent the model."""
    for message in reversed(llm.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, default=str)
    return ""


def exchange_lines(step: dict[str, Any]) -> list[tuple[str, str]]:
    """``[("prompt", ...), ("answer", ...)]`` for a step that called a model (empty for any other), each on one
    line (line breaks shown as ``⏎``, so a cut line still reads as one)."""
    llm = step.get("llm")
    if not isinstance(llm, dict):
        return []
    return [(label, text.replace("\n", " ⏎ ")) for label, text in
            (("prompt", last_prompt(llm)), ("answer", str(llm.get("response") or "")))]


def print_model_exchanges(doc: dict[str, Any], console: "Console") -> None:
    """Below the table: each LLM step's prompt and answer, each cut to one line (``show --full``: whole)."""
    for s in doc["steps"]:
        for label, text in exchange_lines(s):
            line = f"{s.get('unit') or s['step_id']} {label}: {text}"
            console.print(escape(line), highlight=False, soft_wrap=False, overflow="ellipsis", no_wrap=True)


def steps_table(doc: dict[str, Any]) -> "Table":
    """One row per step: id, agent, status, attempt, duration, gates, error or output preview."""
    from rich.table import Table

    table = Table(expand=True)
    for col, kw in (("step", {}), ("agent", {}), ("status", {}), ("try", {"justify": "right"}),
                    ("duration", {"justify": "right"}), ("gates", {}), ("error / output", {"ratio": 1})):
        table.add_column(col, **kw)
    for s in shown_steps(doc["steps"]):
        table.add_row(escape(step_label(s)), escape(s["agent"]), status_markup(step_status(s, doc)), str(s["attempt"]),
                      f"{s['duration']:.3f}s", gate_marks(s), escape(step_note(s)))
    return table


INSTANCES_SHOWN = 20
"""A mapped step with more instances than this shows a summary line plus the ones waiting or failed."""


def is_part(step: dict[str, Any]) -> bool:
    """Whether a step entry is part of its step: an instance of a map, or an iteration of a loop."""
    return step.get("index") is not None or step.get("iteration") is not None


def step_label(step: dict[str, Any]) -> str:
    """``summarize`` for a step (a mapped step's collected list, a loop's result), ``  summarize[7]`` for an
    instance, ``  improve#2`` for an iteration of a loop."""
    if not is_part(step):
        return str(step.get("label") or step["step_id"])
    return f"  {step.get('unit') or step['step_id']}"


def shown_steps(steps: "Sequence[dict[str, Any]]") -> list[dict[str, Any]]:
    """The rows ``show`` prints: every step, and each mapped step's instances (and a loop's iterations) under
    it, a map's collapsed beyond ``INSTANCES_SHOWN`` instances to a summary row (``summarize[0..49]: 45
    succeeded, 3 skipped, 2 gate_failed``) with the ones that wait or failed still listed one by one."""
    parts: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        if is_part(s):
            parts.setdefault(s["step_id"], []).append(s)
    rows: list[dict[str, Any]] = []
    placed: set[str] = set()
    for s in steps:
        sid = s["step_id"]
        if is_part(s) and sid in placed:
            continue
        if not is_part(s):
            rows.append(s)
        if sid in parts and sid not in placed:
            placed.add(sid)
            rows.extend(instance_rows(s, parts[sid]))
    return rows


def instance_rows(first: dict[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len({s.get("index") for s in items}) <= INSTANCES_SHOWN:
        return items
    counts: dict[str, int] = {}
    for s in items:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    top = max(s["index"] for s in items if s.get("index") is not None)
    summary = {**first, "label": f"  {first['step_id']}[0..{top}]", "index": None, "iteration": None, "gates": [],
               "error": None,
               "status": "failed" if counts.get("failed") else "gate_failed" if counts.get("gate_failed")
               else "succeeded", "attempt": max(s["attempt"] for s in items),
               "duration": max(s["duration"] for s in items),
               "summary": f"{len(items)} {'records' if any(s.get('iteration') for s in items) else 'instances'}: "
                          + ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))}
    return [summary, *(s for s in items if s["status"] in ("failed", "gate_failed"))]


def print_step_blocks(doc: dict[str, Any], console: "Console", *, cut: bool) -> None:
    """Each step as a few lines: id, status, agent, attempt and duration; its gates; its error or output
    (with ``cut``, one line of the console's width)."""
    for s in shown_steps(doc["steps"]):
        status = status_markup(step_status(s, doc))
        console.print(f"[bold]{escape(step_label(s))}[/]  {status}  agent {escape(s['agent'])}  "
                      f"try {s['attempt']}  {s['duration']:.3f}s", highlight=False)
        if s["gates"]:
            console.print(f"  gates: {gate_marks(s)}", highlight=False)
        label = "  error: " if s["error"] else "  output: "
        lines = [(label, step_note(s, max(8, console.width - len(label)) if cut else None))]
        lines += [(f"  {name}: ", text) for name, text in exchange_lines(s)]
        for label, note in lines:
            if cut:
                console.print(label + escape(note), highlight=False, soft_wrap=False, overflow="ellipsis",
                              no_wrap=True)
            else:
                console.print(label + escape(note), highlight=False, soft_wrap=True)  # never cut, never broken


@guarded
def show(run_id: RunArgument, as_json: JsonOption = False, db: DbOption = None,
         traceback: Annotated[bool, typer.Option("--traceback", help="Also print the full traceback of every "
                                                                    "failed attempt.")] = False,
         full: Annotated[bool, typer.Option("--full", help="Print every output, error, prompt and answer whole "
                                                           "(else each is cut to one line of the terminal).")]
         = False) -> None:
    """One run, step by step, with gate results, reviews and outcomes."""
    from orchestrator.engine.documents import run_document, usage_text

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    doc = run_document(store, run_id)
    if as_json:
        print_json(doc)
        return
    out.print(f"run [bold]{escape(doc['run_id'])}[/]  workflow {escape(doc['workflow'])}  "
              f"{status_markup(doc['status'])}",
              highlight=False)
    if doc.get("parent_run_id"):
        relation = "child run of" if doc.get("kind") == "child" else "forked from"
        out.print(f"{relation} {escape(doc['parent_run_id'])} at step {escape(str(doc.get('parent_step')))}",
                  highlight=False)
    print_steps(doc, out, full=full)
    print_children(doc)
    for pause in doc.get("pauses") or []:
        out.print(f"paused at [yellow]{escape(pause['path'])}[/]: {escape(pause['reason'])}", highlight=False,
                  soft_wrap=True)
    for s in doc["steps"]:
        for g in s["gates"]:
            if not g["passed"]:
                extra = ""
                if g["gate"] == "critic" and g["details"].get("verifies"):
                    extra = f" (verifies {', '.join(map(str, g['details']['verifies']))})"
                mark = "[yellow]! gate error[/]" if g.get("error") else "[red]✗[/]"
                out.print(f"{mark} {escape(s.get('unit') or s['step_id'])} / {escape(g['gate'] + extra)}: "
                          f"{escape(g['reason'])}",
                          highlight=False, soft_wrap=True)
    print_critic_fixes(store, run_id)
    print_superseded(doc)
    for r in doc["reviews"]:
        out.print(escape(f"review: {r['decision']} {r['step_id']} by {r['reviewer']} at {r['created_at']}")
                  + (" (forced)" if r["forced"] else "") + (f": {escape(r['comment'])}" if r["comment"] else ""),
                  highlight=False, soft_wrap=True)
    for o in doc["outcomes"]:
        verdict = "correct" if o["correct"] else ("incorrect" if o["correct"] is False else "")
        out.print(escape(f"outcome: {o['value']:.3f} {verdict} ({o['source']}, {o['termination']})"), highlight=False)
        if o.get("evaluator_reason"):
            out.print(f"  why: {escape(o['evaluator_reason'])}", highlight=False, soft_wrap=True)
    skipped_output = next((s for s in doc["steps"] if s["step_id"] == doc.get("output_step")
                           and not is_part(s) and s["status"] == "skipped"), None)
    if doc["status"] == "succeeded" and skipped_output is not None:
        out.print(f"output: null (the output step {escape(skipped_output['step_id'])} was skipped: "
                  f"{escape(skipped_output.get('skip_reason') or '')})", highlight=False, soft_wrap=True)
    elif doc["status"] == "succeeded":
        whole = json.dumps(doc["output"], default=str)
        out.print(f"output: {escape(whole if full else _preview(doc['output'], max(8, out.width - 8)))}",
                  highlight=False, soft_wrap=True)
    if doc.get("llm"):
        t = doc["llm"]
        cost = "unknown cost" if t["cost"] is None else f"${t['cost']:.6f}"
        out.print(f"model calls: {t['calls']}, {t['input_tokens']} tokens in, {t['output_tokens']} out, {cost}",
                  highlight=False)
        for purpose, u in t["by_purpose"].items():
            out.print(f"  {purpose}: {usage_text(u['calls'], u['input_tokens'], u['output_tokens'], u['cost'])}",
                      highlight=False)
    if doc.get("error"):
        out.print(f"error: {escape(doc['error'])}", highlight=False, soft_wrap=True)
    if traceback:
        print_tracebacks(store.step_records(run_id))


def print_children(doc: dict[str, Any]) -> None:
    """The child runs the run's ``workflow:`` steps started, by the unit that started each, so a reader can
    open one with ``show CHILD``."""
    if not doc.get("children"):
        return
    out.print("child runs (open one with `orchestrator show CHILD`):", highlight=False)
    width = max(len(c["step"]) for c in doc["children"])
    for child in doc["children"]:
        out.print(f"  {escape(child['step'].ljust(width))}  {status_markup(child['status'])}  "
                  f"{escape(child['run_id'])}  ({escape(child['workflow'])})", highlight=False)


def print_tracebacks(records: "Sequence[StepRecordView]") -> None:
    """The stored traceback of every failed attempt, oldest first (``show --traceback``)."""
    failed = [r for r in records if r.status == "failed" and r.error_type != "GateFailed"]
    if not failed:
        out.print("no failed attempts: no tracebacks", highlight=False)
    for rec in failed:
        out.print(f"\n[bold]traceback of {escape(rec.step_id)}[/] attempt {rec.attempt} (record {rec.id}): "
                  f"{escape(rec.error or '')}", highlight=False, soft_wrap=True)
        out.print(escape(rec.traceback.rstrip()) if rec.traceback else "  (no traceback stored: the failure was not "
                  "an exception raised by the step, or it timed out)", highlight=False, soft_wrap=True)


