"""What the analytics count, as SQL: the expressions and aggregates over step records that both the
summary (:mod:`orchestrator.store.sql_summary`) and the live aggregation
(:mod:`orchestrator.store.sql_live_analytics`) use, so that both count alike.

Two expressions differ by dialect: rounding a timestamp down to its day (``CAST`` truncates on
SQLite, rounds on PostgreSQL) and reading a number out of the JSON text of an LLM attempt.
Records written before the ``gate_count`` column existed have it NULL: their verdicts are counted
from ``gate_results`` (a correlated lookup by the indexed ``(run_pk, record_id)``, paid only for
those records).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from orchestrator.approvals import AWAITING_APPROVAL, TOOL_CHECKPOINT
from orchestrator.store.analytics import (
    BY_AGENT_RANK,
    METHOD_PREFERENCE,
    PERIOD_OFFSET,
    PERIOD_SECONDS,
    PRODUCTION_SQL,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


Read = Callable[..., Any]
"""``SqlStore.read``: runs statements in one short transaction and returns their rows."""

DAY = 86400
"""The summary's period: a week is the sum of its seven UTC days (weeks start on a day boundary)."""


# -- dialect details ------------------------------------------------------------------------------------


def bucket(expr: str, period: str, dialect: str) -> str:
    size, offset = PERIOD_SECONDS[period], PERIOD_OFFSET[period]
    down = f"FLOOR(({expr} + {offset}) / {size})" if dialect == "postgresql" \
        else f"CAST(({expr} + {offset}) / {size} AS INTEGER)"  # timestamps are positive: truncation is floor
    return f"({down} * {size} - {offset})"


def day_expr(expr: str, dialect: str) -> str:
    """The day number (days since the epoch, UTC) of a timestamp expression."""
    if dialect == "postgresql":
        return f"CAST(FLOOR({expr} / {DAY}) AS INTEGER)"
    return f"CAST({expr} / {DAY} AS INTEGER)"  # timestamps are positive: truncation is floor


def day_of(ts: float) -> int:
    """:func:`day_expr` in Python (the same float division, then floor)."""
    return math.floor(ts / DAY)


def json_number(column: str, path: tuple[str, ...], dialect: str) -> str:
    if dialect == "postgresql":
        return f"CAST(CAST({column} AS JSON) #>> '{{{','.join(path)}}}' AS DOUBLE PRECISION)"
    return f"json_extract({column}, '$.{'.'.join(path)}')"


GATE_COUNT = ("CASE WHEN s.gate_count IS NULL THEN (SELECT COUNT(*) FROM gate_results g "
               "WHERE g.run_pk = s.run_pk AND g.record_id = s.id) ELSE s.gate_count END")
GATES_FAILED = ("CASE WHEN s.gate_count IS NULL THEN (SELECT COUNT(*) FROM gate_results g "
                 "WHERE g.run_pk = s.run_pk AND g.record_id = s.id AND NOT g.passed) ELSE s.gates_failed END")
GATED = f"(s.gate_count > 0 OR (s.gate_count IS NULL AND {GATE_COUNT} > 0))"


def attribution_rank_sql(alias: str) -> str:
    """:func:`~orchestrator.store.analytics.attribution_rank` as a SQL expression on ``alias``'s row.

    Parameters are stored as compact JSON (``{"by":"agent",...}``), so a LIKE finds agent credit."""
    by_agent = f"{alias}.params LIKE '%\"by\":\"agent\"%'"
    cases = " ".join(f"WHEN {alias}.method = '{method}' THEN "
                     + (f"CASE WHEN {by_agent} THEN {BY_AGENT_RANK} ELSE {rank} END" if rank < BY_AGENT_RANK
                        else str(rank))
                     for method, rank in METHOD_PREFERENCE.items())
    return f"(CASE {cases} ELSE {len(METHOD_PREFERENCE)} END)"


# -- what one set of runs contributes per step and day ----------------------------------------------------

COUNTERS = ("runs", "gated_runs", "gate_passes", "attempts", "failures", "gate_failures", "retries", "model_records",
            "model_calls", "input_tokens", "output_tokens", "priced_records", "skipped_runs")


