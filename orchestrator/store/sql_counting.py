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

from orchestrator.bind.approvals import AWAITING_APPROVAL, TOOL_CHECKPOINT
from orchestrator.store.analytics import (
    BY_AGENT_RANK,
    METHOD_PREFERENCE,
    PERIOD_OFFSET,
    PERIOD_SECONDS,
    PRODUCTION_SQL,
    StepPeriodCounts,
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


RUN_START = "COALESCE((SELECT MIN(s.started_at) FROM step_records s WHERE s.run_pk = r.id), r.created_at)"
"""The start of the run ``r``: the earliest start of its step records, or its creation when it has none (one
index seek per run); :data:`RUN_START_OF_RECORDS` when its records are joined and grouped anyway."""

RUN_START_OF_RECORDS = "COALESCE(MIN(s.started_at), r.created_at)"
""":data:`RUN_START` over the run's records ``s``, grouped by run."""


def explaining_attribution_sql(run: str, bound: str | None = None, column: str = "id") -> str:
    """A column (by default the id) of the run ``run``'s explaining attribution record (among those with ids
    up to ``bound``; None: all), as a scalar subquery: the best :func:`attribution_rank_sql`, the newest
    within it (:func:`~orchestrator.store.analytics.attribution_rank`)."""
    upto = "" if bound is None else f" AND a.id + 0 <= {bound}"
    return (f"(SELECT a.{column} FROM attributions a WHERE a.run_pk = {run}{upto} "
            f"ORDER BY {attribution_rank_sql('a')}, a.id DESC LIMIT 1)")


# -- what one set of runs contributes per step and day ----------------------------------------------------

COUNTERS = ("runs", "gated_runs", "gate_passes", "attempts", "failures", "gate_failures", "retries", "model_records",
            "model_calls", "input_tokens", "output_tokens", "priced_records", "skipped_runs")
SUMS = (*COUNTERS, "cost")
"""The counts that add up over records and runs."""
MINIMA = ("agent", "first_record")
"""The counts that are the smallest over their records (the step's agent as its records name it, its first
record): merged by keeping the smaller, never taken away."""
VALUES = (*MINIMA, *SUMS)
"""Every count of :class:`DayCounts`, as the per-day rows of the summary name their columns."""


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

    @classmethod
    def of(cls, row: Any) -> DayCounts:
        """The counts of a row with the :data:`VALUES` columns (a per-day row of the summary)."""
        return cls(agent=row.agent, first_record=int(row.first_record), cost=float(row.cost),
                   **{name: int(getattr(row, name)) for name in COUNTERS})

    def values(self) -> dict[str, Any]:
        """The :data:`VALUES` by name, in that order."""
        return {name: getattr(self, name) for name in VALUES}

    def add(self, other: DayCounts, sign: int = 1) -> None:
        """Add (``sign`` 1) or take away (-1) another's counts; the :data:`MINIMA` only grow sets, so they
        are merged only when adding."""
        for name in SUMS:
            setattr(self, name, getattr(self, name) + sign * getattr(other, name))
        if sign > 0:
            for name in MINIMA:
                mine, theirs = getattr(self, name), getattr(other, name)
                if theirs is not None and (mine is None or theirs < mine):
                    setattr(self, name, theirs)

    def in_period(self, step_id: str, start: float) -> StepPeriodCounts:
        """These counts as the row of ``step_id`` in the period starting at ``start``."""
        return StepPeriodCounts(step_id=step_id, period_start=start, agent=self.agent or "",
                                first_record=self.first_record or 0, cost=self.cost,
                                **{name: getattr(self, name) for name in COUNTERS})


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


def records_of(run: str, bound: str | None, dialect: str, *, outer: bool = False) -> str:
    """A join clause giving ``s``: the step records of the run ``run`` (a column) with ids up to ``bound``
    (None: every one).

    On PostgreSQL a LATERAL subquery (kept apart by ``OFFSET 0``) makes it one index lookup by ``run_pk``
    per run, whatever the statistics say: without them (autovacuum off) the planner chose merge joins
    over the whole index, 0.9 s to summarise 500 runs; ``id + 0`` keeps the bound (which only trims the
    newest records) from being taken for an index range. SQLite plans the plain join that way by itself
    and checks the bound on the index entry (with ``+ 0`` the first summary took 15% longer).
    """
    kind = "LEFT JOIN" if outer else "JOIN"
    if dialect == "postgresql":
        upto = "" if bound is None else f" AND id + 0 <= {bound}"
        return (f"{kind} LATERAL (SELECT {', '.join(RECORD_COLUMNS)} FROM step_records WHERE run_pk = {run}{upto} "
                "OFFSET 0) s ON TRUE")
    return f"{kind} step_records s ON s.run_pk = {run}" + ("" if bound is None else f" AND s.id <= {bound}")


GATE_FAILURES = ("SUM(CASE WHEN s.status = 'gate_failed' AND (s.error_type IS NULL OR s.error_type <> "
                 f"'{AWAITING_APPROVAL}') THEN 1 ELSE 0 END)")
"""Records whose gates stopped them: a pause for a person's approval (no gate failed) is none."""
ATTEMPTS = f"SUM(CASE WHEN s.status = 'running' AND s.error_type = '{TOOL_CHECKPOINT}' THEN 0 ELSE 1 END)"
"""Every record but the checkpoints an LLM step writes around an approved tool call (they are no attempt)."""


SMALLEST = "MIN(s.agent) AS agent, MIN(s.id) AS first_id"
"""The :data:`MINIMA` over a group of step records ``s``; :func:`smallest` reads them back."""


def smallest(row: Any) -> dict[str, Any]:
    """A row's :data:`SMALLEST` columns as the counts' fields."""
    return {"agent": row.agent, "first_record": int(row.first_id)}


def record_aggregates(dialect: str) -> str:
    """The select list both the summary and the live aggregation take over a group of step records ``s``
    (everything but the gate passes, which need each run's first gated attempt); :func:`aggregated`
    reads it back."""
    llm = "CASE WHEN s.origin = 'executed' AND s.llm IS NOT NULL THEN {} END"

    def number(*path: str) -> str:
        return llm.format(json_number("s.llm", path, dialect))

    return f"""{SMALLEST}, COUNT(DISTINCT s.run_pk) AS runs,
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
    return {**smallest(row), "runs": int(row.runs),
            "gated_runs": int(row.gated), "attempts": int(row.attempts), "failures": int(row.failures),
            "gate_failures": int(row.gate_failures), "retries": int(row.retries),
            "model_records": int(row.model_records or 0), "model_calls": int(row.calls or 0),
            "input_tokens": int(row.tin or 0), "output_tokens": int(row.tout or 0),
            "priced_records": int(row.priced or 0), "cost": float(row.cost or 0.0),
            "skipped_runs": int(row.skipped or 0)}


UNIT_OF_RUN = "s.run_pk, s.step_id, s.item_index, s.iteration"
"""The columns grouping one step's records into what a gate verdict is counted for: a step in a run, an
instance of a mapped step, an iteration of a loop (:data:`RUN_UNIT` as a GROUP BY)."""

FIRST_GATE = f"MIN(CAST(s.id AS BIGINT) * 2 + CASE WHEN {GATES_FAILED} > 0 THEN 1 ELSE 0 END)"
"""Over one unit's gated records: the first gated attempt's id, doubled, plus 1 when one of its gates
failed. Even: that attempt passed all its gates."""


def step_counts_sql(joined: str, keys: dict[str, str], dialect: str, where: str | None = None) -> tuple[str, str]:
    """(counts, passes): two SELECTs over the step records ``s`` that ``joined`` (a FROM clause) and ``where``
    (a condition, if any) give, grouped by ``keys`` (alias -> expression, ``step_id`` among them): every
    aggregate of :func:`record_aggregates`, and ``passes``, the units whose first gated attempt passed.

    The verdicts need each unit's first gated attempt, so only the gated records are grouped per unit;
    every key is the same for all records of a unit (``MIN`` picks that value).
    """
    named = ", ".join(f"{expr} AS {alias}" for alias, expr in keys.items())
    per_unit = ", ".join(f"MIN({expr}) AS {alias}" for alias, expr in keys.items())
    key = ", ".join(keys)
    kept = "" if where is None else f" WHERE {where}"
    gated = GATED if where is None else f"{where} AND {GATED}"
    positions = ", ".join(str(i) for i in range(1, len(keys) + 1))
    counts = f"SELECT {named}, {record_aggregates(dialect)} {joined}{kept} GROUP BY {positions}"
    passes = f"""SELECT {key}, SUM(CASE WHEN first_gate % 2 = 0 THEN 1 ELSE 0 END) AS passes FROM (
      SELECT {per_unit}, {FIRST_GATE} AS first_gate
      {joined} WHERE {gated} GROUP BY {UNIT_OF_RUN}) firsts
    GROUP BY {key}"""
    return counts, passes


def contributions(conn: Connection, dialect: str, runs_sql: str, params: dict[str, Any],
                   bound: int) -> dict[tuple[str, str, int], DayCounts]:
    """(workflow, step, day) -> the counts of the step records (ids up to ``bound``) of the production runs
    ``runs_sql`` selects (a SELECT of run pks), each run in the day ``analytics_runs`` gives it: the two
    statements of :func:`step_counts_sql`."""
    counts, passes = step_counts_sql(f"FROM analytics_runs ar {records_of('ar.run_pk', ':bound_', dialect)}",
                                     {"workflow": "ar.workflow", "step_id": "s.step_id",
                                      "day": day_expr("ar.started_at", dialect)}, dialect,
                                     f"ar.run_pk IN ({runs_sql})")
    values = {**params, "bound_": bound}
    out: dict[tuple[str, str, int], DayCounts] = {}
    for r in conn.execute(text(counts), values):
        out[(r.workflow, r.step_id, int(r.day))] = DayCounts(**aggregated(r))
    for r in conn.execute(text(passes), values):
        out[(r.workflow, r.step_id, int(r.day))].gate_passes = int(r.passes or 0)
    return out


OUTPUT_COLUMNS = ("step_id", "inputs_digest", "output_digest")
"""What the non-determinism check reads of a step record, besides its id."""


def produced_output(prefix: str) -> str:
    """A step record (its columns named with ``prefix``: ``s.`` or none) whose attempt produced an output (it
    succeeded or failed its gates): each (run, step)'s first such record is what the non-determinism check
    compares."""
    return f"{prefix}status IN ('succeeded', 'gate_failed') AND {prefix}output IS NOT NULL"


def output_groups(joined: str, keys: dict[str, str] | None = None) -> str:
    """A SELECT over the first records with an output ``s`` that ``joined`` gives (a FROM clause and its
    WHERE), per step and inputs digest (``inputs_key``; and ``keys``: alias -> expression): how many
    (``n``), the smallest record id (``first_id``) and the smallest and largest output digest (``lo``,
    ``hi``: they differ when two outputs did)."""
    named = "".join(f"{expr} AS {alias}, " for alias, expr in (keys or {}).items())
    grouped = "".join(f"{expr}, " for expr in (keys or {}).values())
    return f"""SELECT {named}s.step_id AS step_id, s.inputs_digest AS inputs_key, COUNT(*) AS n,
               MIN(s.output_digest) AS lo, MAX(s.output_digest) AS hi, MIN(s.id) AS first_id
               {joined} GROUP BY {grouped}s.step_id, s.inputs_digest"""


def production(workflow: str | None) -> str:
    """The WHERE condition on ``runs r`` for production runs of one workflow (``:workflow``) or of all."""
    return f"r.kind IN {PRODUCTION_SQL}" + ("" if workflow is None else " AND r.workflow = :workflow")


def bind_workflow(sql: str, workflow: str | None, **values: Any) -> Any:
    return text(sql).bindparams(**values, **({} if workflow is None else {"workflow": workflow}))
