"""The analytics summary on SQLite and PostgreSQL: keeping its tables up to date with the runs.

Aggregating a workflow's step records on every ``stats`` or ``report`` cost 3.5 s over a million
records on SQLite (it has no hash aggregate: every GROUP BY sorts all its rows) and a minute on
PostgreSQL. So the counts are kept in summary tables (``analytics_*`` in
:mod:`orchestrator.store.tables`) per step and UTC day, per outcome state and day, per trajectory
and per step's inputs, and a read adds up as many rows as it shows steps and periods.

**Who keeps the summary up to date: the reads.** ``analytics_state`` holds, for each source table
(runs, step records, outcomes, attribution records), the highest id summarised. Every analytics
read first summarises what lies above those ids, in transactions that move them. Nothing is added
to the write path (a step record's INSERT is the hottest statement there is), and a read pays only
for what was written since the last read. Measured with ``benchmarks/bench_analytics.py`` over a
million records (50 000 runs): a read of an up-to-date summary takes milliseconds (``stats`` is then
mostly start-up, 0.5 s on SQLite); summarising 500 new runs (10 000 records) adds ~0.1 s on SQLite,
~0.3 s on PostgreSQL; the first read of a database never summarised (the upgrade that creates these
tables leaves them empty, so it is instant whatever the database size) summarises everything once:
~6 s on SQLite, ~14 s on PostgreSQL. The summary costs ~95 bytes per run (5 per step record).

Alternatives measured: rewriting the aggregation queries alone cannot get under a second on SQLite
(sorting a million rows for one GROUP BY costs ~0.8 s, and stats needs two such passes, report two
more); summarising at write time would add work to the write path or to every run end, and still
miss records written to runs that already ended (reviews, resumes, direct Store writes).

**Why per run, and why it stays right when things change.** What a run contributes (its start,
hence its day; its steps' counts; the first gated attempt's verdict; its latest outcome and
explaining attribution record) is a function of the run's records, outcomes and attribution
records up to the summarised ids. A summarising step finds the runs with anything new above the
ids, takes each one out of the counts as it was summarised (its previous row in
``analytics_runs``, and its step counts recomputed from its records up to the previous id) and
puts it back as it is now. Step records only grow (a review's fix marks records superseded, which
no count reads), so recomputing a run from its records up to an id always gives what was
summarised then. A run whose start moves to another day (a record written later that started
earlier) leaves its old day's rows, whose smallest agent and record id are then recomputed.

**Which ids are safe.** Ids up to a summarised id must all be final: a row committed later with a
smaller id would never be summarised. SQLite has one writer at a time, and the summary is taken
under the write lock (``BEGIN IMMEDIATE``): every id below the largest one is committed. On
PostgreSQL sequences hand out ids before commit, so the safe id of each table is found with no
lock at all: the largest ids are read, then the summary waits for the transactions that held a
writer's lock on those tables at that moment (:meth:`Summary.settled`); ids handed out later are
larger. Writers never wait for a summary. A database this process may not write (a read-only file
or role) gets the live aggregation of before, slow but exact.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator.store.analytics import PRODUCTION_SQL
from orchestrator.store.sql_counting import (
    DAY,
    EXECUTED,
    MINIMA,
    OUTPUT_COLUMNS,
    RUN_START,
    RUN_START_OF_RECORDS,
    SMALLEST,
    SUMS,
    UNIT,
    VALUES,
    DayCounts,
    contributions,
    day_expr,
    day_of,
    explaining_attribution_sql,
    output_groups,
    produced_output,
    records_of,
    smallest,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from sqlalchemy.engine import Connection, Engine


class SqlDatabase(Protocol):
    """What the analytics need of a SQL store: its engine, its held connection, the lock that serialises
    that connection, and a read in one short transaction. Named by shape, so the store imports the
    analytics and never the other way round."""

    @property
    def engine(self) -> Engine: ...

    @property
    def conn(self) -> Connection: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    def read(self, *statements: Any) -> Any: ...

CHUNK = 250_000
"""Step records summarised per transaction. The first read of a large database summarises it in
chunks, so on SQLite writers wait for one chunk (about a second) at a time, not for the whole."""

SOURCES = ("runs", "step_records", "outcomes", "attributions")

SETTLE_SECONDS = 5.0
"""PostgreSQL: how long a summary waits for the writers in flight before aggregating live instead."""

_WRITERS = ("SELECT DISTINCT virtualtransaction FROM pg_locks WHERE locktype = 'relation' "
            "AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid() "
            "AND relation IN (SELECT to_regclass(t)::oid FROM unnest(CAST(:tables AS text[])) AS t)")
"""The transactions that may be writing the summarised tables right now."""

_LIVE = ("SELECT virtualxid FROM pg_locks WHERE locktype = 'virtualxid' "
         "AND virtualxid = ANY(CAST(:writers AS text[]))")
"""Which of them have not ended (a transaction holds the lock on its own virtual id while it lives)."""

NO_JIT = "SET LOCAL jit = off"
"""PostgreSQL: the per-record gate-count fallback (a correlated subquery) inflates cost estimates past JIT's
threshold, and compiling a statement took 1.6 s, longer than running it."""

ANALYZE_AFTER = 50_000
"""Step records summarised in one update after which PostgreSQL's statistics of the summary are refreshed."""