@dataclass(slots=True)
class DayCounts:
    """One step's counts over some runs of one day; added and subtracted as the summary changes."""

    agent: str | None = None
    first_record: int | None = None
    runs: int = 0
    gated_runs: int = 0
    gate_passes: int = 0
    attempts: int = 0
    failures: int = 0
    gate_failures: int = 0
    retries: int = 0
    model_records: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    priced_records: int = 0
    cost: float = 0.0
    skipped_runs: int = 0

    def add(self, other: DayCounts, sign: int = 1) -> None:
        """Add (``sign`` 1) or take away (-1) another's counts; the smallest agent and record id only grow
        sets, so they are merged only when adding."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + sign * getattr(other, name))
        self.cost += sign * other.cost
        if sign > 0:
            if other.agent is not None and (self.agent is None or other.agent < self.agent):
                self.agent = other.agent
            if other.first_record is not None and (self.first_record is None or other.first_record < self.first_record):
                self.first_record = other.first_record


RECORD_COLUMNS = ("id", "run_pk", "step_id", "agent", "status", "attempt", "origin", "llm", "gate_count",
                  "gates_failed", "started_at", "item_index", "skip_reason", "iteration", "error_type")
"""What the counts read of a step record (never its inputs or output)."""


EXECUTED = "s.status <> 'skipped' AND s.origin <> 'collected'"
"""Records of work done: not a skip, and not the list a mapped step collected from its instances."""

UNIT = ("s.step_id || '#' || COALESCE(CAST(s.item_index AS VARCHAR(12)), '') || '#' "
        "|| COALESCE(CAST(s.iteration AS VARCHAR(12)), '')")
"""What a trajectory counts as one step executed: a step, one instance of a mapped step, one iteration of a
loop."""


SKIPPED_BY_CONDITION = "s.status = 'skipped' AND s.skip_reason IS NOT NULL AND s.item_index IS NULL"
"""A step that its ``when`` (or a skipped upstream step) kept from running: the route a run did not take."""

RUN_UNIT = ("CAST(s.run_pk AS VARCHAR(20)) || '#' || COALESCE(CAST(s.item_index AS VARCHAR(12)), '') || '#' "
            "|| COALESCE(CAST(s.iteration AS VARCHAR(12)), '')")
"""What a gate pass rate counts once: a step in a run, each instance of a mapped step in a run, each
iteration of a loop (and the loop's own ``repeat`` verdict)."""


def records_of(run: str, bound: str, dialect: str, *, outer: bool = False) -> str:
    """A join clause giving ``s``: the step records of the run ``run`` (a column) with ids up to ``bound``.

    On PostgreSQL a LATERAL subquery (kept apart by ``OFFSET 0``) makes it one index lookup by ``run_pk``
    per run, whatever the statistics say: without them (autovacuum off) the planner chose merge joins
    over the whole index, 0.9 s to summarise 500 runs; ``id + 0`` keeps the bound (which only trims the
    newest records) from being taken for an index range. SQLite plans the plain join that way by itself
    and checks the bound on the index entry (with ``+ 0`` the first summary took 15% longer).
    """
    kind = "LEFT JOIN" if outer else "JOIN"
    if dialect == "postgresql":
        return (f"{kind} LATERAL (SELECT {', '.join(RECORD_COLUMNS)} FROM step_records WHERE run_pk = {run} "
                f"AND id + 0 <= {bound} OFFSET 0) s ON TRUE")
    return f"{kind} step_records s ON s.run_pk = {run} AND s.id <= {bound}"


GATE_FAILURES = ("SUM(CASE WHEN s.status = 'gate_failed' AND (s.error_type IS NULL OR s.error_type <> "
                 f"'{AWAITING_APPROVAL}') THEN 1 ELSE 0 END)")
"""Records whose gates stopped them: a pause for a person's approval (no gate failed) is none."""
ATTEMPTS = f"SUM(CASE WHEN s.status = 'running' AND s.error_type = '{TOOL_CHECKPOINT}' THEN 0 ELSE 1 END)"
"""Every record but the checkpoints an LLM step writes around an approved tool call (they are no attempt)."""


def record_aggregates(dialect: str) -> str:
    """The select list both the summary and the live aggregation take over a group of step records ``s``
    (everything but the gate passes, which need each run's first gated attempt); :func:`aggregated`
    reads it back."""
    llm = "CASE WHEN s.origin = 'executed' AND s.llm IS NOT NULL THEN {} END"

    def number(*path: str) -> str:
        return llm.format(json_number("s.llm", path, dialect))

    return f"""MIN(s.agent) AS agent, MIN(s.id) AS first_id, COUNT(DISTINCT s.run_pk) AS runs,
           COUNT(DISTINCT CASE WHEN {GATE_COUNT} > 0 THEN {RUN_UNIT} END) AS gated,
           {ATTEMPTS} AS attempts, SUM(CASE WHEN s.status = 'failed' THEN 1 ELSE 0 END) AS failures,
           {GATE_FAILURES} AS gate_failures,
           SUM(CASE WHEN s.attempt > 1 THEN 1 ELSE 0 END) AS retries,
           COUNT({llm.format('1')}) AS model_records, SUM({number('calls')}) AS calls,
           SUM({number('usage', 'input_tokens')}) AS tin, SUM({number('usage', 'output_tokens')}) AS tout,
           COUNT({number('cost')}) AS priced, SUM({number('cost')}) AS cost,
           COUNT(DISTINCT CASE WHEN {SKIPPED_BY_CONDITION} THEN s.run_pk END) AS skipped"""


def aggregated(row: Any) -> dict[str, Any]:
    """A row's :func:`record_aggregates` columns as the counts' fields (sums over no rows are NULL)."""
    return {"agent": row.agent, "first_record": int(row.first_id), "runs": int(row.runs),
            "gated_runs": int(row.gated), "attempts": int(row.attempts), "failures": int(row.failures),
            "gate_failures": int(row.gate_failures), "retries": int(row.retries),
            "model_records": int(row.model_records or 0), "model_calls": int(row.calls or 0),
            "input_tokens": int(row.tin or 0), "output_tokens": int(row.tout or 0),
            "priced_records": int(row.priced or 0), "cost": float(row.cost or 0.0),
            "skipped_runs": int(row.skipped or 0)}


def contributions(conn: Connection, dialect: str, runs_sql: str, params: dict[str, Any],
                   bound: int) -> dict[tuple[str, str, int], DayCounts]:
    """(workflow, step, day) -> the counts of the step records (ids up to ``bound``) of the production runs
    ``runs_sql`` selects (a SELECT of run pks), each run in the day ``analytics_runs`` gives it.

    Two statements: one pass grouped by step and day (distinct runs counted per group), and the gate
    verdicts, which need each (run, step)'s first gated attempt and so group the gated records per run.
    """
    day = day_expr("ar.started_at", dialect)
    joined = f"FROM analytics_runs ar {records_of('ar.run_pk', ':bound_', dialect)} WHERE ar.run_pk IN ({runs_sql})"
    flat = f"""
    SELECT ar.workflow AS workflow, s.step_id AS step_id, {day} AS day, {record_aggregates(dialect)}
    {joined} GROUP BY 1, 2, 3"""
    passes = f"""
    SELECT workflow, step_id, day, SUM(CASE WHEN first_gate % 2 = 0 THEN 1 ELSE 0 END) AS passes FROM (
      SELECT MIN(ar.workflow) AS workflow, s.step_id AS step_id, MIN({day}) AS day,
             MIN(CAST(s.id AS BIGINT) * 2 + CASE WHEN {GATES_FAILED} > 0 THEN 1 ELSE 0 END) AS first_gate
      {joined} AND {GATED} GROUP BY s.run_pk, s.step_id, s.item_index, s.iteration) firsts
    GROUP BY workflow, step_id, day"""
    values = {**params, "bound_": bound}
    out: dict[tuple[str, str, int], DayCounts] = {}
    for r in conn.execute(text(flat), values):
        out[(r.workflow, r.step_id, int(r.day))] = DayCounts(**aggregated(r))
    for r in conn.execute(text(passes), values):
        out[(r.workflow, r.step_id, int(r.day))].gate_passes = int(r.passes or 0)
    return out


def production(workflow: str | None) -> str:
    """The WHERE condition on ``runs r`` for production runs of one workflow (``:workflow``) or of all."""
    return f"r.kind IN {PRODUCTION_SQL}" + ("" if workflow is None else " AND r.workflow = :workflow")


def bind_workflow(sql: str, workflow: str | None, **values: Any) -> Any:
    return text(sql).bindparams(**values, **({} if workflow is None else {"workflow": workflow}))
