"""The in-memory store (``memory://``): tests and throwaway runs; nothing outlives the process.

Same contract as :class:`~orchestrator.store.sql.SqlStore` (``tests/store/`` runs one suite on
both): integer ids increasing per table, JSON kept as text exactly as the SQL stores keep it
(encoded with :mod:`orchestrator.jsonio` on write, decoded on read, so a view is always a fresh
copy and a caller mutating it cannot change the store), and ``decide`` checks everything before
it writes anything. One re-entrant lock makes every method atomic with respect to the others.

SQLAlchemy is never imported here: a process on ``memory://`` does not pay for it.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orchestrator.store.aggregate as aggregate
from orchestrator import jsonio
from orchestrator.errors import NotFoundError, ReviewError, RunBusyError
from orchestrator.records import (
    AttributionView,
    GateView,
    ModelCallView,
    OutcomeView,
    ReviewView,
    RunView,
    StepRecordView,
    unit_name,
)
from orchestrator.store.aggregate import AttributionFact, OutcomeFact, RecordFact, RunFact
from orchestrator.store.analytics import (
    AttributionCounts,
    NondeterminismCounts,
    OutcomeCounts,
    OutcomeSummary,
    RunCounts,
    StepPeriodCounts,
    TrajectoryCounts,
    attribution_rank,
)
from orchestrator.store.base import (
    UNCHANGED,
    Lease,
    ModelCall,
    NewAttribution,
    NewOutcome,
    NewReview,
    NewStepRecord,
    RunEnd,
    StepHistoryRow,
    Store,
    already_decided,
    lease_lost,
    shown_status,
)
from orchestrator.store.digests import inputs_digest, output_digest
from orchestrator.store.triage import RunPage, RunQuery, TriageRow

TABLE_NAMES = ("workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions",
               "model_calls")
"""The keys of ``orchestrator.store.tables.TABLES``, in the same order (what ``count_rows`` reports)."""


def _float(value: Any) -> float | None:
    """A REAL column: numbers come back as floats, as from SQLite and PostgreSQL."""
    return None if value is None else float(value)


@dataclass(slots=True)
class _Workflow:
    id: int
    name: str
    version: str
    content_hash: str
    definition: str
    source: str | None
    created_at: float


@dataclass(slots=True)
class _Run:
    id: int
    run_id: str
    workflow_id: int
    workflow: str
    status: str
    kind: str
    inputs: str
    parent_run_id: str | None
    parent_step: str | None
    owner: str | None
    heartbeat_at: float | None
    created_at: float
    updated_at: float
    output: str | None = None
    error: str | None = None
    trace_id: str | None = None
    lease_token: str | None = None
    lease_expires_at: float | None = None
    reference: str | None = None
    records: list[int] = field(default_factory=list)
    """Ids of the run's step records, in insertion order."""


@dataclass(slots=True)
class _Gate:
    id: int
    record_id: int
    run_pk: int
    step_id: str
    gate: str
    passed: bool
    score: float | None
    reason: str
    details: str | None
    severity: str
    duration: float


@dataclass(slots=True)
class _Record:
    id: int
    run_pk: int
    workflow_id: int
    step_id: str
    step_type: str
    agent: str
    attempt: int
    status: str
    origin: str
    started_at: float
    ended_at: float
    inputs: str | None
    output: str | None
    error_type: str | None
    error_message: str | None
    consumed: str | None
    injected: str | None
    llm: str | None
    gates: list[_Gate] = field(default_factory=list)
    superseded_by: int | None = None
    inputs_digest: str | None = None
    output_digest: str | None = None
    traceback: str | None = None
    item_index: int | None = None
    skip_reason: str | None = None
    iteration: int | None = None


@dataclass(slots=True)
class _Review:
    id: int
    run_pk: int
    record_id: int
    step_id: str
    decision: str
    reviewer: str
    comment: str | None
    output_before: str | None
    output_after: str | None
    forced: bool
    created_at: float
    rerun_side_effects: bool | None = None


