"""The step-level dashboard: gate pass rates over time and the failure attribution distribution.

For each step of a workflow: in how many runs it ran, how often its output passed its gates
(its quality signal, judged on the step's first gated attempt in each run), the trend of that
rate per day or week, and its share of the incorrect outcomes whose attribution blamed it (the
seed's "one metric to track from day one"). An alert fires when a step's pass rate drops by
``alert_drop`` points or more against the previous period (96% -> 89% is a 7-point drop).

:func:`compute_stats` reads the store's aggregated rows (per step and day from the SQL stores'
summary, :mod:`orchestrator.store.sql_summary`; the rules for run periods, gate verdicts and whom
an incorrect outcome blames are in :mod:`orchestrator.store.analytics`) and returns a
:class:`StatsReport` (pydantic); the CLI
prints it and the TUI dashboard renders the same model. Only runs of kind ``run`` count:
replays and forks are not production traffic; a child run (started by a parent's ``workflow:`` step) is
its workflow's traffic like a run started alone. ``expand``: a parent's ``workflow:`` step lists its child
workflow's steps beneath it, by their paths (``research > retrieve``), counted over the child runs that step
started.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.errors import InputError
from orchestrator.engine.workflow_filter import check_workflow_filter
from orchestrator.spec.records import CHILD_KIND, iso, join_path, parse_unit, path_head, split_path
from orchestrator.store import Store
from orchestrator.store.analytics import ModelCallGroup, OutcomeCounts, StepPeriodCounts

PERIODS = ("day", "week")
MAX_RUNS = 1_000_000


class TrendPoint(BaseModel):
    """One period of one step."""

    period: str
    """``2026-11-21`` for a day, ``2026-W47`` for an ISO week."""
    start: str
    runs: int = 0
    gated_runs: int = 0
    gate_pass_rate: float | None = None
    incorrect: int = 0
    """Incorrect outcomes in this period (all steps)."""
    blamed: int = 0
    blamed_share: float | None = None
    skipped_runs: int = 0
    """Runs of the period in which a condition skipped the step (the route not taken)."""


class ModelUsage(BaseModel):
    """Model calls, tokens and cost of a set of calls."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD; None when a model's price is unknown."""


class StepStats(BaseModel):
    step_id: str
    agent: str | None = None
    runs: int = 0
    gated_runs: int = 0
    gate_pass_rate: float | None = None
    """Share of gated runs whose first gated attempt of this step passed all its gates; None without gates."""
    blamed: int = 0
    blamed_share: float = 0.0
    """Share of the workflow's incorrect outcomes attributed to this step."""
    trend: list[TrendPoint] = Field(default_factory=list)
    skipped_runs: int = 0
    """Runs in which the step's ``when`` (or a skipped upstream step) kept it from running; ``runs`` less
    these ran it: the route distribution of a conditional step."""
    attempts: int = 0
    """Attempts of the step in the runs counted (every record, retries and skips included)."""
    failures: int = 0
    """Attempts that failed (an exception or a timeout)."""
    gate_failures: int = 0
    """Attempts whose gates stopped them (``gate_failed``)."""
    retries: int = 0
    """Attempts after the first."""
    model_calls: int = 0
    """Every model call made for the step in the runs counted: its own, its critics', its gates' (judges),
    edit validation's and ``ctx.llm``'s, retries included."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD; None when the step made no model call or a model's price is unknown."""
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict)
    """The same sums per purpose (``step``, ``critic``, ``judge``, ``validation``)."""
    steps: list[StepStats] | None = None
    """With ``expand``, on a ``workflow:`` step: its child workflow's steps, by their paths (``research >
    retrieve``), counted over the child runs this step started, blamed by the paths attribution named (an
    instance's or iteration's child counts for the step: ``per_ticket[3] > classify`` is ``per_ticket >
    classify``). Left out of the JSON otherwise."""


class GateSpend(BaseModel):
    """What one gate of one step spent on its judge model (``purpose`` judge or validation)."""

    step_id: str
    gate: str
    purpose: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None


class UsagePoint(ModelUsage):
    """The workflow's model usage over one period, with its split by purpose."""

    period: str
    start: str
    by_purpose: dict[str, ModelUsage] = Field(default_factory=dict)


class Alert(BaseModel):
    step_id: str
    metric: str = "gate_pass_rate"
    previous_period: str
    current_period: str
    previous: float
    current: float
    drop_points: float
    message: str