@dataclass(frozen=True, slots=True)
class Marks:
    """The highest id summarised in each source table (``analytics_state``)."""

    runs: int = 0
    records: int = 0
    outcomes: int = 0
    attributions: int = 0

    def covers(self, other: Marks) -> bool:
        return all(getattr(self, f.name) >= getattr(other, f.name) for f in fields(Marks))

    def upto(self, other: Marks) -> Marks:
        """Each id the larger of the two (both are safe, so their maximum is)."""
        return Marks(*(max(getattr(self, f.name), getattr(other, f.name)) for f in fields(Marks)))


# -- bringing the summary up to date ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunState:
    """What one production run contributes (a row of ``analytics_runs``)."""

    workflow: str
    started_at: float
    steps: int
    attempts: int
    incorrect: bool
    blamed_step: str | None
    method: str | None

    @property
    def day(self) -> int:
        return day_of(self.started_at)

    def outcome_key(self) -> tuple[str, int, bool, str | None, str | None]:
        return self.workflow, self.day, self.incorrect, self.blamed_step, self.method


_CHANGED_RUNS = """
    SELECT run_pk FROM step_records WHERE id > :lo_records AND id <= :hi_records
    UNION SELECT run_pk FROM outcomes WHERE id > :lo_outcomes AND id <= :hi_outcomes
    UNION SELECT run_pk FROM attributions WHERE id > :lo_attributions AND id <= :hi_attributions
    UNION SELECT id FROM runs WHERE id > :lo_runs AND id <= :hi_runs"""
"""Runs with anything new between two marks: what a summarising step recomputes. Collected once per step
into the temporary table ``analytics_affected`` (:data:`_AFFECTED`), which four statements then read."""

_AFFECTED = "SELECT run_pk FROM analytics_affected"


def run_rows_sql(dialect: str, runs: str, bounded: bool, *, trajectory: bool = True) -> str:
    """The rows of ``analytics_runs`` as a SELECT: each production run that ``runs`` keeps (a condition on
    ``runs r``) with its start (:data:`~orchestrator.store.sql_counting.RUN_START`), its trajectory (left
    out unless ``trajectory``: counting it reads every record) and its outcome state (whether its latest
    outcome is incorrect; if so, the step and method of its explaining attribution record), from the rows
    with ids up to the ``:hi_*`` marks (``bounded``) or from all.

    The summary writes these rows; a database it cannot be written to reads them as a subquery instead.
    ``o.id + 0``: a run's few outcomes are found by ``run_pk``, then ordered (ordering by the primary key
    itself let PostgreSQL walk every outcome backwards for each run)."""
    outcomes = " AND o.id + 0 <= :hi_outcomes" if bounded else ""
    latest = f"(SELECT o.correct FROM outcomes o WHERE o.run_pk = r.id{outcomes} ORDER BY o.id + 0 DESC LIMIT 1)"
    explaining = explaining_attribution_sql("j.run_pk", ":hi_attributions" if bounded else None)
    per_run = f"r.id AS run_pk, r.workflow AS workflow, CASE WHEN NOT {latest} THEN 1 ELSE 0 END AS incorrect"
    if trajectory:
        runs_of = f"""
            SELECT {per_run}, {RUN_START_OF_RECORDS} AS started_at,
                   COUNT(DISTINCT CASE WHEN {EXECUTED} THEN {UNIT} END) AS steps,
                   COUNT(CASE WHEN {EXECUTED} THEN 1 END) AS attempts
            FROM runs r {records_of('r.id', ':hi_records' if bounded else None, dialect, outer=True)}
            WHERE r.kind IN {PRODUCTION_SQL} AND {runs} GROUP BY r.id"""
        counted = ", steps, attempts"
    else:
        assert not bounded, "the summary writes every column"
        runs_of = f"SELECT {per_run}, {RUN_START} AS started_at FROM runs r WHERE r.kind IN {PRODUCTION_SQL} AND {runs}"
        counted = ""
    return f"""
        SELECT k.*, a.blamed_step AS blamed_step, a.method AS method FROM (
          SELECT run_pk, workflow, started_at{counted}, incorrect,
                 CASE WHEN j.incorrect = 1 THEN {explaining} END AS aid
          FROM ({runs_of}) j) k
        LEFT JOIN attributions a ON a.id = k.aid"""


