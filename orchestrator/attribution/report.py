"""The reporting checklist of seed 001 over stored runs: is what we measure reproducible?

1. trajectory length distribution (steps executed and attempts per run, not just the max);
2. outcome distribution: values, share correct, share of non-zero reward, by source;
3. environment stochasticity: per step, how often the same inputs gave different outputs;
4. run composition: runs by kind (production runs, replays, counterfactuals), status and version;
5. credit assignment granularity: which attribution methods ran, over steps or agents;
6. baseline behaviour: which steps declare a baseline, and early vs recent mean outcome.

:func:`build_report` reads the store and returns a :class:`ChecklistReport` (pydantic).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.attribution.cache import digest, get_field
from orchestrator.attribution.stats import MAX_RUNS
from orchestrator.jsonio import loads
from orchestrator.records import iso
from orchestrator.store import StepHistoryRow, Store


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
    if not values:
        return Distribution()
    ordered = sorted(values)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    distinct = sorted(set(ordered))
    if len(distinct) <= 10:
        histogram = {f"{v:g}": ordered.count(v) for v in distinct}
    else:
        lo, hi = ordered[0], ordered[-1]
        width = (hi - lo) / 10 or 1
        counts = Counter(min(9, int((v - lo) / width)) for v in ordered)
        histogram = {f"{lo + i * width:g}-{lo + (i + 1) * width:g}": counts.get(i, 0) for i in range(10)}
    return Distribution(count=len(ordered), min=ordered[0], p50=pct(0.5), p90=pct(0.9), max=ordered[-1],
                        mean=round(sum(ordered) / len(ordered), 4), histogram=histogram)


def _resolved_inputs(inputs: Any, outputs: dict[int, Any]) -> str:
    """The digest of a record's inputs with ``{"$record": id}`` links replaced by the values they name."""
    if not isinstance(inputs, dict):
        return digest(inputs)
    resolved = {}
    for param, value in inputs.items():
        if isinstance(value, dict) and "$record" in value:
            target = outputs.get(value["$record"])
            if value.get("field"):
                try:
                    target = get_field(target, value["field"])
                except Exception:
                    target = None
            resolved[param] = target
        else:
            resolved[param] = value
    return digest(resolved)


def nondeterminism(history: list[StepHistoryRow]) -> list[StepNondeterminism]:
    """Per step: among inputs seen in two or more runs, the share that produced different outputs."""
    outputs = {row.record_id: loads(row.output) for row in history if row.output is not None}
    first: dict[tuple[str, str], tuple[str, str]] = {}
    order: list[str] = []
    for row in history:
        if row.output is None or row.status not in ("succeeded", "gate_failed"):
            continue
        if row.step_id not in order:
            order.append(row.step_id)
        slot = (row.run_id, row.step_id)
        if slot not in first:
            first[slot] = (_resolved_inputs(loads(row.inputs), outputs), digest(outputs[row.record_id]))
    groups: dict[tuple[str, str], set[str]] = {}
    sizes: Counter[tuple[str, str]] = Counter()
    for (_, sid), (inputs_key, output_key) in first.items():
        groups.setdefault((sid, inputs_key), set()).add(output_key)
        sizes[(sid, inputs_key)] += 1
    result = []
    for sid in order:
        repeated = [key for key in groups if key[0] == sid and sizes[key] >= 2]
        varied = [key for key in repeated if len(groups[key]) > 1]
        result.append(StepNondeterminism(step_id=sid, repeated_inputs=len(repeated), varied=len(varied),
                                         rate=round(len(varied) / len(repeated), 4) if repeated else None))
    return result


def build_report(store: Store, workflow: str | None = None, *, now: float | None = None) -> ChecklistReport:
    """The checklist over one workflow's stored runs, or over every workflow when ``workflow`` is None."""
    every = store.list_runs(workflow=workflow, kind=None, limit=MAX_RUNS)
    runs = sorted((r for r in every if r.kind == "run"), key=lambda r: r.created_at)
    names = sorted({r.workflow for r in runs})
    history: list[StepHistoryRow] = []
    for name in names:
        rows = store.step_history(name)
        if len(names) > 1:
            rows = [dataclasses.replace(row, step_id=f"{name}:{row.step_id}") for row in rows]
        history.extend(rows)
    steps_per_run: Counter[str] = Counter()
    attempts_per_run: Counter[str] = Counter()
    seen_steps: set[tuple[str, str]] = set()
    for row in history:
        if row.status == "skipped":
            continue
        attempts_per_run[row.run_id] += 1
        if (row.run_id, row.step_id) not in seen_steps:
            seen_steps.add((row.run_id, row.step_id))
            steps_per_run[row.run_id] += 1
    latest_outcomes = {}
    for run in runs:
        found = store.outcomes(run.run_id)
        if found:
            latest_outcomes[run.run_id] = found[-1]
    values = [o.value for o in latest_outcomes.values()]
    outcome_doc = {
        "scored_runs": len(values), "unscored_runs": len(runs) - len(values),
        "value": distribution(values).model_dump(),
        "share_nonzero_reward": round(sum(1 for v in values if v > 0) / len(values), 4) if values else None,
        "share_correct": round(sum(1 for o in latest_outcomes.values() if o.correct) / len(values), 4)
        if values else None,
        "by_source": dict(Counter(o.source for o in latest_outcomes.values())),
        "termination": dict(Counter(o.termination for o in latest_outcomes.values())),
    }
    versions: Counter[str] = Counter()
    definitions: dict[int, dict[str, Any]] = {}
    for run in runs:
        if run.workflow_id not in definitions:
            definitions[run.workflow_id] = store.workflow_definition(run.workflow_id)[0]
        versions[f"{run.workflow} v{definitions[run.workflow_id].get('version', 1)} (#{run.workflow_id})"] += 1
    composition = {
        "by_kind": dict(Counter(r.kind for r in every)), "by_status": dict(Counter(r.status for r in runs)),
        "by_version": dict(versions), "workflows": names,
        "filters": "production runs only (kind=run) for lengths, outcomes and non-determinism; "
                   "replays and forks are counted in by_kind",
    }
    attributions = []
    for name in names:
        attributions.extend(store.attributions(workflow=name))
    granularity = {
        "records": len(attributions), "by_method": dict(Counter(a.method for a in attributions)),
        "by_granularity": dict(Counter(str(a.params.get("by", "step")) for a in attributions)),
        "replay_step_executions": sum(a.cost for a in attributions),
    }
    with_baseline = sorted({s["id"] for d in definitions.values() for s in d.get("steps", []) if s.get("baseline")})
    window = max(1, len(runs) // 10)
    ordered_values = [latest_outcomes[r.run_id].value for r in runs if r.run_id in latest_outcomes]
    baseline = {
        "steps_with_baseline": with_baseline,
        "early_mean_outcome": round(sum(ordered_values[:window]) / len(ordered_values[:window]), 4)
        if ordered_values else None,
        "recent_mean_outcome": round(sum(ordered_values[-window:]) / len(ordered_values[-window:]), 4)
        if ordered_values else None,
        "window_runs": window,
    }
    return ChecklistReport(
        workflow=workflow, generated_at=iso(now or time.time()) or "", runs=len(runs),
        trajectory_steps=distribution([float(steps_per_run[r.run_id]) for r in runs]),
        trajectory_attempts=distribution([float(attempts_per_run[r.run_id]) for r in runs]),
        outcomes=outcome_doc, nondeterminism=nondeterminism(history), composition=composition,
        granularity=granularity, baseline=baseline)
