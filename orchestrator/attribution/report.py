"""The reporting checklist of seed 001 over stored runs: is what we measure reproducible?

1. trajectory length distribution (steps executed and attempts per run, not just the max);
2. outcome distribution: values, share correct, share of non-zero reward, by source;
3. environment stochasticity: per step, how often the same inputs gave different outputs (compared
   through the digests written with each record; see :mod:`orchestrator.store.digests`);
4. run composition: runs by kind (production runs, replays, counterfactuals), status and version;
5. credit assignment granularity: which attribution methods ran, over steps or agents;
6. baseline behaviour: which steps declare a baseline, and early vs recent mean outcome.

:func:`build_report` reads the store and returns a :class:`ChecklistReport` (pydantic).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.jsonio import loads
from orchestrator.engine.workflow_filter import check_workflow_filter
from orchestrator.spec.records import iso
from orchestrator.store import Store
from orchestrator.store.analytics import PRODUCTION_KINDS, NondeterminismCounts


class Distribution(BaseModel):
    count: int = 0
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    max: float | None = None
    mean: float | None = None
    histogram: dict[str, int] = Field(default_factory=dict)


class StepNondeterminism(BaseModel):
    step_id: str
    repeated_inputs: int
    """Distinct inputs seen in two or more runs."""
    varied: int
    """Of those, how many gave different outputs."""
    rate: float | None
    not_covered: int = 0
    """Runs whose attempt has no inputs digest (stored before digests were written): left out of the rate."""


class ChecklistReport(BaseModel):
    workflow: str | None
    generated_at: str
    runs: int
    trajectory_steps: Distribution
    trajectory_attempts: Distribution
    outcomes: dict[str, Any]
    nondeterminism: list[StepNondeterminism]
    composition: dict[str, Any]
    granularity: dict[str, Any]
    baseline: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def distribution(values: list[float]) -> Distribution:
    return distribution_of_counts(Counter(values))


def distribution_of_counts(counts: Mapping[float, int]) -> Distribution:
    """The distribution of values given as value -> how many times it occurred (what GROUP BY returns)."""
    items = sorted((v, n) for v, n in counts.items() if n > 0)
    total = sum(n for _, n in items)
    if not total:
        return Distribution()

    def pct(q: float) -> float:
        rank, seen = min(total - 1, max(0, math.ceil(q * total) - 1)), 0
        for value, n in items:
            seen += n
            if seen > rank:
                return value
        return items[-1][0]

    if len(items) <= 10:
        histogram = {f"{v:g}": n for v, n in items}
    else:
        lo, hi = items[0][0], items[-1][0]
        width = (hi - lo) / 10 or 1
        bins: Counter[int] = Counter()
        for v, n in items:
            bins[min(9, int((v - lo) / width))] += n
        histogram = {f"{lo + i * width:g}-{lo + (i + 1) * width:g}": bins.get(i, 0) for i in range(10)}
    return Distribution(count=total, min=items[0][0], p50=pct(0.5), p90=pct(0.9), max=items[-1][0],
                        mean=round(sum(v * n for v, n in items) / total, 4), histogram=histogram)


def nondeterminism(rows: Sequence[NondeterminismCounts], prefix: str = "") -> list[StepNondeterminism]:
    """Per step: among inputs seen in two or more runs, the share that produced different outputs."""
    return [StepNondeterminism(step_id=prefix + r.step_id, repeated_inputs=r.repeated_inputs, varied=r.varied,
                               rate=round(r.varied / r.repeated_inputs, 4) if r.repeated_inputs else None,
                               not_covered=r.not_covered) for r in rows]


def _trajectories(store: Store, workflow: str | None) -> tuple[Distribution, Distribution]:
    """Steps and attempts per production run (runs without any record count as zero)."""
    steps: Counter[float] = Counter()
    attempts: Counter[float] = Counter()
    for row in store.trajectory_counts(workflow):
        steps[float(row.steps)] += row.runs
        attempts[float(row.attempts)] += row.runs
    return distribution_of_counts(steps), distribution_of_counts(attempts)


def _outcomes(store: Store, workflow: str | None, runs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The outcome section and the early/recent means of the baseline section."""
    window = max(1, runs // 10)
    summary = store.outcome_summary(workflow, window=window)
    scored = summary.scored
    doc = {
        "scored_runs": scored, "unscored_runs": runs - scored,
        "value": distribution_of_counts(summary.values).model_dump(),
        "share_nonzero_reward": round(summary.nonzero / scored, 4) if scored else None,
        "share_correct": round(summary.correct / scored, 4) if scored else None,
        "by_source": summary.by_source, "termination": summary.by_termination,
    }
    means = {"early_mean_outcome": _round(summary.early_mean), "recent_mean_outcome": _round(summary.recent_mean),
             "window_runs": window}
    return doc, means


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _sum_counts(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return dict(total)


def _granularity(store: Store, names: Sequence[str]) -> dict[str, Any]:
    rows = [row for name in names for row in store.attribution_counts(name)]
    by_method: Counter[str] = Counter()
    by_granularity: Counter[str] = Counter()
    for row in rows:
        by_method[row.method] += row.records
        by_granularity[str((loads(row.params) or {}).get("by", "step"))] += row.records
    return {"records": sum(r.records for r in rows), "by_method": dict(by_method),
            "by_granularity": dict(by_granularity), "replay_step_executions": sum(r.cost for r in rows)}


def build_report(store: Store, workflow: str | None = None, *, now: float | None = None) -> ChecklistReport:
    """The checklist over one workflow's stored runs, or over every workflow when ``workflow`` is None.

    Aggregated reads only (:mod:`orchestrator.store.analytics`): trajectories and non-determinism come
    from the SQL stores' summary (as many rows as distinct trajectories and steps), composition and
    attribution methods from GROUP BY over runs and attribution records; only the outcome section reads
    one row per scored run (its early and recent means need the runs in order).
    """
    counts = store.run_counts(workflow)
    production = [c for c in counts if c.kind in PRODUCTION_KINDS]
    if not production:
        check_workflow_filter(store, workflow)  # a name no run has is a typo: say which names have runs
    names = sorted({c.workflow for c in production})
    runs = sum(c.runs for c in production)
    definitions = {c.workflow_id: store.workflow_definition(c.workflow_id)[0] for c in production}
    versions: Counter[str] = Counter()
    for c in production:
        versions[f"{c.workflow} v{definitions[c.workflow_id].get('version', 1)} (#{c.workflow_id})"] += c.runs
    composition = {
        "by_kind": _sum_counts({c.kind: c.runs} for c in counts),
        "by_status": _sum_counts({c.status: c.runs} for c in production), "by_version": dict(versions),
        "workflows": names,
        "filters": "production runs only (kind=run) for lengths, outcomes and non-determinism; "
                   "replays and forks are counted in by_kind",
    }
    steps, attempts = _trajectories(store, workflow)
    outcome_doc, means = _outcomes(store, workflow, runs)
    with_baseline = sorted({s["id"] for d in definitions.values() for s in d.get("steps", []) if s.get("baseline")})
    return ChecklistReport(
        workflow=workflow, generated_at=iso(now or time.time()) or "", runs=runs, trajectory_steps=steps,
        trajectory_attempts=attempts, outcomes=outcome_doc,
        nondeterminism=[n for name in names for n in nondeterminism(store.nondeterminism_counts(name),
                                                                    f"{name}:" if len(names) > 1 else "")],
        composition=composition, granularity=_granularity(store, names),
        baseline={"steps_with_baseline": with_baseline, **means})