_NEW_RECORDS = "SELECT run_pk FROM step_records WHERE id > :lo_records AND id <= :hi_records"


class Summary:
    """The analytics summary of one SQL store's database: brought up to date, then read."""

    def __init__(self, store: SqlDatabase) -> None:
        self.store = store
        self.dialect = store.engine.dialect.name

    # -- bringing it up to date --

    def update(self) -> Marks | None:
        """Summarise everything committed so far; the marks reached, or None when this process may not
        write the summary (a read-only database, a role without write access) or could not get the
        lock it needs in time: the caller then aggregates live."""
        with self.store.lock:
            try:
                stored, visible = self.marks()
                if stored.covers(visible):
                    return stored
                target = self.settled() if self.dialect == "postgresql" else visible
                if target is None:
                    return None
                reached = self.catch_up(target)
                if reached.records - stored.records >= ANALYZE_AFTER and self.dialect == "postgresql":
                    self.analyze()
                return reached
            except DBAPIError as exc:
                if cannot_write(exc):
                    return None
                raise

    def catch_up(self, target: Marks) -> Marks:
        """Summarise up to ``target`` (on SQLite, up to whatever is committed), :data:`CHUNK` records per
        transaction; the marks reached."""
        while True:
            with self.writing() as conn:
                stored = self.locked_marks(conn)
                if self.dialect != "postgresql":
                    target = self.visible(conn)  # under the write lock: every smaller id is committed
                goal = stored.upto(target)
                if stored.covers(goal):
                    return stored
                step = self.chunk(conn, stored, goal)
                self.summarise(conn, stored, step)
                conn.execute(text("UPDATE analytics_state SET runs = :runs, records = :records, "
                                  "outcomes = :outcomes, attributions = :attributions WHERE id = 1"),
                             {f.name: getattr(step, f.name) for f in fields(Marks)})
            if step.covers(target):
                return step

    def analyze(self) -> None:
        """PostgreSQL: fresh planner statistics for the summary's tables after a large summarising (they are
        small; without statistics, as when autovacuum is off, the planner guessed one row for 50 000)."""
        from orchestrator.store.tables import ANALYTICS_TABLES

        conn = self.store.conn
        try:
            conn.execute(text(f"ANALYZE {', '.join(ANALYTICS_TABLES)}"))
            conn.commit()
        finally:
            conn.rollback()

    @staticmethod
    def chunk(conn: Connection, stored: Marks, goal: Marks) -> Marks:
        """The next step towards ``goal``: at most :data:`CHUNK` more step records, and the runs up to the
        last one's (runs are created before their records), so that a run is summarised with its records
        rather than first without them. Outcomes and attribution records go in the first step (few)."""
        if goal.records <= stored.records + CHUNK:
            return goal
        records = stored.records + CHUNK
        run = conn.execute(text("SELECT run_pk FROM step_records WHERE id <= :bound ORDER BY id DESC LIMIT 1"),
                           {"bound": records}).scalar()
        return Marks(max(stored.runs, min(goal.runs, int(run or 0))), records, goal.outcomes, goal.attributions)

    def marks(self) -> tuple[Marks, Marks]:
        """(summarised, visible): a plain read, no lock; equal when there is nothing to do."""
        conn = self.store.conn
        try:
            state = conn.execute(text("SELECT runs, records, outcomes, attributions FROM analytics_state "
                                      "WHERE id = 1")).first()
            return Marks(*state) if state else Marks(), self.visible(conn)
        finally:
            conn.rollback()

    @staticmethod
    def visible(conn: Connection) -> Marks:
        row = conn.execute(text(f"SELECT {', '.join(f'(SELECT MAX(id) FROM {t})' for t in SOURCES)}")).one()
        return Marks(*(int(v or 0) for v in row))

    def settled(self) -> Marks | None:
        """PostgreSQL: each table's largest id once every transaction that could still commit a smaller one
        has ended (see the module doc), found without taking a lock: None when they outlast
        :data:`SETTLE_SECONDS` (the caller then aggregates live).

        The largest ids are read first. A smaller id taken but not yet committed belongs to a transaction
        that held the table's ROW EXCLUSIVE lock before it drew the id (the lock is taken as its statement
        starts) and holds it until it ends; any id drawn after the read is larger. So the transactions
        holding that lock when :data:`_WRITERS` is read next are all there is to wait for, and waiting
        for them (polling their virtual transaction ids) holds no writer back, where ``LOCK TABLE ... IN
        SHARE MODE`` queued every new writer behind the wait."""
        conn = self.store.conn
        try:
            marks = self.visible(conn)
            writers = [row[0] for row in conn.execute(text(_WRITERS), {"tables": list(SOURCES)})]
        finally:
            conn.rollback()
        deadline = time.monotonic() + SETTLE_SECONDS
        while writers:
            try:
                writers = [row[0] for row in conn.execute(text(_LIVE), {"writers": writers})]
            finally:
                conn.rollback()
            if writers:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.005)
        return marks

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One transaction that writes the summary; on SQLite it holds the database's write lock from the start."""
        conn = self.store.conn
        try:
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql(NO_JIT)
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def locked_marks(self, conn: Connection) -> Marks:
        """The summarised marks, the state row created if missing and (PostgreSQL) locked: one summariser at a time."""
        conn.execute(text("INSERT INTO analytics_state (id, runs, records, outcomes, attributions) "
                          "VALUES (1, 0, 0, 0, 0) ON CONFLICT (id) DO NOTHING"))
        lock = " FOR UPDATE" if self.dialect == "postgresql" else ""
        row = conn.execute(text(f"SELECT runs, records, outcomes, attributions FROM analytics_state "
                                f"WHERE id = 1{lock}")).one()
        return Marks(*(int(v) for v in row))

    def summarise(self, conn: Connection, old: Marks, new: Marks) -> None:
        """Move the summary from ``old`` to ``new``: every run with something new is taken out of the counts
        as it was summarised and put back as it is now (see the module doc)."""
        params = {f"lo_{f.name}": getattr(old, f.name) for f in fields(Marks)} | \
                 {f"hi_{f.name}": getattr(new, f.name) for f in fields(Marks)}
        conn.execute(text("CREATE TEMPORARY TABLE IF NOT EXISTS analytics_affected (run_pk INTEGER PRIMARY KEY)"))
        conn.execute(text("DELETE FROM analytics_affected"))
        conn.execute(text(f"INSERT INTO analytics_affected (run_pk) {_CHANGED_RUNS}"), params)
        before = self.run_states(conn, params) if old != Marks() else {}
        after = self.new_run_states(conn, params)
        changed = {pk: state for pk, state in after.items() if before.get(pk) != state}
        new_records = new.records > old.records
        removed: dict[tuple[str, str, int], DayCounts] = {}
        if new_records and old.records:
            removed = contributions(conn, self.dialect, _NEW_RECORDS, params, old.records)
        if changed:
            self.save_runs(conn, changed)
        added = contributions(conn, self.dialect, _NEW_RECORDS, params, new.records) if new_records else {}
        moved = {(before[pk].workflow, before[pk].day) for pk, state in changed.items()
                 if pk in before and before[pk].day != state.day}
        self.apply_days(conn, added, removed, moved, new.records)
        trajectories: dict[tuple[Any, ...], int] = {}
        outcomes: dict[tuple[Any, ...], int] = {}
        for pk, state in changed.items():
            for sign, s in ((1, state), (-1, before.get(pk))):
                if s is not None:
                    key = (s.workflow, s.steps, s.attempts)
                    trajectories[key] = trajectories.get(key, 0) + sign
                    cell = s.outcome_key()
                    outcomes[cell] = outcomes.get(cell, 0) + sign
        _add_counts(conn, "analytics_trajectories", ("workflow", "steps", "attempts"), trajectories)
        _add_counts(conn, "analytics_outcomes", ("workflow", "day", "incorrect", "blamed_step", "method"), outcomes)
        if new_records:
            self.add_first_outputs(conn, params)

    def run_states(self, conn: Connection, params: dict[str, Any]) -> dict[int, RunState]:
        rows = conn.execute(text(f"SELECT run_pk, workflow, started_at, steps, attempts, incorrect, blamed_step, "
                                 f"method FROM analytics_runs WHERE run_pk IN ({_AFFECTED})"), params)
        return {int(r.run_pk): RunState(r.workflow, float(r.started_at), int(r.steps), int(r.attempts),
                                        bool(r.incorrect), r.blamed_step, r.method) for r in rows}

    def new_run_states(self, conn: Connection, params: dict[str, Any]) -> dict[int, RunState]:
        """Each affected production run as the records, outcomes and attribution records up to ``new`` make it."""
        rows = conn.execute(text(run_rows_sql(self.dialect, f"r.id IN ({_AFFECTED})", bounded=True)), params)
        return {int(r.run_pk): RunState(r.workflow, float(r.started_at), int(r.steps), int(r.attempts),
                                        bool(r.incorrect), r.blamed_step, r.method) for r in rows}

    def save_runs(self, conn: Connection, states: dict[int, RunState]) -> None:
        names = ("workflow", "started_at", "steps", "attempts", "incorrect", "blamed_step", "method")
        _insert_rows(conn, "analytics_runs", ("run_pk", *names),
                     [(pk, s.workflow, s.started_at, s.steps, s.attempts, s.incorrect, s.blamed_step, s.method)
                      for pk, s in states.items()],
                     f"ON CONFLICT (run_pk) DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}")

    def series_ids(self, conn: Connection, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The ``analytics_series`` id of each (workflow, step), created when missing."""
        wanted = set(keys)
        ids: dict[tuple[str, str], int] = {}
        for workflow in {w for w, _ in wanted}:
            series = conn.execute(text("SELECT id, step_id FROM analytics_series WHERE workflow = :w"), {"w": workflow})
            for r in series:
                ids[(workflow, r.step_id)] = int(r.id)
        for workflow, step in sorted(wanted - ids.keys()):
            conn.execute(text("INSERT INTO analytics_series (workflow, step_id, repeated, varied, not_covered) "
                              "VALUES (:w, :s, 0, 0, 0)"), {"w": workflow, "s": step})
            ids[(workflow, step)] = int(conn.execute(text("SELECT id FROM analytics_series WHERE workflow = :w "
                                                          "AND step_id = :s"), {"w": workflow, "s": step}).scalar_one())
        return ids

    def apply_days(self, conn: Connection, added: dict[tuple[str, str, int], DayCounts],
                   removed: dict[tuple[str, str, int], DayCounts], moved: set[tuple[str, int]], bound: int) -> None:
        """Add ``added`` to the per-day rows and take ``removed`` away; rows left without runs are deleted,
        and rows a run moved out of get their smallest agent and record id recomputed."""
        if not added and not removed:
            return
        series = self.series_ids(conn, {(w, s) for w, s, _ in (*added, *removed)})
        existing = {(int(r.series), int(r.day)) for sid in set(series.values()) for r in conn.execute(
            text("SELECT series, day FROM analytics_days WHERE series = :s"), {"s": sid})}
        sums = ", ".join(f"{n} = {n} + :{n}" for n in SUMS)
        smaller = ", ".join(f"{n} = CASE WHEN :{n} < {n} THEN :{n} ELSE {n} END" for n in MINIMA)
        inserted = []
        for key in added.keys() | removed.keys():
            delta = DayCounts()
            if key in added:
                delta.add(added[key])
            if key in removed:
                delta.add(removed[key], -1)
            values = {"series_": series[key[:2]], "day_": key[2], **delta.values()}
            if (values["series_"], key[2]) not in existing:  # a new day: written below, with the others
                assert key in added, f"counts taken away from a day never summarised: {key}"
                inserted.append((values["series_"], key[2], *delta.values().values()))
                continue
            update = f"{sums}, {smaller}" if key in added else sums  # what was added may hold smaller minima
            conn.execute(text(f"UPDATE analytics_days SET {update} WHERE series = :series_ AND day = :day_"), values)
            if key in removed:
                conn.execute(text("DELETE FROM analytics_days WHERE series = :series_ AND day = :day_ AND runs <= 0"),
                             values)
        _insert_rows(conn, "analytics_days", ("series", "day", *VALUES), inserted)
        day = day_expr("ar.started_at", self.dialect)
        recomputed = ", ".join(f"{n} = :{n}" for n in MINIMA)
        for workflow, step, day_number in [key for key in removed if (key[0], key[2]) in moved]:
            start = day_number * DAY
            row = conn.execute(text(f"""
                SELECT {SMALLEST} FROM analytics_runs ar {records_of('ar.run_pk', ':bound', self.dialect)}
                WHERE s.step_id = :step AND ar.workflow = :w AND ar.started_at >= :lo AND ar.started_at < :hi
                  AND {day} = :d"""),
                {"step": step, "bound": bound, "w": workflow, "lo": start - 1, "hi": start + DAY + 1,
                 "d": day_number}).one()
            if row.first_id is not None:
                conn.execute(text(f"UPDATE analytics_days SET {recomputed} WHERE series = :s AND day = :d"),
                             {**smallest(row), "s": series[(workflow, step)], "d": day_number})

    def add_first_outputs(self, conn: Connection, params: dict[str, Any]) -> None:
        """The non-determinism counts of the new records that are their (run, step)'s first attempt with an output.

        That record never changes once written (later records have larger ids), so each (run, step) is
        counted once, when it appears; ``analytics_inputs`` remembers every inputs digest seen, to tell
        when a run's inputs were seen before and whether the outputs then differed.
        """
        if self.dialect == "postgresql":  # each touched run's first qualifying record per step, then the new ones
            firsts = f"""
            FROM analytics_runs ar JOIN LATERAL (
              SELECT DISTINCT ON (step_id) id, {', '.join(OUTPUT_COLUMNS)} FROM step_records
              WHERE run_pk = ar.run_pk AND id + 0 <= :hi_records AND {produced_output('')}
              ORDER BY step_id, id) s ON TRUE
            WHERE ar.run_pk IN ({_NEW_RECORDS}) AND s.id > :lo_records"""
        else:  # SQLite: one probe of the (run_pk, step_id, ...) index per new record
            firsts = f"""
            FROM step_records s JOIN analytics_runs ar ON ar.run_pk = s.run_pk
            WHERE s.id > :lo_records AND s.id <= :hi_records AND {produced_output('s.')}
              AND NOT EXISTS (SELECT 1 FROM step_records e WHERE e.run_pk = s.run_pk AND e.step_id = s.step_id
                              AND e.id < s.id AND {produced_output('e.')})"""
        rows = conn.execute(text(output_groups(firsts, {"workflow": "ar.workflow"})), params).all()
        if not rows:
            return
        series = self.series_ids(conn, {(r.workflow, r.step_id) for r in rows})
        totals: dict[int, list[int]] = {}  # series -> [repeated, varied, not covered, first record]
        groups: dict[tuple[int, str], tuple[int, str | None, str | None]] = {}
        for r in rows:
            sid = series[(r.workflow, r.step_id)]
            total = totals.setdefault(sid, [0, 0, 0, int(r.first_id)])
            total[3] = min(total[3], int(r.first_id))
            if r.inputs_key is None:
                total[2] += int(r.n)
            else:
                groups[(sid, r.inputs_key)] = (int(r.n), r.lo, r.hi)
        known: dict[tuple[int, str], tuple[int, str | None, bool]] = {}
        for sid in {sid for sid, _ in groups}:
            digests = [inputs for s, inputs in groups if s == sid]
            for start in range(0, len(digests), 500):  # bounded IN lists
                marks = ", ".join(f":d{i}" for i in range(len(digests[start:start + 500])))
                found = conn.execute(text(f"SELECT inputs, runs, output, varied FROM analytics_inputs "
                                          f"WHERE series = :s AND inputs IN ({marks})"),
                                     {"s": sid, **{f"d{i}": d for i, d in enumerate(digests[start:start + 500])}})
                known.update({(sid, r.inputs): (int(r.runs), r.output, bool(r.varied)) for r in found})
        merged = []
        for (sid, inputs), (n, lo, hi) in groups.items():
            runs, output, varied = known.get((sid, inputs), (0, None, False))
            outputs = {d for d in (output, lo, hi) if d is not None}
            now_varied = varied or len(outputs) > 1
            totals[sid][0] += (runs + n >= 2) - (runs >= 2)
            totals[sid][1] += now_varied - varied
            merged.append({"s": sid, "i": inputs, "n": runs + n, "o": output if output is not None else lo,
                           "v": now_varied})
        if merged:
            conn.execute(text("INSERT INTO analytics_inputs (series, inputs, runs, output, varied) "
                              "VALUES (:s, :i, :n, :o, :v) ON CONFLICT (series, inputs) DO UPDATE "
                              "SET runs = excluded.runs, output = excluded.output, varied = excluded.varied"), merged)
        conn.execute(text("UPDATE analytics_series SET repeated = repeated + :r, varied = varied + :v, "
                          "not_covered = not_covered + :n, first_output = CASE WHEN first_output IS NULL "
                          "OR :f < first_output THEN :f ELSE first_output END WHERE id = :s"),
                     [{"s": sid, "r": r, "v": v, "n": n, "f": f} for sid, (r, v, n, f) in totals.items()])

    # -- reading it --

    @contextmanager
    def snapshot(self) -> Iterator[tuple[Connection, Marks]]:
        """Reads that see one state of the summary (and of the records its marks cover), with its marks."""
        conn = self.store.conn
        with self.store.lock:
            try:
                if self.dialect == "postgresql":
                    conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    conn.exec_driver_sql(NO_JIT)
                else:
                    conn.exec_driver_sql("BEGIN")
                state = conn.execute(text("SELECT runs, records, outcomes, attributions FROM analytics_state "
                                          "WHERE id = 1")).first()
                yield conn, Marks(*state) if state else Marks()
            finally:
                conn.rollback()


def cannot_write(exc: DBAPIError) -> bool:
    """Whether summarising failed because this process may not write the summary now: a read-only SQLite
    file, a PostgreSQL role without write access or a read-only transaction, a lock not granted in time."""
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate is not None:
        return sqlstate in ("25006", "42501", "55P03")
    message = str(exc.orig).lower()
    return "readonly" in message or "read-only" in message or "database is locked" in message


def _insert_rows(conn: Connection, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 conflict: str = "") -> None:
    """INSERT many rows at once: the first summary of a large database writes one per run.

    PostgreSQL: one statement over ``unnest`` of one array per column (one statement per row cost 35 µs
    a row; multi-row VALUES with thousands of parameters, more). SQLite: ``executemany``, which the
    stdlib driver runs in C.
    """
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        from orchestrator.store.tables import ANALYTICS_TABLES

        types = [ANALYTICS_TABLES[table].c[c].type.compile(dialect=conn.dialect) for c in columns]
        arrays = ", ".join(f"CAST(:c{j} AS {kind}[])" for j, kind in enumerate(types))
        conn.execute(text(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays}) {conflict}"),
                     {f"c{j}": [row[j] for row in rows] for j in range(len(columns))})
        return
    marks = ", ".join(f":c{j}" for j in range(len(columns)))
    conn.execute(text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) {conflict}"),
                 [{f"c{j}": v for j, v in enumerate(row)} for row in rows])


def _add_counts(conn: Connection, table: str, key: Sequence[str], deltas: dict[tuple[Any, ...], int]) -> None:
    """Add run counts to a table of (key..., runs) rows: a missing row is created, an emptied one deleted."""
    for values, delta in deltas.items():
        if not delta:
            continue
        where = " AND ".join(f"{k} IS NULL" if v is None else f"{k} = :{k}" for k, v in zip(key, values, strict=True))
        params = {**dict(zip(key, values, strict=True)), "delta_": delta}
        if not conn.execute(text(f"UPDATE {table} SET runs = runs + :delta_ WHERE {where}"), params).rowcount:
            assert delta > 0, f"runs taken away from a {table} row never summarised: {values}"
            conn.execute(text(f"INSERT INTO {table} ({', '.join(key)}, runs) VALUES "
                              f"({', '.join(':' + k for k in key)}, :delta_)"), params)
        elif delta < 0:
            conn.execute(text(f"DELETE FROM {table} WHERE {where} AND runs <= 0"), params)


def forget(store: SqlDatabase) -> None:
    """Empty the summary: the next read summarises every record again (benchmarks time that first read)."""
    from orchestrator.store.tables import ANALYTICS_TABLES

    with store.lock, Summary(store).writing() as conn:
        for name in ANALYTICS_TABLES:
            conn.execute(text(f"DELETE FROM {name}"))
