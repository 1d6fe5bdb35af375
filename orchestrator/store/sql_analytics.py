"""The analytics rows of :mod:`orchestrator.store.analytics`, computed with GROUP BY on SQLite and PostgreSQL.

Each function runs one statement whose result has one row per step and period (or per reward
value, run state, attribution method): the database reads the records, Python reads only the
sums. Two expressions differ by dialect, and only they: rounding a timestamp down to its period
(``CAST`` truncates on SQLite, rounds on PostgreSQL) and reading a number out of the JSON text
of an LLM attempt.

Records written before the ``gate_count`` column existed have it NULL: their verdicts are
counted from ``gate_results`` (a correlated lookup by the indexed ``record_id``, paid only for
those records).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from orchestrator.store.analytics import (
    BY_AGENT_RANK,
    METHOD_PREFERENCE,
    PERIOD_OFFSET,
    PERIOD_SECONDS,
    AttributionCounts,
    NondeterminismCounts,
    OutcomeCounts,
    OutcomeSummary,
    RunCounts,
    StepPeriodCounts,
    TrajectoryCounts,
)

Read = Callable[..., Any]
"""``SqlStore.read``: runs statements in one short transaction and returns their rows."""

EARLIEST = -1e18
"""``since`` when none is given: before any timestamp."""


def _bucket(expr: str, period: str, dialect: str) -> str:
    size, offset = PERIOD_SECONDS[period], PERIOD_OFFSET[period]
    down = f"FLOOR(({expr} + {offset}) / {size})" if dialect == "postgresql" \
        else f"CAST(({expr} + {offset}) / {size} AS INTEGER)"  # timestamps are positive: truncation is floor
    return f"({down} * {size} - {offset})"


def _json_number(column: str, path: tuple[str, ...], dialect: str) -> str:
    if dialect == "postgresql":
        return f"CAST(CAST({column} AS JSON) #>> '{{{','.join(path)}}}' AS DOUBLE PRECISION)"
    return f"json_extract({column}, '$.{'.'.join(path)}')"


def _window(period: str, dialect: str) -> str:
    """The CTE ``win``: production runs in the window with the start of their period.

    MATERIALIZED: computed once (one index seek per run for its first step's start), not again per record.
    """
    return f"""
    win AS MATERIALIZED (
      SELECT run_pk, {_bucket('t0', period, dialect)} AS period_start FROM (
        SELECT r.id AS run_pk,
               COALESCE((SELECT MIN(s.started_at) FROM step_records s WHERE s.run_pk = r.id), r.created_at) AS t0
        FROM runs r WHERE r.workflow = :workflow AND r.kind = 'run') rs
      WHERE t0 >= :since)"""


_GATE_COUNT = ("CASE WHEN s.gate_count IS NULL THEN (SELECT COUNT(*) FROM gate_results g WHERE g.record_id = s.id) "
               "ELSE s.gate_count END")
_GATES_FAILED = ("CASE WHEN s.gate_count IS NULL THEN (SELECT COUNT(*) FROM gate_results g "
                 "WHERE g.record_id = s.id AND NOT g.passed) ELSE s.gates_failed END")


def step_period_counts(read: Read, dialect: str, workflow: str, period: str,
                       since: float | None) -> list[StepPeriodCounts]:
    """One pass over the window's records grouped by (step, period), counting distinct runs; only the
    gate verdicts need each (run, step)'s first gated attempt, so only gated records are grouped per run."""
    llm = "CASE WHEN s.origin = 'executed' AND s.llm IS NOT NULL THEN {} END"

    def number(*path: str) -> str:
        return llm.format(_json_number("s.llm", path, dialect))

    sql = f"""
    WITH {_window(period, dialect)},
    flat AS (
      SELECT s.step_id, w.period_start, MIN(s.agent) AS agent, MIN(s.id) AS first_id,
             COUNT(DISTINCT s.run_pk) AS runs, COUNT(DISTINCT CASE WHEN {_GATE_COUNT} > 0 THEN s.run_pk END) AS gated,
             COUNT(*) AS attempts, SUM(CASE WHEN s.status = 'failed' THEN 1 ELSE 0 END) AS failures,
             SUM(CASE WHEN s.status = 'gate_failed' THEN 1 ELSE 0 END) AS gate_failures,
             SUM(CASE WHEN s.attempt > 1 THEN 1 ELSE 0 END) AS retries,
             COUNT({llm.format('1')}) AS model_records, SUM({number('calls')}) AS calls,
             SUM({number('usage', 'input_tokens')}) AS tin, SUM({number('usage', 'output_tokens')}) AS tout,
             COUNT({number('cost')}) AS priced, SUM({number('cost')}) AS cost
      FROM win w JOIN step_records s ON s.run_pk = w.run_pk
      GROUP BY s.step_id, w.period_start),
    first_gated AS (
      SELECT s.step_id, w.period_start,
             MIN(CAST(s.id AS BIGINT) * 2 + CASE WHEN {_GATES_FAILED} > 0 THEN 1 ELSE 0 END) AS first_gate
      FROM win w JOIN step_records s ON s.run_pk = w.run_pk
      WHERE s.gate_count > 0 OR (s.gate_count IS NULL AND {_GATE_COUNT} > 0)
      GROUP BY s.run_pk, s.step_id, w.period_start),
    passes AS (
      SELECT step_id, period_start, SUM(CASE WHEN first_gate % 2 = 0 THEN 1 ELSE 0 END) AS passes
      FROM first_gated GROUP BY step_id, period_start)
    SELECT f.step_id, f.period_start, f.agent, f.first_id, f.runs, f.gated, p.passes, f.attempts, f.failures,
           f.gate_failures, f.retries, f.model_records, f.calls, f.tin, f.tout, f.priced, f.cost
    FROM flat f LEFT JOIN passes p ON p.step_id = f.step_id AND p.period_start = f.period_start
    ORDER BY f.period_start, f.first_id"""
    rows = read(text(sql).bindparams(workflow=workflow, since=EARLIEST if since is None else since))
    return [StepPeriodCounts(
        step_id=r.step_id, period_start=float(r.period_start), agent=r.agent, first_record=int(r.first_id),
        runs=int(r.runs), gated_runs=int(r.gated), gate_passes=int(r.passes or 0), attempts=int(r.attempts),
        failures=int(r.failures), gate_failures=int(r.gate_failures), retries=int(r.retries),
        model_records=int(r.model_records or 0), model_calls=int(r.calls or 0), input_tokens=int(r.tin or 0),
        output_tokens=int(r.tout or 0), priced_records=int(r.priced or 0), cost=float(r.cost or 0.0))
        for r in rows]


def outcome_counts(read: Read, dialect: str, workflow: str, period: str,
                   since: float | None) -> list[OutcomeCounts]:
    sql = f"""
    WITH {_window(period, dialect)},
    latest AS (SELECT w.run_pk, w.period_start,
                      (SELECT MAX(o.id) FROM outcomes o WHERE o.run_pk = w.run_pk) AS oid FROM win w),
    judged AS (
      SELECT l.run_pk, l.period_start, CASE WHEN NOT o.correct THEN 1 ELSE 0 END AS incorrect, l.oid
      FROM latest l LEFT JOIN outcomes o ON o.id = l.oid),
    chosen AS (
      SELECT j.period_start, j.incorrect,
             CASE WHEN j.incorrect = 1 THEN
               (SELECT a.id FROM attributions a WHERE a.run_pk = j.run_pk
                ORDER BY {attribution_rank_sql("a")}, a.id DESC LIMIT 1) END AS aid
      FROM judged j)
    SELECT c.period_start, c.incorrect, a.blamed_step, a.method, COUNT(*) AS runs
    FROM chosen c LEFT JOIN attributions a ON a.id = c.aid
    GROUP BY c.period_start, c.incorrect, a.blamed_step, a.method ORDER BY c.period_start"""
    rows = read(text(sql).bindparams(workflow=workflow, since=EARLIEST if since is None else since))
    return [OutcomeCounts(period_start=float(r.period_start), incorrect=bool(r.incorrect),
                          blamed_step=r.blamed_step, runs=int(r.runs), method=r.method) for r in rows]


def attribution_rank_sql(alias: str) -> str:
    """:func:`~orchestrator.store.analytics.attribution_rank` as a SQL expression on ``alias``'s row.

    Parameters are stored as compact JSON (``{"by":"agent",...}``), so a LIKE finds agent credit."""
    by_agent = f"{alias}.params LIKE '%\"by\":\"agent\"%'"
    cases = " ".join(f"WHEN {alias}.method = '{method}' THEN "
                     + (f"CASE WHEN {by_agent} THEN {BY_AGENT_RANK} ELSE {rank} END" if rank < BY_AGENT_RANK
                        else str(rank))
                     for method, rank in METHOD_PREFERENCE.items())
    return f"(CASE {cases} ELSE {len(METHOD_PREFERENCE)} END)"


def _production(workflow: str | None) -> str:
    """The WHERE condition on ``runs r`` for production runs of one workflow (``:workflow``) or of all."""
    return "r.kind = 'run'" + ("" if workflow is None else " AND r.workflow = :workflow")


def _bind(sql: str, workflow: str | None, **values: Any) -> Any:
    return text(sql).bindparams(**values, **({} if workflow is None else {"workflow": workflow}))


def trajectory_counts(read: Read, workflow: str | None) -> list[TrajectoryCounts]:
    sql = f"""
    SELECT steps, attempts, COUNT(*) AS runs FROM (
      SELECT r.id, COUNT(s.id) AS attempts, COUNT(DISTINCT s.step_id) AS steps
      FROM runs r LEFT JOIN step_records s ON s.run_pk = r.id AND s.status <> 'skipped'
      WHERE {_production(workflow)} GROUP BY r.id) per_run
    GROUP BY steps, attempts ORDER BY steps, attempts"""
    return [TrajectoryCounts(steps=int(r.steps), attempts=int(r.attempts), runs=int(r.runs))
            for r in read(_bind(sql, workflow))]


def outcome_summary(read: Read, workflow: str | None, window: int) -> OutcomeSummary:
    scored = f"""
    SELECT r.created_at, r.id, o.value, o.correct, o.source, o.termination
    FROM runs r JOIN (SELECT run_pk, MAX(id) AS oid FROM outcomes GROUP BY run_pk) l ON l.run_pk = r.id
    JOIN outcomes o ON o.id = l.oid WHERE {_production(workflow)}"""
    grouped = _bind(f"""SELECT value, CASE WHEN correct THEN 1 ELSE 0 END AS correct, source, termination,
                       COUNT(*) AS runs FROM ({scored}) sc GROUP BY value, 2, source, termination""", workflow)
    ends = [_bind(f"SELECT AVG(value) AS mean FROM (SELECT value FROM ({scored}) sc "
                  f"ORDER BY created_at {order}, id {order} LIMIT :window) ends", workflow, window=window)
            for order in ("ASC", "DESC")]
    rows, early, recent = read(grouped, *ends)
    values: dict[float, int] = {}
    sources: dict[str, int] = {}
    terminations: dict[str, int] = {}
    for r in rows:
        values[float(r.value)] = values.get(float(r.value), 0) + int(r.runs)
        sources[r.source] = sources.get(r.source, 0) + int(r.runs)
        terminations[r.termination] = terminations.get(r.termination, 0) + int(r.runs)
    return OutcomeSummary(
        scored=sum(values.values()), correct=sum(int(r.runs) for r in rows if r.correct),
        nonzero=sum(n for v, n in values.items() if v > 0), values=values, by_source=sources,
        by_termination=terminations, early_mean=None if early[0].mean is None else float(early[0].mean),
        recent_mean=None if recent[0].mean is None else float(recent[0].mean))


def run_counts(read: Read, workflow: str | None) -> list[RunCounts]:
    where = "" if workflow is None else "WHERE workflow = :workflow"
    sql = f"""
    SELECT workflow, workflow_id, kind,
           CASE WHEN status = 'running' AND lease_expires_at < :now THEN 'interrupted' ELSE status END AS shown,
           COUNT(*) AS runs
    FROM runs {where} GROUP BY workflow, workflow_id, kind, 4 ORDER BY workflow, workflow_id, kind, 4"""
    statement = text(sql).bindparams(now=time.time())
    if workflow is not None:
        statement = statement.bindparams(workflow=workflow)
    return [RunCounts(workflow=r.workflow, workflow_id=int(r.workflow_id), kind=r.kind, status=r.shown,
                      runs=int(r.runs)) for r in read(statement)]


def attribution_counts(read: Read, workflow: str) -> list[AttributionCounts]:
    sql = """
    SELECT a.method, a.params, COUNT(*) AS records, SUM(a.cost) AS cost
    FROM attributions a JOIN runs r ON r.id = a.run_pk WHERE r.workflow = :workflow
    GROUP BY a.method, a.params ORDER BY MIN(a.id)"""
    return [AttributionCounts(method=r.method, params=r.params, records=int(r.records), cost=int(r.cost or 0))
            for r in read(text(sql).bindparams(workflow=workflow))]


def _first_outputs(dialect: str) -> str:
    """Each production run's first attempt of each step that produced an output, in one pass.

    SQLite returns the other columns of the row holding ``MIN(id)`` (a documented guarantee of
    its bare columns); PostgreSQL says the same with ``DISTINCT ON``.
    """
    where = ("r.workflow = :workflow AND r.kind = 'run' AND s.status IN ('succeeded', 'gate_failed') "
             "AND s.output IS NOT NULL")
    if dialect == "postgresql":
        return f"""SELECT DISTINCT ON (s.run_pk, s.step_id) s.id, s.step_id, s.inputs_digest, s.output_digest
                   FROM step_records s JOIN runs r ON r.id = s.run_pk WHERE {where}
                   ORDER BY s.run_pk, s.step_id, s.id"""
    return f"""SELECT MIN(s.id) AS id, s.step_id, s.inputs_digest, s.output_digest
               FROM step_records s JOIN runs r ON r.id = s.run_pk WHERE {where} GROUP BY s.run_pk, s.step_id"""


def nondeterminism_counts(read: Read, dialect: str, workflow: str) -> list[NondeterminismCounts]:
    sql = f"""
    WITH groups AS (
      SELECT step_id, inputs_digest AS inputs, MIN(id) AS first_id, COUNT(*) AS n,
             COUNT(DISTINCT output_digest) AS outputs
      FROM ({_first_outputs(dialect)}) firsts GROUP BY step_id, inputs_digest)
    SELECT step_id, MIN(first_id) AS first_id,
           SUM(CASE WHEN inputs IS NOT NULL AND n >= 2 THEN 1 ELSE 0 END) AS repeated,
           SUM(CASE WHEN inputs IS NOT NULL AND n >= 2 AND outputs > 1 THEN 1 ELSE 0 END) AS varied,
           SUM(CASE WHEN inputs IS NULL THEN n ELSE 0 END) AS uncovered
    FROM groups GROUP BY step_id ORDER BY 2"""
    return [NondeterminismCounts(step_id=r.step_id, first_record=int(r.first_id), repeated_inputs=int(r.repeated),
                                 varied=int(r.varied), not_covered=int(r.uncovered))
            for r in read(text(sql).bindparams(workflow=workflow))]
