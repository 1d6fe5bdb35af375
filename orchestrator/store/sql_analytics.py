"""The analytics rows of :mod:`orchestrator.store.analytics` on SQLite and PostgreSQL, read from a summary.

Each read first brings the summary up to date (:mod:`orchestrator.store.sql_summary`, which says why
the counts are kept there and who keeps them), then adds up as many of its rows as it shows steps
and periods. Small results (the outcome summary, run and attribution counts) are read straight from
the source tables. A database this process may not write gets the live aggregation, slow but exact:
the outcome and trajectory counts read the summary's per-run rows computed from the records
(:func:`~orchestrator.store.sql_summary.run_rows_sql`) where they read ``analytics_runs``; the step and
non-determinism counts come from :mod:`orchestrator.store.sql_live_analytics`.
"""

from __future__ import annotations

import time

from sqlalchemy import case, func, select, text

from orchestrator.store.analytics import (
    AttributionCounts,
    NondeterminismCounts,
    OutcomeCounts,
    OutcomeSummary,
    RunCounts,
    StepPeriodCounts,
    TrajectoryCounts,
    period_start,
)
from orchestrator.store.sql_counting import (
    DAY,
    VALUES,
    DayCounts,
    Read,
    bind_workflow,
    contributions,
    day_expr,
    day_of,
    production,
)
from orchestrator.store.sql_live_analytics import (
    live_nondeterminism_counts,
    live_step_period_counts,
)
from orchestrator.store.sql_summary import SqlDatabase, Summary, run_rows_sql
from orchestrator.store.tables import TABLES, interrupted

# -- the Store methods ----------------------------------------------------------------------------------


def _since_day(since: float | None) -> int | None:
    return None if since is None else day_of(since)


def _partial_runs(dialect: str) -> str:
    """The runs of ``:workflow`` starting at or after ``:since`` on the day ``since`` falls in: the one day a
    ``since`` cuts through, counted from its runs rather than from the per-day rows."""
    return (f"SELECT run_pk FROM analytics_runs WHERE workflow = :workflow AND started_at >= :since "
            f"AND started_at < :until AND {day_expr('started_at', dialect)} = :since_day")


def step_period_counts(store: SqlDatabase, workflow: str, period: str, since: float | None) -> list[StepPeriodCounts]:
    """The per-day rows of the workflow's steps summed into periods (plus, with ``since``, the runs of the
    day it cuts through, counted from their records)."""
    summary = Summary(store)
    if summary.update() is None:
        return live_step_period_counts(store.read, summary.dialect, workflow, period, since)
    first = _since_day(since)
    with summary.snapshot() as (conn, marks):
        days = conn.execute(text(f"""
            SELECT sr.step_id AS step_id, d.day AS day, {', '.join(f'd.{n} AS {n}' for n in VALUES)}
            FROM analytics_series sr JOIN analytics_days d ON d.series = sr.id
            WHERE sr.workflow = :workflow AND d.day > :after"""),
            {"workflow": workflow, "after": -(2 ** 31) if first is None else first}).all()
        partial: dict[tuple[str, str, int], DayCounts] = {}
        if since is not None and first is not None:
            partial = contributions(conn, summary.dialect, _partial_runs(summary.dialect),
                                     {"workflow": workflow, "since": since, "until": (first + 1) * DAY + 1,
                                      "since_day": first}, marks.records)
    merged: dict[tuple[str, float], DayCounts] = {}
    for r in days:
        merged.setdefault((r.step_id, period_start(int(r.day) * DAY, period)), DayCounts()).add(DayCounts.of(r))
    for (_, step, day), counts in partial.items():
        merged.setdefault((step, period_start(day * DAY, period)), DayCounts()).add(counts)
    rows = [c.in_period(step, start) for (step, start), c in merged.items() if c.runs > 0]
    return sorted(rows, key=lambda r: (r.period_start, r.first_record))


def _states_by_day(runs: str, where: str, dialect: str) -> str:
    """Per day and outcome state, how many of the per-run rows ``ar`` (``runs``: ``analytics_runs`` or the
    same rows computed live) that ``where`` keeps start on it."""
    return f"""SELECT {day_expr('ar.started_at', dialect)} AS day, ar.incorrect AS incorrect,
                      ar.blamed_step AS blamed_step, ar.method AS method, COUNT(*) AS runs
               FROM {runs} ar WHERE {where} GROUP BY 1, 2, 3, 4"""


def outcome_counts(store: SqlDatabase, workflow: str, period: str, since: float | None) -> list[OutcomeCounts]:
    """Summed from the summary's per-day outcome counts (plus, with ``since``, the runs of the day it cuts
    through), or (when the summary cannot be written) from the per-run rows it would hold, computed live."""
    summary = Summary(store)
    first = _since_day(since)
    if summary.update() is None:
        per_run = run_rows_sql(summary.dialect, "r.workflow = :workflow", bounded=False, trajectory=False)
        rows = store.read(text(_states_by_day(f"({per_run})", "ar.started_at >= :since", summary.dialect))
                          .bindparams(workflow=workflow, since=-1e18 if since is None else since))
    else:
        with summary.snapshot() as (conn, _):
            rows = list(conn.execute(text("""
                SELECT day, incorrect, blamed_step, method, runs FROM analytics_outcomes
                WHERE workflow = :workflow AND day > :after"""),
                {"workflow": workflow, "after": -(2 ** 31) if first is None else first}).all())
            if since is not None and first is not None:
                partial = _states_by_day("analytics_runs", f"ar.run_pk IN ({_partial_runs(summary.dialect)})",
                                         summary.dialect)
                rows += conn.execute(text(partial), {"workflow": workflow, "since": since,
                                                     "until": (first + 1) * DAY + 1, "since_day": first}).all()
    counts: dict[tuple[float, bool, str | None, str | None], int] = {}
    for r in rows:
        key = (period_start(int(r.day) * DAY, period), bool(r.incorrect), r.blamed_step, r.method)
        counts[key] = counts.get(key, 0) + int(r.runs)
    return [OutcomeCounts(period_start=start, incorrect=bad, blamed_step=who, runs=n, method=method)
            for (start, bad, who, method), n in sorted(counts.items(), key=lambda kv: kv[0][0]) if n]


