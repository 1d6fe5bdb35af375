"""Compare two experiments on one dataset (either may be ``baseline``: the dataset's source runs).

Per example, each side's outcome: the evaluator's score, a person's label, and correct or incorrect
(the latest outcome decides; a run without one is incorrect when it failed, was rejected or ended
paused at a gate, and unknown otherwise). An example correct on one side and incorrect on the other
is a flip: ``fixed`` (A incorrect, B correct) or ``broken``. Each flip is put down to the changed step
that made the difference: the steps whose version hash (:mod:`orchestrator.bind.step_versions`)
differs between the two runs' workflow versions are the candidates; with one candidate it is that
step; with several, the candidates whose output differs between the two runs are kept (a changed step
that returned what it returned before changed nothing downstream of it), and if one is left it is that
step; otherwise the flip is ``ambiguous`` and every remaining candidate is listed.

Aggregates per side: outcome rate with a Wilson 95% interval, mean score, runs by status, tokens, cost,
model calls, latency p50/p95 and trajectory length, and each step's gate pass rate side by side. An
experiment run's reused steps count at what they cost in the source run, so a side's totals describe
its trajectories, not what reuse spent (``experiment show`` says what it saved).

The ``--json`` document is a contract (keys are added, never renamed); ``docs/experiments.md`` lists them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bind.step_versions import changed_steps, step_hashes
from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, OrchestratorError
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.spec.datasets import ExampleView, ExperimentRunLink
from orchestrator.spec.records import OutcomeView, RunView, StepRecordView, live_records
from orchestrator.store import Store

BASELINE = "baseline"
INCORRECT_STATUSES = ("failed", "rejected", "paused")
Z95 = 1.959963984540054


def wilson_interval(successes: int, total: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None without observations)."""
    if total <= 0:
        return None
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class RunFacts:
    """What a comparison reads of one run."""

    run: RunView
    outcomes: list[OutcomeView]
    records: list[StepRecordView]
    link: ExperimentRunLink | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_calls: int = 0

    @property
    def score(self) -> float | None:
        scored = [o for o in self.outcomes if o.source == "evaluator"]
        return scored[-1].value if scored else None

    @property
    def label(self) -> str | None:
        labelled = [o for o in self.outcomes if o.source == "human" and o.correct is not None]
        return None if not labelled else ("correct" if labelled[-1].correct else "incorrect")

    @property
    def correct(self) -> bool | None:
        judged = [o for o in self.outcomes if o.correct is not None]
        if judged:
            return judged[-1].correct
        return False if self.run.status in INCORRECT_STATUSES else None

    @property
    def latency(self) -> float:
        return max(0.0, self.run.updated_at - self.run.created_at) + (self.link.saved_seconds if self.link else 0.0)

    @property
    def trajectory(self) -> int:
        return sum(1 for r in self.records if r.status != "skipped")

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run.run_id, "status": self.run.status, "score": self.score, "label": self.label,
                "correct": self.correct, "reused_steps": list(self.link.reused_steps) if self.link else []}


@dataclass
class Side:
    """One side of a comparison: its name and its run of each example (by example id)."""

    name: str
    runs: dict[int, str]
    links: dict[int, ExperimentRunLink] = field(default_factory=dict)


def _side(store: Store, name: str, examples: list[ExampleView]) -> Side:
    if name == BASELINE:
        return Side(BASELINE, {e.id: e.source_run_id for e in examples if e.source_run_id is not None})
    links = {link.example_id: link for link in store.experiment_runs(name)}
    return Side(name, {eid: link.run_id for eid, link in links.items()}, links)


def _facts(store: Store, side: Side) -> dict[int, RunFacts]:
    run_ids = list(side.runs.values())
    records = store.step_records_of(run_ids)
    calls = store.model_calls(run_ids)
    found: dict[int, RunFacts] = {}
    by_run: dict[str, RunFacts] = {}
    for example_id, run_id in side.runs.items():
        try:
            run = store.get_run(run_id)
        except OrchestratorError:  # a source run deleted since: the example has no baseline
            continue
        facts = RunFacts(run, store.outcomes(run_id), records.get(run_id, []), side.links.get(example_id))
        if facts.link is not None:
            facts.model_calls, facts.cost = facts.link.saved_model_calls, facts.link.saved_cost
            facts.input_tokens = facts.link.saved_tokens  # the source run's split is not kept; counted as input
        found[example_id] = by_run[run_id] = facts
    for call in calls:
        owner = by_run.get(call.run_id)
        if owner is not None:
            owner.model_calls += 1
            owner.input_tokens += call.input_tokens
            owner.output_tokens += call.output_tokens
            owner.cost += call.cost or 0.0
    return found


