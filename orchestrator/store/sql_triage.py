"""``Store.triage_runs`` in SQL: one page of runs with outcome, blame and pause, in three queries.

The page and the total are each one statement (latest outcome and explaining attribution joined
per run); the waiting steps of the page's paused runs are a third. The rules are
in :mod:`orchestrator.store.triage`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, exists, false, func, literal_column, or_, select, true
from sqlalchemy.sql.elements import ColumnElement

from orchestrator.bind.approvals import is_approval
from orchestrator.spec.records import unit_name
from orchestrator.store.rows import run_view
from orchestrator.store.sql_counting import explaining_attribution_sql
from orchestrator.store.tables import TABLES, interrupted, live_record, running
from orchestrator.store.triage import RunPage, RunQuery, TriageRow

Read = Callable[..., Any]

runs_t = TABLES["runs"]
steps_t = TABLES["step_records"]
gates_t = TABLES["gate_results"]
reviews_t = TABLES["reviews"]
outcomes_t = TABLES["outcomes"]


def status_condition(status: str | None) -> ColumnElement[bool] | None:
    """The WHERE condition of a shown status: ``interrupted`` is a running run whose lease lapsed."""
    now = time.time()
    if status == "interrupted":
        return interrupted(now)
    if status == "running":
        return running(now)
    if status:
        return runs_t.c.status == status
    return None


def triage_page(read: Read, query: RunQuery) -> RunPage:
    """The page of runs ``query`` asks for (see :meth:`Store.triage_runs`).

    A run's latest outcome and explaining attribution record are scalar subqueries on the run (each an
    index lookup by ``run_pk``), not joins: a join ON ``id = (correlated subquery)`` made PostgreSQL test
    every outcome against every run (40 s for ``orchestrator runs`` over 50 000 runs). In the select list
    they run for the page's rows only; in WHERE (the outcome and blame filters) once per run filtered.
    """
    def latest_outcome(column: ColumnElement[Any]) -> ColumnElement[Any]:
        # ``id + 0``: ordered after the run's few outcomes are found by run_pk; ordering by the primary key
        # itself let PostgreSQL walk every outcome backwards for each run (46 s for ``--outcome incorrect``)
        return (select(column).where(outcomes_t.c.run_pk == runs_t.c.id).order_by((outcomes_t.c.id + 0).desc())
                .limit(1).correlate(runs_t).scalar_subquery())

    blamed: ColumnElement[Any] = literal_column(explaining_attribution_sql("runs.id", column="blamed_step"))
    """The step the run's explaining attribution record blamed (the rule of ``stats`` and the review screen)."""
    conditions: list[ColumnElement[bool]] = []
    by_status = status_condition(query.status)
    if by_status is not None:
        conditions.append(by_status)
    if query.workflow:
        conditions.append(runs_t.c.workflow == query.workflow)
    if query.workflow_part:
        conditions.append(func.lower(runs_t.c.workflow).contains(query.workflow_part.lower(), autoescape=True))
    if query.kind:
        conditions.append(runs_t.c.kind == query.kind)
    if query.since is not None:
        conditions.append(runs_t.c.created_at >= query.since)
    if query.outcome is not None:
        conditions.append(latest_outcome(outcomes_t.c.correct) == (true() if query.outcome == "correct" else false()))
    if query.blamed:
        conditions.append(blamed_within(blamed, query.blamed))
    where = and_(true(), *conditions)
    page = (select(runs_t, latest_outcome(outcomes_t.c.value).label("triage_value"),
                   latest_outcome(outcomes_t.c.correct).label("triage_correct"), blamed.label("triage_blamed"))
            .where(where).order_by(runs_t.c.id.desc()).limit(max(0, query.limit)).offset(max(0, query.offset)))
    count = select(func.count()).select_from(runs_t).where(where)
    rows, totals = read(page, count)
    listed = [TriageRow(run_view(r), outcome_value=r.triage_value,
                        outcome_correct=None if r.triage_correct is None else bool(r.triage_correct),
                        blamed_step=r.triage_blamed) for r in rows]
    paused = {r.id: row for r, row in zip(rows, listed, strict=True) if r.status == "paused"}
    if paused:
        _add_waiting(read, paused)
    return RunPage(listed, int(totals[0][0]), query.offset, query.limit)


def _add_waiting(read: Read, paused: dict[int, TriageRow]) -> None:
    """Fill the waiting steps and the first failing gate's reason of the page's paused runs, in one query."""
    later = steps_t.alias("later")
    newer_record = exists().where(and_(later.c.run_pk == steps_t.c.run_pk, later.c.step_id == steps_t.c.step_id,
                                       later.c.item_index.is_not_distinct_from(steps_t.c.item_index),
                                       later.c.iteration.is_not_distinct_from(steps_t.c.iteration),
                                       later.c.id > steps_t.c.id))
    answered = exists().where(reviews_t.c.record_id == steps_t.c.id)
    failing = and_(gates_t.c.run_pk == steps_t.c.run_pk, gates_t.c.record_id == steps_t.c.id,
                   gates_t.c.passed == false())
    first_reason = (select(gates_t.c.reason).where(failing)
                    .order_by(gates_t.c.id).limit(1).correlate(steps_t).scalar_subquery())
    waiting = (select(steps_t.c.run_pk, steps_t.c.step_id, steps_t.c.item_index, steps_t.c.iteration,
                      first_reason.label("reason"), steps_t.c.error_type, steps_t.c.error_message)
               .where(and_(steps_t.c.run_pk.in_(list(paused)), steps_t.c.status == "gate_failed",
                           live_record(), ~newer_record, ~answered))
               .order_by(steps_t.c.run_pk, steps_t.c.started_at, steps_t.c.step_id, steps_t.c.item_index,
                         steps_t.c.iteration))
    for r in read(waiting):
        row = paused[r.run_pk]
        if not row.waiting_steps:  # a pause for approval has no failed gate: it says what it waits for
            row.gate_reason = r.error_message if r.reason is None and is_approval(r.error_type) else r.reason
        row.waiting_steps.append(unit_name(r.step_id, r.item_index, r.iteration))


def blamed_within(blamed: ColumnElement[Any], unit: str) -> ColumnElement[bool]:
    """The blamed step is ``unit`` or a part of it: one of its instances (``summarize[3]``) or iterations
    (``draft#2``), or a step inside the child run it started (``research > retrieve``). Compared by prefix
    with ``substr`` rather than LIKE, so an ``_`` in a step id is no wildcard."""
    n = len(unit)
    return or_(blamed == unit, func.substr(blamed, 1, n + 1).in_([f"{unit}[", f"{unit}#"]),
               func.substr(blamed, 1, n + 3) == f"{unit} > ")
