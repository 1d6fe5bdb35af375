"""The JSON documents of ``run``/``show`` and ``runs``: the keys are a contract for scripts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from orchestrator.engine.tree import OpenPause, child_pauses, child_pauses_of_runs, child_summaries
from orchestrator.spec.overrides import overrides, step_json
from orchestrator.spec.records import ModelCallView, StepRecordView, iso, live_records, split_path
from orchestrator.store import Store
from orchestrator.store.triage import RunPage, RunQuery, TriageRow


def run_document(store: Store, run_id: str) -> dict[str, Any]:
    """``{"run_id", "workflow", "status", "output", "steps": [...], "reviews", "outcomes"}``.

    ``paused_steps`` also names the pauses inside child runs by their paths (``research > retrieve``), and
    ``pauses`` describes each of them (:func:`pause_json`: path, kind, reason, the run that holds it);
    ``children`` lists the run's child runs (``{"run_id", "step", "status", "workflow"}``), and a child run's
    own document has ``parent_run_id`` and ``parent_step``.

    ``steps`` holds the latest live record of each step, in execution order (a step whose record a
    fix upstream superseded is left out until it runs again); ``attempts`` holds them all, each
    marked ``superseded``, and each review lists the records it superseded.
    """
    run = store.get_run(run_id)
    records = store.step_records(run_id)
    latest = live_records(records)
    reviews = store.reviews(run_id)
    decided = {r.record_id for r in reviews}
    overridden = overrides(records, reviews)
    superseded: dict[int, list[int]] = {}
    for rec in records:
        if rec.superseded_by is not None:
            superseded.setdefault(rec.superseded_by, []).append(rec.id)
    calls = store.model_calls([run_id])
    inside = child_pauses(store, run_id, latest) if run.status == "paused" else []
    doc = run.summary_json()
    doc.update({
        "output": run.output,
        "error": run.error,
        "inputs": run.inputs,
        "reference": run.reference,
        "parent_step": run.parent_step,
        "output_step": output_step(store, run.workflow_id),
        "steps": [step_json(rec, overridden.get(rec.unit)) for rec in grouped(latest.values())],
        "attempts": [{"step_id": r.step_id, "index": r.index, "iteration": r.iteration, "unit": r.unit,
                      "attempt": r.attempt,
                      "status": r.status, "origin": r.origin, "error": r.error, "record_id": r.id,
                      "superseded": r.superseded, "superseded_by": r.superseded_by, "skip_reason": r.skip_reason,
                      "pause": r.pause}
                     for r in records],
        "reviews": [{**r.to_json(), "superseded": superseded.get(r.id, [])} for r in reviews],
        "outcomes": [o.to_json() for o in store.outcomes(run_id)],
        "paused_steps": [r.unit for r in grouped(latest.values()) if r.status == "gate_failed" and r.id not in decided]
        + [p.path for p in inside],
        "pauses": [pause_json(OpenPause(r.unit, r)) for r in grouped(latest.values())
                   if r.status == "gate_failed" and r.id not in decided] + [pause_json(p) for p in inside],
        "children": child_summaries(store, run_id),
        "llm": call_totals(calls),
        "model_calls": [c.to_json() for c in calls],
    })
    return doc


def pause_reason(record: StepRecordView) -> str | None:
    """Why a waiting record waits: its first failing gate's reason."""
    failing = record.failed_gates
    return failing[0].reason if failing else record.error_message


def pause_reasons(record: StepRecordView) -> str:
    """Why a waiting record waits, in full: every failing gate's reason, else its message (an approval's)."""
    return "; ".join(g.reason for g in record.failed_gates) or record.error_message or ""


def pause_json(pause: OpenPause) -> dict[str, Any]:
    """``show --json``'s ``pauses`` entry: one open pause of the run's tree, ``{"path", "step", "run_id",
    "unit", "pause", "reason", "since"}``. ``path`` names it from the run shown (``research > retrieve``),
    ``step`` is the run's own unit it holds up (``research``), ``run_id`` and ``unit`` where it waits (a child
    run's id and unit for a pause inside a child), ``pause`` its kind (``gate``, ``approval``, ``tool_call``)."""
    rec = pause.record
    return {"path": pause.path, "step": split_path(pause.path)[0], "run_id": rec.run_id, "unit": rec.unit,
            "pause": rec.pause, "reason": pause_reasons(rec), "since": iso(rec.ended_at)}