def _aggregate(facts: Sequence[RunFacts]) -> dict[str, Any]:
    judged = [f.correct for f in facts if f.correct is not None]
    correct = sum(1 for c in judged if c)
    interval = wilson_interval(correct, len(judged))
    scores = [f.score for f in facts if f.score is not None]
    statuses: dict[str, int] = {}
    for f in facts:
        statuses[f.run.status] = statuses.get(f.run.status, 0) + 1
    latencies = [f.latency for f in facts]
    lengths = [float(f.trajectory) for f in facts]
    return {
        "runs": len(facts), "judged": len(judged), "correct": correct,
        "outcome_rate": correct / len(judged) if judged else None,
        "outcome_rate_ci95": list(interval) if interval else None,
        "mean_score": sum(scores) / len(scores) if scores else None, "statuses": statuses,
        "tokens": {"input": sum(f.input_tokens for f in facts), "output": sum(f.output_tokens for f in facts),
                   "total": sum(f.input_tokens + f.output_tokens for f in facts)},
        "cost": sum(f.cost for f in facts), "model_calls": sum(f.model_calls for f in facts),
        "latency_s": {"p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95)},
        "trajectory_length": {"mean": sum(lengths) / len(lengths) if lengths else None,
                              "p50": percentile(lengths, 0.5), "p95": percentile(lengths, 0.95)},
    }


def _gate_rates(facts: Sequence[RunFacts]) -> dict[str, tuple[int, int]]:
    """Per step: (runs whose first gated record of it passed every gate, runs in which it was gated)."""
    rates: dict[str, tuple[int, int]] = {}
    for f in facts:
        seen: set[str] = set()
        for record in f.records:
            if not record.gates or record.step_id in seen or record.index is not None:
                continue
            seen.add(record.step_id)
            passed, total = rates.get(record.step_id, (0, 0))
            rates[record.step_id] = (passed + all(g.passed for g in record.gates), total + 1)
    return rates


class _Versions:
    """Step hashes per stored workflow version, loaded once each."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.known: dict[int, tuple[dict[str, str], tuple[str, ...]] | None] = {}

    def of(self, run: RunView) -> tuple[dict[str, str], tuple[str, ...]] | None:
        if run.workflow_id not in self.known:
            try:
                workflow = load_run_workflow(self.store, run.run_id)[0]
                self.known[run.workflow_id] = (step_hashes(workflow), workflow.order)
            except OrchestratorError:
                self.known[run.workflow_id] = None
        return self.known[run.workflow_id]


def _output_digest(records: Sequence[StepRecordView], step_id: str) -> str | None:
    record = live_records(records).get(step_id)
    if record is None or record.status not in ("succeeded", "gate_failed"):
        return None
    return jsonio.dumps(record.output)


def _blame(a: RunFacts, b: RunFacts, changed: list[str]) -> dict[str, Any]:
    """Which changed step made this example's outcome differ."""
    if not changed:
        return {"changed_step": None, "candidates": [], "attribution": "no step changed (non-determinism)"}
    if len(changed) == 1:
        return {"changed_step": changed[0], "candidates": changed, "attribution": "the only changed step"}
    differing = [sid for sid in changed if _output_digest(a.records, sid) != _output_digest(b.records, sid)]
    if len(differing) == 1:
        return {"changed_step": differing[0], "candidates": changed,
                "attribution": "the only changed step whose output differed"}
    return {"changed_step": None, "candidates": differing or changed, "attribution": "ambiguous"}


def compare(store: Store, a: str, b: str) -> dict[str, Any]:
    """The comparison document of experiments ``a`` and ``b`` (either may be ``baseline``)."""
    if a == BASELINE and b == BASELINE:
        raise InputError("compare two different things: at most one side may be baseline")
    named = [store.experiment(n) for n in (a, b) if n != BASELINE]
    datasets = {e.dataset for e in named}
    if len(datasets) > 1:
        raise InputError(f"experiments {a!r} and {b!r} ran different datasets ({', '.join(sorted(datasets))}); "
                         "compare experiments of one dataset")
    dataset = named[0].dataset
    version = max(e.dataset_version for e in named)
    examples = store.examples(dataset, version=version)
    side_a, side_b = _side(store, a, examples), _side(store, b, examples)
    facts_a, facts_b = _facts(store, side_a), _facts(store, side_b)
    versions = _Versions(store)
    rows: list[dict[str, Any]] = []
    changed_all: list[str] = []
    by_step: dict[str, dict[str, int]] = {}
    flips = {"fixed": 0, "broken": 0, "ambiguous": 0}
    for example in examples:
        fa, fb = facts_a.get(example.id), facts_b.get(example.id)
        if fa is None or fb is None:
            continue
        va, vb = versions.of(fa.run), versions.of(fb.run)
        changed = changed_steps(va[0], vb[0], vb[1]) if va is not None and vb is not None else []
        changed_all.extend(s for s in changed if s not in changed_all)
        flip = None
        if fa.correct is not None and fb.correct is not None and fa.correct != fb.correct:
            flip = "fixed" if fb.correct else "broken"
        row: dict[str, Any] = {"example_id": example.id, "position": example.position, "inputs": example.inputs,
                               "a": fa.to_json(), "b": fb.to_json(), "flip": flip, "changed_steps": changed}
        if flip is not None:
            blame = _blame(fa, fb, changed)
            row.update(blame)
            flips[flip] += 1
            step = blame["changed_step"]
            if step is None:
                flips["ambiguous"] += 1
            else:
                counts = by_step.setdefault(step, {"fixed": 0, "broken": 0})
                counts[flip] += 1
        rows.append(row)
    rows.sort(key=lambda r: (r["flip"] is None, r["flip"] != "fixed", r["position"]))  # flips first, fixed first
    total_flips = flips["fixed"] + flips["broken"]
    rates_a, rates_b = _gate_rates(list(facts_a.values())), _gate_rates(list(facts_b.values()))
    gates = []
    for sid in [*rates_a, *(s for s in rates_b if s not in rates_a)]:
        pa, na = rates_a.get(sid, (0, 0))
        pb, nb = rates_b.get(sid, (0, 0))
        gates.append({"step_id": sid, "a": pa / na if na else None, "b": pb / nb if nb else None,
                      "a_runs": na, "b_runs": nb})
    compared_a = [facts_a[e] for e in (r["example_id"] for r in rows)]
    compared_b = [facts_b[e] for e in (r["example_id"] for r in rows)]
    return {
        "a": a, "b": b, "dataset": dataset, "dataset_version": version, "examples": len(rows),
        "changed_steps": changed_all,
        "flips": {"fixed": flips["fixed"], "broken": flips["broken"], "ambiguous": flips["ambiguous"],
                  "total": total_flips},
        "flips_by_step": [{"step_id": sid, "fixed": c["fixed"], "broken": c["broken"],
                           "share": (c["fixed"] + c["broken"]) / total_flips}
                          for sid, c in sorted(by_step.items(), key=lambda kv: -(kv[1]["fixed"] + kv[1]["broken"]))],
        "aggregates": {"a": _aggregate(compared_a), "b": _aggregate(compared_b)},
        "gates": gates,
        "per_example": rows,
    }


def experiment_summary(store: Store, name: str) -> dict[str, Any]:
    """What an experiment's runs came to so far: runs by status, outcome rate, and what reuse saved."""
    links = store.experiment_runs(name)
    statuses: dict[str, int] = {}
    correct = judged = 0
    for link in links:
        run = store.get_run(link.run_id)
        statuses[run.status] = statuses.get(run.status, 0) + 1
        facts = RunFacts(run, store.outcomes(link.run_id), [])
        if facts.correct is not None:
            judged += 1
            correct += bool(facts.correct)
    records = store.step_records_of([link.run_id for link in links])
    executed = sum(1 for rs in records.values() for r in rs if r.origin == "executed")
    spent = store.model_calls([link.run_id for link in links])
    interval = wilson_interval(correct, judged)
    return {
        "runs": len(links), "statuses": statuses, "judged": judged, "correct": correct,
        "outcome_rate": correct / judged if judged else None,
        "outcome_rate_ci95": list(interval) if interval else None,
        "step_executions": executed, "model_calls": len(spent),
        "reuse": {"runs_reusing": sum(1 for link in links if link.reused_steps),
                  "step_executions_saved": sum(len(link.reused_steps) for link in links),
                  "model_calls_saved": sum(link.saved_model_calls for link in links),
                  "tokens_saved": sum(link.saved_tokens for link in links),
                  "cost_saved": sum(link.saved_cost for link in links)},
    }


def experiment_runs_document(store: Store, name: str) -> list[dict[str, Any]]:
    """Each run of an experiment in example order: its example's position, status, score, verdict, reuse."""
    view = store.experiment(name)
    positions = {e.id: e.position for e in store.examples(view.dataset, version=view.dataset_version)}
    rows = []
    for link in store.experiment_runs(name):
        facts = RunFacts(store.get_run(link.run_id), store.outcomes(link.run_id), [], link)
        rows.append({"position": positions.get(link.example_id), "example_id": link.example_id, **facts.to_json()})
    return rows