class StatsReport(BaseModel):
    workflow: str
    period: str
    since: str | None = None
    generated_at: str
    runs: int = 0
    incorrect_outcomes: int = 0
    unattributed: int = 0
    """Incorrect outcomes with no attribution record (or one that blamed no step)."""
    blamed_distribution: dict[str, float] = Field(default_factory=dict)
    blame_methods: dict[str, int] = Field(default_factory=dict)
    """Which attribution method the blame of each attributed incorrect outcome came from (runs per method):
    each run counts once, by its explaining record (counterfactual or Shapley over difference credit over
    trace, the newest within a method), the record the review screen shows."""
    steps: list[StepStats] = Field(default_factory=list)
    alerts: list[Alert] = Field(default_factory=list)
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict)
    """Every model call of the workflow's runs counted, per purpose."""
    model_trend: list[UsagePoint] = Field(default_factory=list)
    """The workflow's model usage per period (by when each call started)."""
    judge_spend: list[GateSpend] = Field(default_factory=list)
    """Per step and gate: what its judge calls cost, most expensive (by tokens) first."""

    def to_json(self) -> dict[str, Any]:
        doc = self.model_dump(mode="json")
        for step in doc["steps"]:  # a child workflow's steps only where they were asked for
            if step["steps"] is None:
                del step["steps"]
        return doc


def parse_since(text: str, *, now: float | None = None) -> float:
    """``2026-11-01``, an ISO datetime, or a relative ``12h`` / ``14d`` / ``2w`` -> epoch seconds."""
    now = time.time() if now is None else now
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text)
    if match:
        hours = {"h": 1, "d": 24, "w": 24 * 7}[match.group(2)] * int(match.group(1))
        return now - hours * 3600
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--since {text!r} is not a date: use 2026-11-01, an ISO datetime, or 14d / 2w / 12h") \
            from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def period_of(ts: float, period: str) -> tuple[str, str]:
    """(label, ISO start) of the day or ISO week holding ``ts`` (UTC)."""
    day = datetime.fromtimestamp(ts, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day.date().isoformat(), day.isoformat()
    start = day - timedelta(days=day.weekday())
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}", start.isoformat()


def choose_workflow(store: Store, workflow: str | None) -> str:
    """The named workflow, or the only one with runs; else an InputError listing them (a name with no
    runs is a typo far more often than a question, and "0 runs" would hide it)."""
    names = check_workflow_filter(store, workflow)
    if workflow is not None:
        return workflow
    if not names:
        raise InputError("no runs are stored yet; run a workflow first")
    if len(names) > 1:
        raise InputError(f"runs of several workflows are stored: {names}; choose one with --workflow")
    return names[0]


def compute_stats(store: Store, workflow: str | None = None, *, since: float | None = None, period: str = "week",
                  alert_drop: float = 5.0, min_runs: int = 1, now: float | None = None,
                  expand: bool = False) -> StatsReport:
    """The dashboard of one workflow (the only one stored when ``workflow`` is None).

    Two aggregated reads (see :mod:`orchestrator.store.analytics` for their rules): the cost grows
    with the steps and periods shown, not with the runs stored (plus, on the SQL stores, summarising
    what was written since the last read; with ``since``, the runs of the one day it cuts through).
    """
    if period not in PERIODS:
        raise InputError(f"--period must be one of {list(PERIODS)}; got {period!r}")
    name = choose_workflow(store, workflow)
    order, child_steps = _step_order(store, name)
    expanded = {sid: store.child_step_period_counts(name, sid, period=period, since=since)
                for sid in child_steps} if expand else None
    return build_stats(name, store.step_period_counts(name, period=period, since=since),
                       store.outcome_counts(name, period=period, since=since), step_order=order,
                       period=period, since=since, alert_drop=alert_drop, min_runs=min_runs, now=now,
                       calls=store.workflow_model_usage(name, since=since), expanded=expanded)


