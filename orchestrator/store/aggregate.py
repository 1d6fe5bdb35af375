"""The analytics rows of :mod:`orchestrator.store.analytics` computed in Python, for the memory store.

The same rules as the SQL of :mod:`orchestrator.store.sql_analytics`, over plain facts the memory
store hands over (it keeps everything in memory anyway, so a pass over it is the aggregation).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator import jsonio
from orchestrator.store.analytics import (
    AttributionCounts,
    NondeterminismCounts,
    OutcomeCounts,
    OutcomeSummary,
    RunCounts,
    StepPeriodCounts,
    TrajectoryCounts,
    attribution_rank,
    period_start,
)


@dataclass(frozen=True, slots=True)
class RunFact:
    pk: int
    workflow: str
    workflow_id: int
    kind: str
    status: str
    """As shown (``interrupted`` for a lapsed lease)."""
    created_at: float


@dataclass(frozen=True, slots=True)
class RecordFact:
    id: int
    run_pk: int
    step_id: str
    agent: str
    status: str
    attempt: int
    started_at: float
    origin: str
    gate_count: int
    gates_failed: int
    llm: str | None
    has_output: bool
    inputs_digest: str | None
    output_digest: str | None
    item_index: int | None = None
    skip_reason: str | None = None
    iteration: int | None = None


@dataclass(frozen=True, slots=True)
class OutcomeFact:
    id: int
    run_pk: int
    value: float
    correct: bool | None
    source: str
    termination: str


@dataclass(frozen=True, slots=True)
class AttributionFact:
    id: int
    run_pk: int
    outcome_id: int | None
    method: str
    params: str
    blamed_step: str | None
    cost: int


def production_runs(runs: Iterable[RunFact], workflow: str | None) -> list[RunFact]:
    """Runs of kind ``run`` of one workflow (of every workflow for None)."""
    return [r for r in runs if (workflow is None or r.workflow == workflow) and r.kind == "run"]


def run_periods(runs: Sequence[RunFact], records: Sequence[RecordFact], period: str,
                since: float | None) -> dict[int, float]:
    """Run pk -> the start of its period, for production runs starting at or after ``since``."""
    start = {r.pk: r.created_at for r in runs}
    first: dict[int, float] = {}
    for rec in records:
        if rec.run_pk in start:
            first[rec.run_pk] = min(first.get(rec.run_pk, rec.started_at), rec.started_at)
    start.update(first)
    return {pk: period_start(t0, period) for pk, t0 in start.items() if since is None or t0 >= since}


def _llm_numbers(llm: str) -> tuple[int, int, int, float | None]:
    doc = json.loads(llm)
    usage = doc.get("usage") or {}
    cost = doc.get("cost")
    return (int(doc.get("calls") or 0), int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
            None if cost is None else float(cost))


def step_period_counts(runs: Sequence[RunFact], records: Sequence[RecordFact], period: str,
                       since: float | None) -> list[StepPeriodCounts]:
    periods = run_periods(runs, records, period, since)
    by_obs: dict[tuple[str, float], list[list[RecordFact]]] = {}
    per_run: dict[tuple[int, str], list[RecordFact]] = {}
    for rec in sorted(records, key=lambda r: r.id):
        if rec.run_pk in periods:
            per_run.setdefault((rec.run_pk, rec.step_id), []).append(rec)
    for (pk, sid), recs in per_run.items():
        by_obs.setdefault((sid, periods[pk]), []).append(recs)
    out = []
    for (sid, start), observations in by_obs.items():
        flat = [r for recs in observations for r in recs]
        # gates judge each unit of a run once: the step, or every instance of a mapped step
        units: dict[tuple[int, int | None], list[RecordFact]] = {}
        for r in flat:
            units.setdefault((r.run_pk, r.item_index), []).append(r)
        firsts = [next((r for r in recs if r.gate_count > 0), None) for recs in units.values()]
        llm = [_llm_numbers(r.llm) for r in flat if r.origin == "executed" and r.llm is not None]
        out.append(StepPeriodCounts(
            step_id=sid, period_start=start, agent=min(r.agent for r in flat), first_record=min(r.id for r in flat),
            runs=len(observations), gated_runs=sum(1 for f in firsts if f is not None),
            gate_passes=sum(1 for f in firsts if f is not None and f.gates_failed == 0), attempts=len(flat),
            failures=sum(1 for r in flat if r.status == "failed"),
            gate_failures=sum(1 for r in flat if r.status == "gate_failed"),
            retries=sum(1 for r in flat if r.attempt > 1), model_records=len(llm),
            model_calls=sum(c[0] for c in llm), input_tokens=sum(c[1] for c in llm),
            output_tokens=sum(c[2] for c in llm), priced_records=sum(1 for c in llm if c[3] is not None),
            cost=sum(c[3] or 0.0 for c in llm),
            skipped_runs=sum(1 for recs in observations if any(
                r.status == "skipped" and r.skip_reason is not None and r.item_index is None for r in recs))))
    return sorted(out, key=lambda s: (s.period_start, s.first_record))


def _latest_outcomes(outcomes: Iterable[OutcomeFact]) -> dict[int, OutcomeFact]:
    latest: dict[int, OutcomeFact] = {}
    for o in sorted(outcomes, key=lambda o: o.id):
        latest[o.run_pk] = o
    return latest


def _by_agent(params: str) -> bool:
    loaded = jsonio.loads(params) if params else None
    return isinstance(loaded, dict) and loaded.get("by") == "agent"


def outcome_counts(runs: Sequence[RunFact], records: Sequence[RecordFact], outcomes: Sequence[OutcomeFact],
                   attributions: Sequence[AttributionFact], period: str, since: float | None) -> list[OutcomeCounts]:
    periods = run_periods(runs, records, period, since)
    latest = _latest_outcomes(o for o in outcomes if o.run_pk in periods)
    by_run: dict[int, list[AttributionFact]] = {}
    for a in sorted(attributions, key=lambda a: a.id):
        by_run.setdefault(a.run_pk, []).append(a)
    counts: Counter[tuple[float, bool, str | None, str | None]] = Counter()
    for pk, start in periods.items():
        outcome = latest.get(pk)
        if outcome is None or outcome.correct is not False:
            counts[(start, False, None, None)] += 1
            continue
        views = by_run.get(pk, [])
        chosen = min(views, key=lambda a: (attribution_rank(a.method, _by_agent(a.params)), -a.id),
                     default=None)
        counts[(start, True, chosen.blamed_step if chosen else None, chosen.method if chosen else None)] += 1
    return [OutcomeCounts(period_start=s, incorrect=bad, blamed_step=who, runs=n, method=method)
            for (s, bad, who, method), n in sorted(counts.items(), key=lambda kv: kv[0][0])]


def trajectory_counts(runs: Sequence[RunFact], records: Sequence[RecordFact]) -> list[TrajectoryCounts]:
    attempts: Counter[int] = Counter()
    steps: dict[int, set[str]] = {}
    pks = {r.pk for r in runs}
    for rec in records:  # instances count one step each; a mapped step's collected list is no execution
        if rec.run_pk in pks and rec.status != "skipped" and rec.origin != "collected":
            attempts[rec.run_pk] += 1
            steps.setdefault(rec.run_pk, set()).add(f"{rec.step_id}#{'' if rec.item_index is None else rec.item_index}")
    counts = Counter((len(steps.get(pk, ())), attempts[pk]) for pk in pks)
    return [TrajectoryCounts(steps=s, attempts=a, runs=n) for (s, a), n in sorted(counts.items())]


def outcome_summary(runs: Sequence[RunFact], outcomes: Sequence[OutcomeFact], window: int) -> OutcomeSummary:
    latest = _latest_outcomes(o for o in outcomes if o.run_pk in {r.pk for r in runs})
    ordered = [latest[r.pk] for r in sorted(runs, key=lambda r: (r.created_at, r.pk)) if r.pk in latest]
    early, recent = ordered[:window], ordered[-window:] if ordered else []
    return OutcomeSummary(
        scored=len(ordered), correct=sum(1 for o in ordered if o.correct),
        nonzero=sum(1 for o in ordered if o.value > 0),
        values=dict(Counter(o.value for o in ordered)), by_source=dict(Counter(o.source for o in ordered)),
        by_termination=dict(Counter(o.termination for o in ordered)),
        early_mean=sum(o.value for o in early) / len(early) if early else None,
        recent_mean=sum(o.value for o in recent) / len(recent) if recent else None)


def run_counts(runs: Iterable[RunFact], workflow: str | None) -> list[RunCounts]:
    counts = Counter((r.workflow, r.workflow_id, r.kind, r.status) for r in runs
                     if workflow is None or r.workflow == workflow)
    return [RunCounts(workflow=w, workflow_id=i, kind=k, status=s, runs=n)
            for (w, i, k, s), n in sorted(counts.items())]


def attribution_counts(runs: Sequence[RunFact], attributions: Sequence[AttributionFact]) -> list[AttributionCounts]:
    pks = {r.pk for r in runs}
    groups: dict[tuple[str, str], list[AttributionFact]] = {}
    for a in sorted(attributions, key=lambda a: a.id):
        if a.run_pk in pks:
            groups.setdefault((a.method, a.params), []).append(a)
    return [AttributionCounts(method=m, params=p, records=len(g), cost=sum(a.cost for a in g))
            for (m, p), g in groups.items()]


def nondeterminism_counts(runs: Sequence[RunFact], records: Sequence[RecordFact]) -> list[NondeterminismCounts]:
    pks = {r.pk for r in runs}
    firsts: dict[tuple[int, str], RecordFact] = {}
    for rec in sorted(records, key=lambda r: r.id):
        if rec.run_pk in pks and rec.has_output and rec.status in ("succeeded", "gate_failed"):
            firsts.setdefault((rec.run_pk, rec.step_id), rec)
    groups: dict[tuple[str, str | None], list[RecordFact]] = {}
    for rec in firsts.values():
        groups.setdefault((rec.step_id, rec.inputs_digest), []).append(rec)
    out: dict[str, NondeterminismCounts] = {}
    for (sid, inputs), recs in groups.items():
        old = out.get(sid) or NondeterminismCounts(sid, min(r.id for r in recs), 0, 0, 0)
        repeated = inputs is not None and len(recs) >= 2
        varied = repeated and len({r.output_digest for r in recs}) > 1
        out[sid] = NondeterminismCounts(sid, min(old.first_record, min(r.id for r in recs)),
                                        old.repeated_inputs + repeated, old.varied + varied,
                                        old.not_covered + (len(recs) if inputs is None else 0))
    return sorted(out.values(), key=lambda n: n.first_record)