def with_child_pauses(store: Store, rows: Iterable[TriageRow]) -> None:
    """Add to each paused run's waiting steps the pauses inside its child runs, by their paths (a parent paused
    by a child waits at ``research > retrieve``), with the first one's reason when the run has none of its own:
    what ``runs`` and the review app's runs list show."""
    paused = [row for row in rows if row.run.status == "paused"]
    found = child_pauses_of_runs(store, [row.run.run_id for row in paused])
    for row in paused:
        inside = found[row.run.run_id]
        if inside and not row.waiting_steps:
            row.gate_reason = pause_reason(inside[0].record)
        row.waiting_steps.extend(p.path for p in inside)


def _sums(calls: Sequence[ModelCallView]) -> dict[str, Any]:
    costs = [c.cost for c in calls if c.error is None]
    return {"input_tokens": sum(c.input_tokens for c in calls), "output_tokens": sum(c.output_tokens for c in calls),
            "cost": None if any(c is None for c in costs) else round(sum(float(c or 0) for c in costs), 8),
            "calls": len(calls), "latency": round(sum(c.latency for c in calls), 6)}


def output_step(store: Store, workflow_id: int) -> str | None:
    """The step whose output is the run's output, as the run's stored workflow says."""
    definition, _ = store.workflow_definition(workflow_id)
    steps = definition.get("steps") or []
    return definition.get("output") or (steps[-1].get("id") if steps else None)


def grouped(records: Iterable[StepRecordView]) -> list[StepRecordView]:
    """Records in execution order, each step's own record first, then a mapped step's instances by index and
    a loop's iterations by number (``summarize[3]``, ``summarize[3]#1``, ``summarize[3]#2``, ``summarize[4]``):
    instances finish in any order, and a loop's own record is written after its iterations."""
    first: dict[str, int] = {}
    ordered = list(records)
    for position, rec in enumerate(ordered):
        first.setdefault(rec.step_id, position)
    return sorted(ordered, key=lambda r: (first[r.step_id], -1 if r.index is None else r.index,
                                          -1 if r.iteration is None else r.iteration))


def call_totals(calls: Sequence[ModelCallView]) -> dict[str, Any] | None:
    """Tokens, cost and number of every model call of a run (steps, critics, judges, edit validation,
    ``ctx.llm``; retries included), with the same sums per purpose; None without any call.

    ``cost`` is None when a model's price is unknown (see ``ORCHESTRATOR_LLM_PRICES``); a call that
    failed before the model answered costs nothing.
    """
    if not calls:
        return None
    by_purpose: dict[str, list[ModelCallView]] = {}
    for c in calls:
        by_purpose.setdefault(c.purpose, []).append(c)
    return {**_sums(calls), "by_purpose": {p: _sums(cs) for p, cs in sorted(by_purpose.items())}}


def runs_document(store: Store, *, status: str | None = None, workflow: str | None = None) -> list[dict[str, Any]]:
    """``[{"run_id", "workflow", "status", "created_at", ...}]``, plus ``llm`` totals for runs that called a model."""
    return runs_page_document(store, RunQuery(status=status, workflow=workflow, limit=1000))[1]


def runs_page_document(store: Store, query: RunQuery) -> tuple[RunPage, list[dict[str, Any]]]:
    """One page of ``runs --json``: each run's summary keys, its triage keys (``outcome``, ``correct``,
    ``blamed_step``, ``waiting_step``, ``waiting_steps``, ``gate_reason``) and ``llm`` totals for runs
    that called a model (one query for the page). The page says how many runs there are in all."""
    page = store.triage_runs(query)
    with_child_pauses(store, page.rows)
    by_run: dict[str, list[ModelCallView]] = {}
    for call in store.model_calls([row.run.run_id for row in page.rows]):
        by_run.setdefault(call.run_id, []).append(call)
    docs = []
    for row in page.rows:
        doc = row.to_json()
        if row.run.run_id in by_run:
            doc["llm"] = call_totals(by_run[row.run.run_id])
        docs.append(doc)
    return page, docs


def usage_text(calls: int, input_tokens: int, output_tokens: int, cost: float | None) -> str:
    """``3 calls, 120/40 tokens, $0.000210`` (``unknown cost`` when a price is missing)."""
    price = "unknown cost" if cost is None else f"${cost:.6f}"
    return f"{calls} call{'s' if calls != 1 else ''}, {input_tokens}/{output_tokens} tokens, {price}"
