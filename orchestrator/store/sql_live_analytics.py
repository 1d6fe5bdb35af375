"""The live aggregation of step and non-determinism counts: computed from every record on every call.

For a database the summary cannot be written to (a read-only file or role), and for the child runs one
workflow step started (``stats --expand``): slow but exact, and counted with the statements the summary
counts with (:mod:`orchestrator.store.sql_counting`). Outcome and trajectory counts need no code here:
:mod:`orchestrator.store.sql_analytics` reads the summary's per-run rows computed live instead
(:func:`~orchestrator.store.sql_summary.run_rows_sql`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from orchestrator.store.analytics import (
    PRODUCTION_SQL,
    NondeterminismCounts,
    StepPeriodCounts,
)
from orchestrator.store.sql_counting import (
    OUTPUT_COLUMNS,
    RUN_START,
    Read,
    aggregated,
    bucket,
    output_groups,
    produced_output,
    step_counts_sql,
)
from orchestrator.store.tables import child_runs_of_unit_sql

if TYPE_CHECKING:

    pass

EARLIEST = -1e18
"""``since`` when none is given: before any timestamp."""


# -- the live aggregation: every record read on every call (a database the summary cannot be written to) -----


_PRODUCTION_RUNS = f"r.workflow = :workflow AND r.kind IN {PRODUCTION_SQL}"

_CHILD_RUNS_OF_STEP = child_runs_of_unit_sql(f"p.workflow = :workflow AND p.kind IN {PRODUCTION_SQL}")
"""The child runs that the units of one step (``:step``, its instances ``STEP[i]`` and iterations ``STEP#n``)
of a workflow's production runs started."""


def _window(period: str, dialect: str, runs: str = _PRODUCTION_RUNS) -> str:
    """The CTE ``win``: production runs in the window (or the runs ``runs`` selects from ``runs r``) with the
    start of their period.

    MATERIALIZED: computed once (one index seek per run for its first step's start), not again per record.
    """
    return f"""
    win AS MATERIALIZED (
      SELECT run_pk, {bucket('t0', period, dialect)} AS period_start FROM (
        SELECT r.id AS run_pk, {RUN_START} AS t0
        FROM runs r WHERE {runs}) rs
      WHERE t0 >= :since)"""


def child_step_period_counts(read: Read, dialect: str, workflow: str, step_id: str, period: str,
                             since: float | None) -> list[StepPeriodCounts]:
    """The child workflow's steps, counted over the child runs that ``step_id`` of ``workflow``'s production
    runs started (a child run in the period of its own first step). Aggregated live from their records:
    ``stats --expand`` asks for them, one workflow step at a time."""
    binds = {"step": step_id, "step_len": len(step_id) + 1, "step_item": f"{step_id}[",
             "step_iteration": f"{step_id}#"}
    return live_step_period_counts(read, dialect, workflow, period, since, _CHILD_RUNS_OF_STEP, binds)


def live_step_period_counts(read: Read, dialect: str, workflow: str, period: str, since: float | None,
                            runs: str = _PRODUCTION_RUNS,
                            binds: dict[str, Any] | None = None) -> list[StepPeriodCounts]:
    """The window's records counted per (step, period) by the statements the summary counts with
    (:func:`~orchestrator.store.sql_counting.step_counts_sql`), joined in one query.
    ``runs``: which runs (a condition on ``runs r``; the workflow's production runs by default)."""
    counts, passes = step_counts_sql("FROM win w JOIN step_records s ON s.run_pk = w.run_pk",
                                     {"step_id": "s.step_id", "period_start": "w.period_start"}, dialect)
    sql = f"""
    WITH {_window(period, dialect, runs)}, counts AS ({counts}), passes AS ({passes})
    SELECT c.*, p.passes FROM counts c LEFT JOIN passes p ON p.step_id = c.step_id AND p.period_start = c.period_start
    ORDER BY c.period_start, c.first_id"""
    rows = read(text(sql).bindparams(workflow=workflow, since=EARLIEST if since is None else since, **(binds or {})))
    return [StepPeriodCounts(step_id=r.step_id, period_start=float(r.period_start), gate_passes=int(r.passes or 0),
                             **aggregated(r)) for r in rows]


def _first_outputs(dialect: str) -> str:
    """Each production run's first attempt of each step that produced an output, in one pass.

    SQLite returns the other columns of the row holding ``MIN(id)`` (a documented guarantee of
    its bare columns); PostgreSQL says the same with ``DISTINCT ON``.
    """
    where = f"r.workflow = :workflow AND r.kind IN {PRODUCTION_SQL} AND {produced_output('s.')}"
    columns = ", ".join(f"s.{c}" for c in OUTPUT_COLUMNS)
    if dialect == "postgresql":
        return f"""SELECT DISTINCT ON (s.run_pk, s.step_id) s.id, {columns}
                   FROM step_records s JOIN runs r ON r.id = s.run_pk WHERE {where}
                   ORDER BY s.run_pk, s.step_id, s.id"""
    return f"""SELECT MIN(s.id) AS id, {columns}
               FROM step_records s JOIN runs r ON r.id = s.run_pk WHERE {where} GROUP BY s.run_pk, s.step_id"""


def live_nondeterminism_counts(read: Read, dialect: str, workflow: str) -> list[NondeterminismCounts]:
    """Counted from the groups the summary merges (:func:`~orchestrator.store.sql_counting.output_groups`),
    over every run at once."""
    sql = f"""
    WITH groups AS ({output_groups(f"FROM ({_first_outputs(dialect)}) s")})
    SELECT step_id, MIN(first_id) AS first_id,
           SUM(CASE WHEN inputs_key IS NOT NULL AND n >= 2 THEN 1 ELSE 0 END) AS repeated,
           SUM(CASE WHEN inputs_key IS NOT NULL AND n >= 2 AND lo <> hi THEN 1 ELSE 0 END) AS varied,
           SUM(CASE WHEN inputs_key IS NULL THEN n ELSE 0 END) AS uncovered
    FROM groups GROUP BY step_id ORDER BY 2"""
    return [NondeterminismCounts(step_id=r.step_id, first_record=int(r.first_id), repeated_inputs=int(r.repeated),
                                 varied=int(r.varied), not_covered=int(r.uncovered))
            for r in read(text(sql).bindparams(workflow=workflow))]
