"""The step-level dashboard: gate pass rates over time and the failure attribution distribution.

For each step of a workflow: in how many runs it ran, how often its output passed its gates
(its quality signal, judged on the step's first gated attempt in each run), the trend of that
rate per day or week, and its share of the incorrect outcomes whose attribution blamed it (the
seed's "one metric to track from day one"). An alert fires when a step's pass rate drops by
``alert_drop`` points or more against the previous period (96% -> 89% is a 7-point drop).

:func:`compute_stats` reads the store and returns a :class:`StatsReport` (pydantic); the CLI
prints it and the TUI dashboard renders the same model. Only runs of kind ``run`` count:
replays and forks are not production traffic.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.documents import usage_totals
from orchestrator.errors import InputError
from orchestrator.jsonio import loads
from orchestrator.records import AttributionView, OutcomeView, RunView, iso
from orchestrator.store import StepHistoryRow, Store

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
    model_calls: int = 0
    """Model calls of the step's LLM attempts in the runs counted (retries included)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD; None when the step made no model call or a model's price is unknown."""


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
    steps: list[StepStats] = Field(default_factory=list)
    alerts: list[Alert] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


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
    """The named workflow, or the only one with runs; else an InputError listing them."""
    if workflow is not None:
        return workflow
    names = sorted({r.workflow for r in store.list_runs(kind="run", limit=MAX_RUNS)})
    if not names:
        raise InputError("no runs are stored yet; run a workflow first")
    if len(names) > 1:
        raise InputError(f"runs of several workflows are stored: {names}; choose one with --workflow")
    return names[0]


def _attribution_for(outcome: OutcomeView, views: list[AttributionView]) -> AttributionView | None:
    linked = [v for v in views if v.outcome_id == outcome.id]
    chosen = linked or views
    return chosen[-1] if chosen else None


def compute_stats(store: Store, workflow: str | None = None, *, since: float | None = None, period: str = "week",
                  alert_drop: float = 5.0, min_runs: int = 1, now: float | None = None) -> StatsReport:
    """The dashboard of one workflow (the only one stored when ``workflow`` is None)."""
    if period not in PERIODS:
        raise InputError(f"--period must be one of {list(PERIODS)}; got {period!r}")
    name = choose_workflow(store, workflow)
    history = store.step_history(name)  # a run belongs to the window its first step started in
    runs = sorted(store.list_runs(workflow=name, kind="run", limit=MAX_RUNS), key=lambda r: r.created_at)
    return build_stats(name, runs, history, {r.run_id: store.outcomes(r.run_id) for r in runs},
                       store.attributions(workflow=name), step_order=_step_order(store, runs), period=period,
                       since=since, alert_drop=alert_drop, min_runs=min_runs, now=now)


def _step_order(store: Store, runs: list[RunView]) -> list[tuple[str, str | None]]:
    if not runs:
        return []
    definition, _ = store.workflow_definition(runs[-1].workflow_id)
    return [(s["id"], s.get("agent") or s["id"]) for s in definition.get("steps", [])]


def _model_usage(history: list[StepHistoryRow], run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """Per step: model calls, tokens and cost of its executed LLM attempts in the counted runs."""
    records: dict[str, list[dict[str, Any]]] = {}
    for row in history:
        if row.llm is not None and row.run_id in run_ids:
            records.setdefault(row.step_id, []).append(loads(row.llm))
    out: dict[str, dict[str, Any]] = {}
    for step_id, calls in records.items():
        totals = usage_totals(calls) or {}
        out[step_id] = {"model_calls": totals.get("calls", 0), "input_tokens": totals.get("input_tokens", 0),
                        "output_tokens": totals.get("output_tokens", 0), "cost": totals.get("cost")}
    return out


def build_stats(workflow: str, runs: list[RunView], history: list[StepHistoryRow],
                outcomes: dict[str, list[OutcomeView]], attributions: list[AttributionView], *,
                step_order: Sequence[tuple[str, str | None]] = (), period: str = "week", since: float | None = None,
                alert_drop: float = 5.0, min_runs: int = 1, now: float | None = None) -> StatsReport:
    """Pure: the dashboard from already-read runs, step history, outcomes and attribution records.

    A run belongs to the period in which its first step started (its creation time if it has no
    step records); with ``since``, runs whose steps all started earlier are left out.
    """
    started: dict[str, float] = {}
    for row in history:
        started[row.run_id] = min(started.get(row.run_id, row.started_at), row.started_at)
    if since is not None:
        runs = [r for r in runs if started.get(r.run_id, r.created_at) >= since]
    run_ids = {r.run_id for r in runs}
    run_period = {r.run_id: period_of(started.get(r.run_id, r.created_at), period) for r in runs}
    # one observation per (run, step): did the first gated attempt pass?
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for row in history:
        if row.run_id not in run_ids:
            continue
        obs = seen.setdefault((row.run_id, row.step_id), {"agent": row.agent, "passed": None,
                                                                  "started_at": row.started_at})
        if obs["passed"] is None and row.gates_passed is not None:
            obs["passed"] = bool(row.gates_passed)
    # incorrect outcomes and whom their attribution blamed
    by_run: dict[str, list[AttributionView]] = {}
    for view in attributions:
        by_run.setdefault(view.run_id, []).append(view)
    blamed_of: dict[str, str | None] = {}
    for run in runs:
        found = outcomes.get(run.run_id) or []
        if found and found[-1].correct is False:
            chosen = _attribution_for(found[-1], by_run.get(run.run_id, []))
            blamed_of[run.run_id] = chosen.blamed_step if chosen is not None else None
    incorrect = len(blamed_of)
    order = [sid for sid, _ in step_order]
    agents = dict(step_order)
    for _, sid in seen:
        if sid not in agents:
            order.append(sid)
            agents[sid] = None
    for (_, sid), obs in seen.items():
        agents[sid] = agents.get(sid) or obs["agent"]

    usage = _model_usage(history, run_ids)
    periods = sorted({p for p in run_period.values()}, key=lambda p: p[1])
    incorrect_in = {p[0]: 0 for p in periods}
    for rid in blamed_of:
        incorrect_in[run_period[rid][0]] += 1
    steps: list[StepStats] = []
    for sid in order:
        points = {label: TrendPoint(period=label, start=start, incorrect=incorrect_in[label])
                  for label, start in periods}
        passes = gated = ran = 0
        passes_in = {label: 0 for label in points}
        for (rid, step_id), obs in seen.items():
            if step_id != sid:
                continue
            label = run_period[rid][0]
            points[label].runs += 1
            ran += 1
            if obs["passed"] is not None:
                points[label].gated_runs += 1
                gated += 1
                if obs["passed"]:
                    passes += 1
                    passes_in[label] += 1
        blamed_count = 0
        for rid, who in blamed_of.items():
            if who == sid:
                blamed_count += 1
                points[run_period[rid][0]].blamed += 1
        trend = []
        for label, point in points.items():
            if point.gated_runs:
                point.gate_pass_rate = round(passes_in[label] / point.gated_runs, 4)
            if point.incorrect:
                point.blamed_share = round(point.blamed / point.incorrect, 4)
            if point.runs or point.incorrect:
                trend.append(point)
        steps.append(StepStats(step_id=sid, agent=agents.get(sid), runs=ran, gated_runs=gated,
                               gate_pass_rate=round(passes / gated, 4) if gated else None, blamed=blamed_count,
                               blamed_share=round(blamed_count / incorrect, 4) if incorrect else 0.0, trend=trend,
                               **usage.get(sid, {})))
    alerts = [a for s in steps if (a := _alert(s, alert_drop, min_runs)) is not None]
    distribution = {s.step_id: s.blamed_share for s in steps if s.blamed}
    unattributed = sum(1 for who in blamed_of.values() if who is None)
    if unattributed:
        distribution["(unattributed)"] = round(unattributed / incorrect, 4)
    return StatsReport(workflow=workflow, period=period, since=iso(since), generated_at=iso(now or time.time()) or "",
                       runs=len(runs), incorrect_outcomes=incorrect, unattributed=unattributed,
                       blamed_distribution=distribution, steps=steps, alerts=alerts)


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