def _step_order(store: Store, workflow: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(step id, agent) in the order the newest run's definition declares them, and its ``workflow:`` steps."""
    newest = store.list_runs(workflow=workflow, kind="run", limit=1) or \
        store.list_runs(workflow=workflow, kind=CHILD_KIND, limit=1)  # a workflow only ever run as a child
    if not newest:
        return [], []
    definition, _ = store.workflow_definition(newest[0].workflow_id)
    steps = definition.get("steps", [])
    return [(s["id"], s.get("agent") or s["id"]) for s in steps], [s["id"] for s in steps if s.get("workflow")]


def expanded_path(blamed: str) -> str:
    """The row of ``stats --expand`` a blamed path counts for: its workflow step, then the child's step
    (``per_ticket[3] > classify#2 > x`` -> ``per_ticket > classify``); a unit of the run itself -> its step."""
    units = split_path(blamed)
    return join_path(*(parse_unit(u)[0] for u in units[:2]))


def _ordered_steps(rows: Sequence[StepPeriodCounts],
                   step_order: Sequence[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The definition's steps, then steps only the records know, in order of their first record.

    An agent comes from the definition, else from the records."""
    agents: dict[str, str | None] = dict(step_order)
    order = [sid for sid, _ in step_order]
    for row in sorted(rows, key=lambda r: r.first_record):
        if row.step_id not in agents:
            order.append(row.step_id)
            agents[row.step_id] = None
        agents[row.step_id] = agents[row.step_id] or row.agent
    return [(sid, agents[sid]) for sid in order]


def usage_of(groups: Sequence[ModelCallGroup]) -> ModelUsage:
    """Summed calls, tokens and cost; cost None when any answered call's price is unknown."""
    return ModelUsage(calls=sum(g.calls for g in groups), input_tokens=sum(g.input_tokens for g in groups),
                      output_tokens=sum(g.output_tokens for g in groups),
                      cost=None if any(g.unpriced for g in groups) else round(sum(g.cost for g in groups), 8))


def by_purpose(groups: Sequence[ModelCallGroup]) -> dict[str, ModelUsage]:
    by: dict[str, list[ModelCallGroup]] = {}
    for g in groups:
        by.setdefault(g.purpose, []).append(g)
    return {purpose: usage_of(group) for purpose, group in sorted(by.items())}


def _model_usage(groups: Sequence[ModelCallGroup]) -> dict[str, Any]:
    """A step's model fields of :class:`StepStats` from its calls (none without any)."""
    if not groups:
        return {}
    total = usage_of(groups)
    return {"model_calls": total.calls, "input_tokens": total.input_tokens, "output_tokens": total.output_tokens,
            "cost": total.cost, "model_usage": by_purpose(groups)}


def _model_trend(groups: Sequence[ModelCallGroup], period: str) -> list[UsagePoint]:
    by: dict[tuple[str, str], list[ModelCallGroup]] = {}
    for g in groups:
        by.setdefault(period_of(g.day_start, period), []).append(g)
    return [UsagePoint(period=label, start=start, **usage_of(group).model_dump(), by_purpose=by_purpose(group))
            for (label, start), group in sorted(by.items(), key=lambda item: item[0][1])]


def _judge_spend(groups: Sequence[ModelCallGroup]) -> list[GateSpend]:
    by: dict[tuple[str, str, str], list[ModelCallGroup]] = {}
    for g in groups:
        if g.gate is not None:
            by.setdefault((g.step_id, g.gate, g.purpose), []).append(g)
    spend = [GateSpend(step_id=step_id, gate=gate, purpose=purpose, **usage_of(group).model_dump())
             for (step_id, gate, purpose), group in by.items()]
    return sorted(spend, key=lambda g: (-(g.input_tokens + g.output_tokens), g.step_id, g.gate))


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _step_stats(step_id: str, agent: str | None, rows: Sequence[StepPeriodCounts], labels: dict[float, tuple[str, str]],
                incorrect_in: Counter[float], blamed_in: Counter[tuple[float, str | None]],
                calls: Sequence[ModelCallGroup]) -> StepStats:
    """One step's totals and trend from its rows per period, with the incorrect outcomes it was blamed for."""
    by_start = {r.period_start: r for r in rows}
    trend = []
    for start in sorted(labels):
        row, incorrect = by_start.get(start), incorrect_in[start]
        if row is None and not incorrect:
            continue
        label, iso_start = labels[start]
        point = TrendPoint(period=label, start=iso_start, incorrect=incorrect, blamed=blamed_in[(start, step_id)])
        if row is not None:
            point.runs, point.gated_runs, point.skipped_runs = row.runs, row.gated_runs, row.skipped_runs
            point.gate_pass_rate = _rate(row.gate_passes, row.gated_runs)
        point.blamed_share = _rate(point.blamed, incorrect)
        trend.append(point)
    gated, incorrect_total = sum(r.gated_runs for r in rows), sum(incorrect_in.values())
    blamed = sum(n for (_, who), n in blamed_in.items() if who == step_id)
    return StepStats(step_id=step_id, agent=agent, runs=sum(r.runs for r in rows), gated_runs=gated,
                     gate_pass_rate=_rate(sum(r.gate_passes for r in rows), gated), blamed=blamed,
                     blamed_share=_rate(blamed, incorrect_total) or 0.0, trend=trend,
                     skipped_runs=sum(r.skipped_runs for r in rows),
                     attempts=sum(r.attempts for r in rows), failures=sum(r.failures for r in rows),
                     gate_failures=sum(r.gate_failures for r in rows), retries=sum(r.retries for r in rows),
                     **_model_usage(calls))


def build_stats(workflow: str, step_rows: Sequence[StepPeriodCounts], outcome_rows: Sequence[OutcomeCounts], *,
                step_order: Sequence[tuple[str, str | None]] = (), period: str = "week", since: float | None = None,
                alert_drop: float = 5.0, min_runs: int = 1, now: float | None = None,
                calls: Sequence[ModelCallGroup] = (),
                expanded: Mapping[str, Sequence[StepPeriodCounts]] | None = None) -> StatsReport:
    """Pure: the dashboard from the store's aggregated rows (per step and period, per outcome state)
    and the workflow's model calls (added up per step, purpose, gate and day); ``expanded``: the child
    workflow's rows of each ``workflow:`` step to show beneath it
    (:meth:`~orchestrator.store.base.Store.child_step_period_counts`)."""
    starts = {r.period_start for r in step_rows} | {o.period_start for o in outcome_rows}
    starts |= {r.period_start for rows in (expanded or {}).values() for r in rows}
    labels = {start: period_of(start, period) for start in starts}
    incorrect_in: Counter[float] = Counter()
    blamed_in: Counter[tuple[float, str | None]] = Counter()
    for o in outcome_rows:
        if o.incorrect:
            incorrect_in[o.period_start] += o.runs
            # a blamed instance (``summarize[7]``) or a path into its child run (``research > retrieve``) is blame
            # of its step
            blamed_in[(o.period_start, parse_unit(path_head(o.blamed_step))[0] if o.blamed_step else None)] += o.runs
    by_step: dict[str, list[StepPeriodCounts]] = {}
    for row in step_rows:
        by_step.setdefault(row.step_id, []).append(row)
    calls_of: dict[str, list[ModelCallGroup]] = {}
    for call in calls:
        calls_of.setdefault(call.step_id, []).append(call)
    steps = [_step_stats(sid, agent, by_step.get(sid, []), labels, incorrect_in, blamed_in, calls_of.get(sid, []))
             for sid, agent in _ordered_steps(step_rows, step_order)]
    if expanded is not None:
        blamed_at: Counter[tuple[float, str | None]] = Counter()
        for o in outcome_rows:
            if o.incorrect and o.blamed_step:
                blamed_at[(o.period_start, expanded_path(o.blamed_step))] += o.runs
        for step in steps:
            if step.step_id in expanded:
                inner = [replace(r, step_id=join_path(step.step_id, r.step_id)) for r in expanded[step.step_id]]
                by_path: dict[str, list[StepPeriodCounts]] = {}
                for row in inner:
                    by_path.setdefault(row.step_id, []).append(row)
                step.steps = [_step_stats(path, agent, by_path[path], labels, incorrect_in, blamed_at, [])
                              for path, agent in _ordered_steps(inner, [])]
    incorrect = sum(incorrect_in.values())
    unattributed = sum(n for (_, who), n in blamed_in.items() if who is None)
    methods: Counter[str] = Counter()
    for o in outcome_rows:
        if o.incorrect and o.blamed_step is not None and o.method is not None:
            methods[o.method] += o.runs
    distribution = {s.step_id: s.blamed_share for s in steps if s.blamed}
    if unattributed:
        distribution["(unattributed)"] = round(unattributed / incorrect, 4)
    return StatsReport(workflow=workflow, period=period, since=iso(since), generated_at=iso(now or time.time()) or "",
                       runs=sum(o.runs for o in outcome_rows), incorrect_outcomes=incorrect,
                       unattributed=unattributed, blamed_distribution=distribution,
                       blame_methods=dict(methods.most_common()), steps=steps,
                       alerts=[a for s in steps if (a := _alert(s, alert_drop, min_runs)) is not None],
                       model_usage=by_purpose(calls), model_trend=_model_trend(calls, period),
                       judge_spend=_judge_spend(calls))


def _alert(step: StepStats, drop: float, min_runs: int) -> Alert | None:
    """Compare the latest period with gate data against the one before it."""
    points = [p for p in step.trend if p.gated_runs >= min_runs and p.gate_pass_rate is not None]
    if len(points) < 2:
        return None
    previous, current = points[-2], points[-1]
    previous_rate, current_rate = previous.gate_pass_rate, current.gate_pass_rate
    assert previous_rate is not None and current_rate is not None  # points without a rate were left out above
    points_dropped = round((previous_rate - current_rate) * 100, 2)
    if points_dropped < drop:
        return None
    return Alert(step_id=step.step_id, previous_period=previous.period, current_period=current.period,
                 previous=previous_rate, current=current_rate, drop_points=points_dropped,
                 message=f"step {step.step_id!r}: gate pass rate fell from {previous_rate:.0%} "
                         f"({previous.period}) to {current_rate:.0%} ({current.period}), "
                         f"{points_dropped:g} points")


def blame_source(report: StatsReport) -> str:
    """One line saying where the blame shares come from, for the CLI and the dashboard alike."""
    if not report.blame_methods:
        return ""
    methods = ", ".join(f"{method} {runs}" for method, runs in report.blame_methods.items())
    return f"blame from each run's explaining attribution record: {methods} run(s)"