def trajectory_counts(store: SqlDatabase, workflow: str | None) -> list[TrajectoryCounts]:
    """Summed from the summary's trajectory counts, or (when the summary cannot be written) from the per-run rows
    it would hold, computed from the records (each row one run)."""
    summary = Summary(store)
    if summary.update() is None:
        runs = "TRUE" if workflow is None else "r.workflow = :workflow"
        per_run = run_rows_sql(summary.dialect, runs, bounded=False)
        trajectories = f"(SELECT steps, attempts, 1 AS runs FROM ({per_run}) ar) per_run"
    else:
        trajectories = "analytics_trajectories" + ("" if workflow is None else " WHERE workflow = :workflow")
    rows = store.read(bind_workflow(f"SELECT steps, attempts, SUM(runs) AS runs FROM {trajectories} "
                                    f"GROUP BY steps, attempts ORDER BY steps, attempts", workflow))
    return [TrajectoryCounts(steps=int(r.steps), attempts=int(r.attempts), runs=int(r.runs)) for r in rows if r.runs]


def nondeterminism_counts(store: SqlDatabase, workflow: str) -> list[NondeterminismCounts]:
    summary = Summary(store)
    if summary.update() is None:
        return live_nondeterminism_counts(store.read, summary.dialect, workflow)
    rows = store.read(text("SELECT step_id, first_output, repeated, varied, not_covered FROM analytics_series "
                           "WHERE workflow = :workflow AND first_output IS NOT NULL ORDER BY first_output")
                      .bindparams(workflow=workflow))
    return [NondeterminismCounts(step_id=r.step_id, first_record=int(r.first_output), repeated_inputs=int(r.repeated),
                                 varied=int(r.varied), not_covered=int(r.not_covered)) for r in rows]


# -- read directly from the source tables (small results, or the summary cannot be written) ------------------


def outcome_summary(read: Read, workflow: str | None, window: int) -> OutcomeSummary:
    """The latest outcome of each scored production run, summed up in Python from one query: as many rows as
    scored runs (each checked for a newer outcome by its indexed ``run_pk``), in creation order for the means
    of the first and last ``window`` of them. Not from the summary: those means need the runs in order.

    Not a join on each run's ``MAX(id)``: PostgreSQL planned that as a nested loop (over a minute at 50 000 runs).
    ``run_pk + 0`` makes the outcomes drive the join (one lookup per scored run, not one per run: 160 -> 40 ms
    on PostgreSQL at 50 000 runs, 10 000 of them scored).
    """
    rows = read(bind_workflow(f"""
        SELECT o.value, o.correct, o.source, o.termination
        FROM outcomes o JOIN runs r ON r.id = o.run_pk + 0
        WHERE {production(workflow)}
          AND NOT EXISTS (SELECT 1 FROM outcomes newer WHERE newer.run_pk = o.run_pk AND newer.id > o.id)
        ORDER BY r.created_at, r.id""", workflow))
    values: dict[float, int] = {}
    sources: dict[str, int] = {}
    terminations: dict[str, int] = {}
    for r in rows:
        values[float(r.value)] = values.get(float(r.value), 0) + 1
        sources[r.source] = sources.get(r.source, 0) + 1
        terminations[r.termination] = terminations.get(r.termination, 0) + 1
    early, recent = rows[:window], rows[-window:] if rows and window > 0 else []
    return OutcomeSummary(
        scored=len(rows), correct=sum(1 for r in rows if r.correct), nonzero=sum(1 for r in rows if r.value > 0),
        values=values, by_source=sources, by_termination=terminations,
        early_mean=sum(float(r.value) for r in early) / len(early) if early else None,
        recent_mean=sum(float(r.value) for r in recent) / len(recent) if recent else None)


def run_counts(read: Read, workflow: str | None) -> list[RunCounts]:
    runs = TABLES["runs"].c
    shown = case((interrupted(time.time()), "interrupted"), else_=runs.status)
    key = (runs.workflow, runs.workflow_id, runs.kind, shown)
    statement = select(*key[:3], shown.label("shown"), func.count().label("runs")).group_by(*key).order_by(*key)
    if workflow is not None:
        statement = statement.where(runs.workflow == workflow)
    return [RunCounts(workflow=r.workflow, workflow_id=int(r.workflow_id), kind=r.kind, status=r.shown,
                      runs=int(r.runs)) for r in read(statement)]


def attribution_counts(read: Read, workflow: str) -> list[AttributionCounts]:
    sql = """
    SELECT a.method, a.params, COUNT(*) AS records, SUM(a.cost) AS cost
    FROM attributions a JOIN runs r ON r.id = a.run_pk WHERE r.workflow = :workflow
    GROUP BY a.method, a.params ORDER BY MIN(a.id)"""
    return [AttributionCounts(method=r.method, params=r.params, records=int(r.records), cost=int(r.cost or 0))
            for r in read(text(sql).bindparams(workflow=workflow))]
