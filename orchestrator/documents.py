"""The JSON documents of ``run``/``show`` and ``runs``: the keys are a contract for scripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.overrides import overrides, step_json
from orchestrator.records import StepRecordView, live_records
from orchestrator.store import Store
from orchestrator.store.triage import RunPage, RunQuery


def run_document(store: Store, run_id: str) -> dict[str, Any]:
    """``{"run_id", "workflow", "status", "output", "steps": [...], "reviews", "outcomes"}``.

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
    doc = run.summary_json()
    doc.update({
        "output": run.output,
        "error": run.error,
        "inputs": run.inputs,
        "reference": run.reference,
        "parent_step": run.parent_step,
        "steps": [step_json(rec, overridden.get(rec.step_id)) for rec in latest.values()],
        "attempts": [{"step_id": r.step_id, "attempt": r.attempt, "status": r.status, "origin": r.origin,
                      "error": r.error, "record_id": r.id, "superseded": r.superseded,
                      "superseded_by": r.superseded_by} for r in records],
        "reviews": [{**r.to_json(), "superseded": superseded.get(r.id, [])} for r in reviews],
        "outcomes": [o.to_json() for o in store.outcomes(run_id)],
        "paused_steps": [r.step_id for r in latest.values() if r.status == "gate_failed" and r.id not in decided],
        "llm": llm_totals(records),
    })
    return doc


def llm_totals(records: Sequence[StepRecordView]) -> dict[str, Any] | None:
    """Tokens and cost of every model call of the run (every attempt, retries included); None without any."""
    return usage_totals([r.llm for r in records if r.llm and r.origin == "executed"])


def usage_totals(calls: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Summed tokens, cost and model calls of LLM attempt records; None without any.

    ``cost`` is None when a model's price is unknown (see ``ORCHESTRATOR_LLM_PRICES``).
    """
    if not calls:
        return None
    costs = [c.get("cost") for c in calls]
    usage = [c.get("usage") or {} for c in calls]
    return {"input_tokens": sum(int(u.get("input_tokens") or 0) for u in usage),
            "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usage),
            "cost": None if any(c is None for c in costs) else round(sum(float(c or 0) for c in costs), 8),
            "calls": sum(int(c.get("calls") or 0) for c in calls)}


def runs_document(store: Store, *, status: str | None = None, workflow: str | None = None) -> list[dict[str, Any]]:
    """``[{"run_id", "workflow", "status", "created_at", ...}]``, plus ``llm`` totals for runs that called a model."""
    return runs_page_document(store, RunQuery(status=status, workflow=workflow, limit=1000))[1]


def runs_page_document(store: Store, query: RunQuery) -> tuple[RunPage, list[dict[str, Any]]]:
    """One page of ``runs --json``: each run's summary keys, its triage keys (``outcome``, ``correct``,
    ``blamed_step``, ``waiting_step``, ``waiting_steps``, ``gate_reason``) and ``llm`` totals for runs
    that called a model (one query for the page). The page says how many runs there are in all."""
    page = store.triage_runs(query)
    usage = store.llm_records([row.run.run_id for row in page.rows])
    docs = []
    for row in page.rows:
        doc = row.to_json()
        if row.run.run_id in usage:
            doc["llm"] = usage_totals(usage[row.run.run_id])
        docs.append(doc)
    return page, docs