@dataclass(slots=True)
class _Outcome:
    id: int
    run_pk: int
    value: float
    correct: bool | None
    source: str
    termination: str
    reason: str | None
    reviewer: str | None
    created_at: float
    evaluator_reason: str | None = None


@dataclass(slots=True)
class _Attribution:
    id: int
    run_pk: int
    outcome_id: int | None
    method: str
    params: str
    step_credits: str
    agent_credits: str
    blamed_step: str | None
    confidence: float | None
    evidence: str
    cost: int
    created_at: float


def explaining_key(a: _Attribution) -> tuple[int, int]:
    """Sort key of :func:`~orchestrator.store.analytics.attribution_rank`'s rule: lower explains better."""
    params = jsonio.loads(a.params) if a.params else None
    return attribution_rank(a.method, isinstance(params, dict) and params.get("by") == "agent"), -a.id


class MemoryStore(Store):
    """Every table a dict keyed by its integer id; the process's memory is the database."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.lock = threading.RLock()
        self.last_ids: dict[str, int] = dict.fromkeys(TABLE_NAMES, 0)
        self.workflows: dict[int, _Workflow] = {}
        self.workflow_keys: dict[tuple[str, str], int] = {}
        self.runs: dict[int, _Run] = {}
        self.run_pks: dict[str, int] = {}
        self.records: dict[int, _Record] = {}
        self.gate_count = 0
        self.calls: list[ModelCallView] = []
        self.reviews_by_id: dict[int, _Review] = {}
        self.reviewed_records: set[int] = set()
        self.outcomes_by_id: dict[int, _Outcome] = {}
        self.attributions_by_id: dict[int, _Attribution] = {}
        self.undigested: list[int] = []
        """Records whose digests are yet to be computed, in id order (see :meth:`fill_digests`)."""

    def next_id(self, table: str) -> int:
        """The next primary key of a table (caller holds the lock); ids are never reused."""
        self.last_ids[table] += 1
        return self.last_ids[table]

    def run_row(self, run_id: str) -> _Run:
        """A run by its id (caller holds the lock); NotFoundError as the SQL stores word it."""
        pk = self.run_pks.get(run_id)
        if pk is None:
            raise NotFoundError(f"no run {run_id!r} in {self.display_url}; list runs with `orchestrator runs`")
        return self.runs[pk]

    # -- workflows and runs -----------------------------------------------------------------

    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                          content_hash: str) -> int:
        text = jsonio.dumps(definition)
        with self.lock:
            found = self.workflow_keys.get((name, content_hash))
            if found is not None:
                if source and source != self.workflows[found].source:
                    self.workflows[found].source = source
                return found
            pk = self.next_id("workflows")
            self.workflows[pk] = _Workflow(id=pk, name=name, version=str(version), content_hash=content_hash,
                                           definition=text, source=source, created_at=time.time())
            self.workflow_keys[(name, content_hash)] = pk
            return pk

    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        with self.lock:
            row = self.workflows.get(workflow_id)
            if row is None:
                raise NotFoundError(f"workflow definition {workflow_id} is not stored")
            text, source = row.definition, row.source
        return jsonio.loads(text), source

    def create_run(self, workflow_id: int, workflow: str, inputs: dict[str, Any], *, status: str = "running",
                   kind: str = "run", parent_run_id: str | None = None, parent_step: str | None = None,
                   owner: str | None = None, lease: Lease | None = None, reference: Any = None) -> str:
        text = jsonio.dumps(inputs)
        now = time.time()
        with self.lock:
            if workflow_id not in self.workflows:  # the SQL stores' foreign key refuses it too
                raise NotFoundError(f"workflow definition {workflow_id} is not stored")
            run_id = "r" + secrets.token_hex(5)
            while run_id in self.run_pks:  # the SQL stores' unique constraint would refuse a repeat
                run_id = "r" + secrets.token_hex(5)
            pk = self.next_id("runs")
            self.runs[pk] = _Run(id=pk, run_id=run_id, workflow_id=int(workflow_id), workflow=workflow,
                                 status=status, kind=kind, inputs=text, parent_run_id=parent_run_id,
                                 parent_step=parent_step, owner=lease.holder if lease else owner, heartbeat_at=now,
                                 created_at=now, updated_at=now, lease_token=lease.token if lease else None,
                                 lease_expires_at=now + lease.seconds if lease else None,
                                 reference=None if reference is None else jsonio.dumps(reference))
            self.run_pks[run_id] = pk
        return run_id

    def get_run(self, run_id: str) -> RunView:
        with self.lock:
            return run_view(self.run_row(run_id))

    def set_run_status(self, run_id: str, status: str, *, output: Any = None, error: str | None = None,
                       expect: Iterable[str] | None = None, owner: str | None = UNCHANGED) -> bool:
        text = None if output is None else jsonio.dumps(output)
        allowed = None if expect is None else set(expect)
        with self.lock:
            run = self.run_row(run_id)
            if allowed is not None and run.status not in allowed:
                return False
            run.status = status
            run.updated_at = time.time()
            if text is not None:
                run.output = text
            if error is not None:
                run.error = error
            if owner is not UNCHANGED:
                run.owner = owner
            return True

    def set_trace_id(self, run_id: str, trace_id: str) -> None:
        with self.lock:
            self.run_row(run_id).trace_id = trace_id

    def set_reference(self, run_id: str, reference: Any) -> None:
        with self.lock:
            self.run_row(run_id).reference = jsonio.dumps(reference)

    def claim_queued_run(self, lease: Lease) -> str | None:
        with self.lock:
            for run in self.runs.values():  # dicts keep insertion order: oldest first
                if run.status == "queued":
                    now = time.time()
                    run.status, run.owner, run.heartbeat_at, run.updated_at = "running", lease.holder, now, now
                    run.lease_token, run.lease_expires_at = lease.token, now + lease.seconds
                    return run.run_id
            return None

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        out: list[RunView] = []
        with self.lock:
            for run in reversed(self.runs.values()):
                if len(out) >= limit:
                    break
                shown = shown_status(run.status, run.lease_expires_at)
                if (status and shown != status) or (workflow and run.workflow != workflow) \
                        or (kind and run.kind != kind):
                    continue
                out.append(run_view(run))
        return out

    def triage_runs(self, query: RunQuery) -> RunPage:
        with self.lock:
            outcomes: dict[int, _Outcome] = {}
            for o in self.outcomes_by_id.values():  # ids increase: the last one seen is the latest
                outcomes[o.run_pk] = o
            explaining: dict[int, _Attribution] = {}
            for a in self.attributions_by_id.values():  # the explaining record: best rank, then newest
                held = explaining.get(a.run_pk)
                if held is None or explaining_key(a) < explaining_key(held):
                    explaining[a.run_pk] = a
            blamed: dict[int, str | None] = {pk: a.blamed_step for pk, a in explaining.items()}
            kept: list[TriageRow] = []
            for run in reversed(self.runs.values()):
                shown = shown_status(run.status, run.lease_expires_at)
                outcome = outcomes.get(run.id)
                correct = None if outcome is None else outcome.correct
                if (query.status and shown != query.status) or (query.workflow and run.workflow != query.workflow) \
                        or (query.kind and run.kind != query.kind) \
                        or (query.since is not None and run.created_at < query.since) \
                        or (query.outcome is not None and correct is not (query.outcome == "correct")) \
                        or (query.blamed and blamed.get(run.id) != query.blamed):
                    continue
                kept.append(TriageRow(run_view(run), outcome_value=None if outcome is None else outcome.value,
                                      outcome_correct=correct, blamed_step=blamed.get(run.id)))
            page = kept[max(0, query.offset):max(0, query.offset) + max(0, query.limit)]
            for row in page:
                if row.run.status == "paused":
                    self.fill_waiting(row)
            return RunPage(page, len(kept), query.offset, query.limit)

    def fill_waiting(self, row: TriageRow) -> None:
        """A paused run's waiting steps and first failing gate reason (caller holds the lock)."""
        latest: dict[tuple[str, int | None, int | None], _Record] = {}
        for rid in self.runs[self.run_pks[row.run.run_id]].records:
            rec = self.records[rid]
            latest[(rec.step_id, rec.item_index, rec.iteration)] = rec
        waiting = sorted((r for r in latest.values() if r.status == "gate_failed" and r.superseded_by is None
                          and r.id not in self.reviewed_records),
                         key=lambda r: (r.started_at, r.step_id, r.item_index or 0, r.iteration or 0))
        row.waiting_steps = [unit_name(r.step_id, r.item_index, r.iteration) for r in waiting]
        if waiting:
            row.gate_reason = next((g.reason for g in waiting[0].gates if not g.passed), None)

    def child_runs(self, run_id: str) -> list[RunView]:
        with self.lock:
            return [run_view(r) for r in self.runs.values() if r.parent_run_id == run_id]

    # -- step records ------------------------------------------------------------------------

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        with self.lock:
            runs = [self.run_row(record.run_id) for record in records]
            for record, run in zip(records, runs, strict=True):  # all or none: check every lease first
                if record.lease_token is not None and run.lease_token != record.lease_token:
                    raise lease_lost(record.run_id)
            if end is not None and self.run_row(end.lease.run_id).lease_token != end.lease.token:
                raise lease_lost(end.lease.run_id)
            ids = [self.write_record(record, run) for record, run in zip(records, runs, strict=True)]
            if end is not None:
                self.end_lease(end.lease, end.status, output=end.output)
            return ids

    def acquire_lease(self, lease: Lease, *, statuses: Iterable[str]) -> bool:
        now = time.time()
        with self.lock:
            run = self.run_row(lease.run_id)
            free = run.lease_token in (None, lease.token) or (run.lease_expires_at or 0) < now
            if run.status not in set(statuses) or not free:
                return False
            run.status, run.owner, run.lease_token = "running", lease.holder, lease.token
            run.lease_expires_at, run.heartbeat_at, run.updated_at = now + lease.seconds, now, now
            return True

    def renew_lease(self, lease: Lease) -> bool:
        now = time.time()
        with self.lock:
            run = self.run_row(lease.run_id)
            if run.lease_token != lease.token:
                return False
            run.lease_expires_at, run.heartbeat_at = now + lease.seconds, now
            return True

    def end_lease(self, lease: Lease, status: str, *, output: Any = None, error: str | None = None,
                  outcome: NewOutcome | None = None) -> bool:
        with self.lock:  # reentrant: the end and the outcome are one step for every other thread
            run = self.run_row(lease.run_id)
            if run.lease_token != lease.token:
                return False
            run.lease_token = run.lease_expires_at = None
            self.set_run_status(lease.run_id, status, output=output, error=error, owner=None)
            if outcome is not None:
                self.add_outcome(outcome)
            return True

    def write_record(self, record: NewStepRecord, run: _Run) -> int:
        """Store a record and its gates (caller holds the lock and has checked everything)."""
        pk = self.next_id("step_records")
        row = _Record(id=pk, run_pk=run.id, workflow_id=int(record.workflow_id), step_id=record.step_id,
                      step_type=record.step_type, agent=record.agent, attempt=int(record.attempt),
                      status=record.status, origin=record.origin, started_at=float(record.started_at),
                      ended_at=float(record.ended_at), inputs=record.inputs, output=record.output,
                      error_type=record.error_type, error_message=record.error_message, consumed=record.consumed,
                      injected=record.injected, llm=record.llm, inputs_digest=record.inputs_digest,
                      output_digest=record.output_digest, traceback=record.traceback,
                      item_index=record.item_index, skip_reason=record.skip_reason, iteration=record.iteration)
        for g in record.gates:
            row.gates.append(_Gate(id=self.next_id("gate_results"), record_id=pk, run_pk=run.id,
                                   step_id=record.step_id, gate=g.gate, passed=bool(g.passed),
                                   score=_float(g.score), reason=g.reason, details=g.details, severity=g.severity,
                                   duration=float(g.duration)))
        self.gate_count += len(row.gates)
        self.write_calls(run, pk, record.step_id, record.attempt, record.model_calls)
        self.records[pk] = row
        self.undigested.append(pk)
        run.records.append(pk)
        return pk

    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        with self.lock:
            run = self.run_row(run_id)
            rows = [self.records[pk] for pk in run.records]
            views = [record_view(r, run_id) for r in rows]
        if latest_only:
            return list({v.unit: v for v in views}.values())
        return views

    def llm_records(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        with self.lock:
            for run_id in run_ids:
                pk = self.run_pks.get(run_id)
                if pk is None:
                    continue
                for rid in self.runs[pk].records:
                    rec = self.records[rid]
                    if rec.llm and rec.origin == "executed":
                        out.setdefault(run_id, []).append(jsonio.loads(rec.llm))
        return out

    def write_calls(self, run: _Run, record_id: int, step_id: str, attempt: int, calls: Sequence[ModelCall]) -> None:
        """Store model calls (caller holds the lock)."""
        for c in calls:
            self.calls.append(ModelCallView(
                id=self.next_id("model_calls"), run_id=run.run_id, record_id=record_id, step_id=step_id,
                attempt=attempt, purpose=c.purpose, gate=c.gate, provider=c.provider, model=c.model,
                started_at=c.started_at, ended_at=c.ended_at, input_tokens=c.input_tokens,
                output_tokens=c.output_tokens, cost=c.cost, finish_reason=c.finish_reason, error=c.error,
                messages=list(c.messages), response=c.response))

    def add_model_calls(self, run_id: str, record_id: int, calls: Sequence[ModelCall]) -> None:
        with self.lock:
            owner = self.records[record_id]
            self.write_calls(self.run_row(run_id), record_id, owner.step_id, owner.attempt, calls)

    def model_calls(self, run_ids: Sequence[str]) -> list[ModelCallView]:
        wanted = set(run_ids)
        with self.lock:
            return [c for c in self.calls if c.run_id in wanted]

    def workflow_model_calls(self, workflow: str, *, since: float | None = None) -> list[ModelCallView]:
        with self.lock:
            production = {r.run_id for r in self.runs.values() if r.workflow == workflow and r.kind == "run"}
            return [c for c in self.calls if c.run_id in production and (since is None or c.started_at >= since)]

    def step_history(self, workflow: str, *, since: float | None = None) -> list[StepHistoryRow]:
        out: list[StepHistoryRow] = []
        with self.lock:
            for r in self.records.values():  # record ids increase: oldest first
                run = self.runs[r.run_pk]
                if run.workflow != workflow or run.kind != "run" or (since is not None and r.started_at < since):
                    continue
                out.append(StepHistoryRow(
                    record_id=r.id, run_id=run.run_id, step_id=r.step_id, agent=r.agent, status=r.status,
                    started_at=r.started_at, attempt=r.attempt,
                    gates_passed=all(g.passed for g in r.gates) if r.gates else None,
                    inputs=r.inputs, output=r.output, llm=r.llm if r.origin == "executed" else None))
        return out

    # -- reviews ------------------------------------------------------------------------------

    def decide(self, review: NewReview, *, new_records: Sequence[NewStepRecord] = (),
               run_status: str = "running", lease: Lease | None = None, supersede: Sequence[int] = (),
               from_statuses: Sequence[str] = ("paused",)) -> int:
        """Every check comes before the first write, so a refused decision stores nothing."""
        before = jsonio.dumps(review.output_before)
        after = None if review.output_after is None else jsonio.dumps(review.output_after)
        with self.lock:
            run = self.run_row(review.run_id)
            if review.record_id in self.reviewed_records:
                winner = next((r for r in self.reviews(review.run_id) if r.record_id == review.record_id), None)
                raise already_decided(review, winner)
            if review.record_id not in self.records:
                raise ReviewError(f"step record {review.record_id} ({review.step_id!r}) is not stored in run "
                                  f"{review.run_id}; see `orchestrator show {review.run_id}`")
            now = time.time()
            lease_free = lease is None or run.lease_token in (None, lease.token) or (run.lease_expires_at or 0) < now
            stale = [pk for pk in set(supersede)
                     if pk not in run.records or self.records[pk].superseded_by is not None]
            if run.status not in set(from_statuses) or not lease_free or stale:
                raise RunBusyError(f"run {review.run_id} is no longer {' or '.join(from_statuses)} (another decision "
                                  f"is being applied); see `orchestrator show {review.run_id}`")
            pk = self.next_id("reviews")
            self.reviews_by_id[pk] = _Review(id=pk, run_pk=run.id, record_id=review.record_id,
                                             step_id=review.step_id, decision=review.decision,
                                             reviewer=review.reviewer, comment=review.comment, output_before=before,
                                             output_after=after, forced=bool(review.forced), created_at=now,
                                             rerun_side_effects=review.rerun_side_effects)
            self.reviewed_records.add(review.record_id)
            for record in new_records:  # like the SQL stores: a decision's records belong to its run
                self.write_record(record, run)
            for record_id in supersede:
                self.records[record_id].superseded_by = pk
            run.status, run.updated_at, run.error = run_status, now, None  # a fixed failed run's error is history
            if lease is not None:
                run.owner, run.lease_token, run.lease_expires_at = lease.holder, lease.token, now + lease.seconds
                run.heartbeat_at = now
            return pk

    def reviews(self, run_id: str) -> list[ReviewView]:
        with self.lock:
            run = self.run_row(run_id)
            rows = [r for r in self.reviews_by_id.values() if r.run_pk == run.id]
        return [ReviewView(id=r.id, run_id=run_id, record_id=r.record_id, step_id=r.step_id, decision=r.decision,
                           reviewer=r.reviewer, comment=r.comment, output_before=jsonio.loads(r.output_before),
                           output_after=jsonio.loads(r.output_after), forced=r.forced, created_at=r.created_at,
                           rerun_side_effects=r.rerun_side_effects)
                for r in rows]

    # -- outcomes and attribution -------------------------------------------------------------

    def add_outcome(self, outcome: NewOutcome) -> int:
        with self.lock:
            run = self.run_row(outcome.run_id)
            pk = self.next_id("outcomes")
            self.outcomes_by_id[pk] = _Outcome(
                id=pk, run_pk=run.id, value=float(outcome.value),
                correct=None if outcome.correct is None else bool(outcome.correct), source=outcome.source,
                termination=outcome.termination, reason=outcome.reason, reviewer=outcome.reviewer,
                created_at=time.time(), evaluator_reason=outcome.evaluator_reason)
            return pk

    def outcomes(self, run_id: str) -> list[OutcomeView]:
        with self.lock:
            run = self.run_row(run_id)
            return [OutcomeView(id=o.id, run_id=run_id, value=o.value, correct=o.correct, source=o.source,
                                termination=o.termination, reason=o.reason, reviewer=o.reviewer,
                                created_at=o.created_at, evaluator_reason=o.evaluator_reason)
                    for o in self.outcomes_by_id.values() if o.run_pk == run.id]

    def add_attribution(self, attribution: NewAttribution) -> int:
        a = attribution
        params, steps, agents, evidence = (jsonio.dumps(a.params), jsonio.dumps(a.step_credits),
                                           jsonio.dumps(a.agent_credits), jsonio.dumps(a.evidence))
        with self.lock:
            run = self.run_row(a.run_id)
            if a.outcome_id is not None and a.outcome_id not in self.outcomes_by_id:  # a foreign key in SQL
                raise NotFoundError(f"outcome {a.outcome_id} is not stored")
            pk = self.next_id("attributions")
            self.attributions_by_id[pk] = _Attribution(
                id=pk, run_pk=run.id, outcome_id=a.outcome_id, method=a.method, params=params, step_credits=steps,
                agent_credits=agents, blamed_step=a.blamed_step, confidence=_float(a.confidence), evidence=evidence,
                cost=int(a.cost), created_at=time.time())
            return pk

    def attributions(self, run_id: str | None = None, *, workflow: str | None = None) -> list[AttributionView]:
        with self.lock:
            run_pk = None if run_id is None else self.run_row(run_id).id
            rows = [(a, self.runs[a.run_pk].run_id) for a in self.attributions_by_id.values()
                    if (run_pk is None or a.run_pk == run_pk)
                    and (workflow is None or self.runs[a.run_pk].workflow == workflow)]
        return [AttributionView(id=a.id, run_id=rid, outcome_id=a.outcome_id, method=a.method,
                                params=jsonio.loads(a.params), step_credits=jsonio.loads(a.step_credits),
                                agent_credits=jsonio.loads(a.agent_credits), blamed_step=a.blamed_step,
                                confidence=a.confidence, evidence=jsonio.loads(a.evidence), cost=a.cost,
                                created_at=a.created_at) for a, rid in rows]

    def fill_digests(self) -> None:
        """Compute the digests of the records written since the last call (caller holds the lock).

        A database store computes them as it writes, so that a report over millions of records
        groups stored columns; held in memory, a record is cheaper to write without them and the
        report that reads them computes them once, here. In id order: a record's links point to
        records written before it, whose output digests are then known.
        """
        for pk in self.undigested:
            row = self.records.get(pk)
            if row is not None:
                row.output_digest = output_digest(row.output)
                row.inputs_digest = inputs_digest(row.inputs, self.stored_output_digests)
        self.undigested.clear()

    def stored_output_digests(self, ids: Iterable[int]) -> dict[int, str | None]:
        with self.lock:
            return {i: self.records[i].output_digest for i in ids if i in self.records}

    # -- analytics (the rules of orchestrator.store.analytics, in Python over what is held here) --------

    def facts(self) -> tuple[list[RunFact], list[RecordFact], list[OutcomeFact], list[AttributionFact]]:
        """Plain copies of the runs, records, outcomes and attribution records, for the aggregations."""
        with self.lock:
            self.fill_digests()
            runs = [RunFact(pk=r.id, workflow=r.workflow, workflow_id=r.workflow_id, kind=r.kind,
                            status=shown_status(r.status, r.lease_expires_at), created_at=r.created_at)
                    for r in self.runs.values()]
            records = [RecordFact(id=r.id, run_pk=r.run_pk, step_id=r.step_id, agent=r.agent, status=r.status,
                                  attempt=r.attempt, started_at=r.started_at, origin=r.origin,
                                  gate_count=len(r.gates), gates_failed=sum(1 for g in r.gates if not g.passed),
                                  llm=r.llm, has_output=r.output is not None, inputs_digest=r.inputs_digest,
                                  output_digest=r.output_digest, item_index=r.item_index,
                                  skip_reason=r.skip_reason, iteration=r.iteration)
                       for r in self.records.values()]
            outcomes = [OutcomeFact(id=o.id, run_pk=o.run_pk, value=o.value, correct=o.correct, source=o.source,
                                    termination=o.termination) for o in self.outcomes_by_id.values()]
            attributions = [AttributionFact(id=a.id, run_pk=a.run_pk, outcome_id=a.outcome_id, method=a.method,
                                            params=a.params, blamed_step=a.blamed_step, cost=a.cost)
                            for a in self.attributions_by_id.values()]
        return runs, records, outcomes, attributions

    def step_period_counts(self, workflow: str, *, period: str = "week",
                           since: float | None = None) -> list[StepPeriodCounts]:
        runs, records, _, _ = self.facts()
        return aggregate.step_period_counts(aggregate.production_runs(runs, workflow), records, period, since)

    def outcome_counts(self, workflow: str, *, period: str = "week", since: float | None = None) -> list[OutcomeCounts]:
        runs, records, outcomes, attributions = self.facts()
        return aggregate.outcome_counts(aggregate.production_runs(runs, workflow), records, outcomes, attributions,
                                        period, since)

    def trajectory_counts(self, workflow: str | None) -> list[TrajectoryCounts]:
        runs, records, _, _ = self.facts()
        return aggregate.trajectory_counts(aggregate.production_runs(runs, workflow), records)

    def outcome_summary(self, workflow: str | None, *, window: int = 1) -> OutcomeSummary:
        runs, _, outcomes, _ = self.facts()
        return aggregate.outcome_summary(aggregate.production_runs(runs, workflow), outcomes, window)

    def run_counts(self, workflow: str | None = None) -> list[RunCounts]:
        return aggregate.run_counts(self.facts()[0], workflow)

    def attribution_counts(self, workflow: str) -> list[AttributionCounts]:
        runs, _, _, attributions = self.facts()
        return aggregate.attribution_counts([r for r in runs if r.workflow == workflow], attributions)

    def nondeterminism_counts(self, workflow: str) -> list[NondeterminismCounts]:
        runs, records, _, _ = self.facts()
        return aggregate.nondeterminism_counts(aggregate.production_runs(runs, workflow), records)

    def count_rows(self) -> dict[str, int]:
        with self.lock:
            counts = (len(self.workflows), len(self.runs), len(self.records), self.gate_count,
                      len(self.reviews_by_id), len(self.outcomes_by_id), len(self.attributions_by_id), len(self.calls))
        return dict(zip(TABLE_NAMES, counts, strict=True))

    def close(self) -> None:
        """Nothing to release: the data lives as long as this object."""


def run_view(run: _Run) -> RunView:
    return RunView(id=run.id, run_id=run.run_id, workflow=run.workflow, workflow_id=run.workflow_id,
                   status=shown_status(run.status, run.lease_expires_at), kind=run.kind,
                   inputs=jsonio.loads(run.inputs) or {},
                   output=jsonio.loads(run.output), error=run.error, parent_run_id=run.parent_run_id,
                   parent_step=run.parent_step, created_at=run.created_at, updated_at=run.updated_at,
                   trace_id=run.trace_id, owner=run.owner, lease_expires_at=run.lease_expires_at,
                   reference=jsonio.loads(run.reference))


def gate_view(g: _Gate) -> GateView:
    return GateView(gate=g.gate, passed=g.passed, score=g.score, reason=g.reason,
                    details=jsonio.loads(g.details) or {}, severity=g.severity, duration=g.duration,
                    record_id=g.record_id)


def record_view(r: _Record, run_id: str) -> StepRecordView:
    consumed = [{"record_id": c[0], "step_id": c[1], "delay": c[2]} for c in (jsonio.loads(r.consumed) or [])]
    return StepRecordView(id=r.id, run_id=run_id, step_id=r.step_id, step_type=r.step_type, agent=r.agent,
                          attempt=r.attempt, status=r.status, origin=r.origin, started_at=r.started_at,
                          ended_at=r.ended_at, inputs=jsonio.loads(r.inputs), output=jsonio.loads(r.output),
                          error_type=r.error_type, error_message=r.error_message, consumed=consumed,
                          injected=jsonio.loads(r.injected) or [], gates=[gate_view(g) for g in r.gates],
                          llm=jsonio.loads(r.llm), superseded_by=r.superseded_by, traceback=r.traceback,
                          index=r.item_index, skip_reason=r.skip_reason, iteration=r.iteration)
