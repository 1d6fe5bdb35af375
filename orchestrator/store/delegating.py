"""A store that hands every call to another: the one place that forwards the whole Store interface.

Two stores are thin layers over another one: the replay's :class:`MarkingStore` (it only marks how a
replayed record's output came to be) and :class:`~orchestrator.store.sqlite.SqliteStore` (it writes
the run path itself and hands everything else to the SQLAlchemy store on the same file). Each
subclasses :class:`DelegatingStore` and overrides only what it changes, so a method added to the
Store interface is forwarded here once, not in every layer.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.records import AttributionView, ModelCallView, OutcomeView, ReviewView, RunView, StepRecordView
from orchestrator.store.base import Store
from orchestrator.store.rows import (
    UNCHANGED,
    Lease,
    ModelCall,
    NewAttribution,
    NewOutcome,
    NewReview,
    NewStepRecord,
    RunEnd,
    StepHistoryRow,
)

if TYPE_CHECKING:  # annotations only, as in orchestrator.store.base
    from orchestrator.store.analytics import (
        AttributionCounts,
        NondeterminismCounts,
        OutcomeCounts,
        OutcomeSummary,
        RunCounts,
        StepPeriodCounts,
        TrajectoryCounts,
    )
    from orchestrator.store.triage import RunPage, RunQuery


class DelegatingStore(Store):
    """Every Store method calls the same method of :meth:`target`; subclasses override what they change."""

    @abstractmethod
    def target(self) -> Store:
        """The store the calls go to."""

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        return self.target().insert_step_records(records, end=end)

    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                          content_hash: str) -> int:
        return self.target().register_workflow(name, version, definition, source, content_hash)

    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        return self.target().workflow_definition(workflow_id)

    def create_run(self, workflow_id: int, workflow: str, inputs: dict[str, Any], *, status: str = "running",
                   kind: str = "run", parent_run_id: str | None = None, parent_step: str | None = None,
                   owner: str | None = None, lease: Lease | None = None, reference: Any = None) -> str:
        return self.target().create_run(workflow_id, workflow, inputs, status=status, kind=kind,
                                     parent_run_id=parent_run_id, parent_step=parent_step, owner=owner, lease=lease,
                                     reference=reference)

    def get_run(self, run_id: str) -> RunView:
        return self.target().get_run(run_id)

    def set_run_status(self, run_id: str, status: str, *, output: Any = None, error: str | None = None,
                       expect: Iterable[str] | None = None, owner: str | None = UNCHANGED) -> bool:
        return self.target().set_run_status(run_id, status, output=output, error=error, expect=expect, owner=owner)

    def claim_queued_run(self, lease: Lease) -> str | None:
        return self.target().claim_queued_run(lease)

    def acquire_lease(self, lease: Lease, *, statuses: Iterable[str]) -> bool:
        return self.target().acquire_lease(lease, statuses=statuses)

    def due_reviews(self, now: float, *, limit: int = 100) -> list[tuple[str, float]]:
        return self.target().due_reviews(now, limit=limit)

    def set_review_deadline(self, run_id: str, deadline: float | None, *, was: float) -> bool:
        return self.target().set_review_deadline(run_id, deadline, was=was)

    def expire_lease(self, run_id: str, holder: str) -> bool:
        return self.target().expire_lease(run_id, holder)

    def renew_lease(self, lease: Lease) -> bool:
        return self.target().renew_lease(lease)

    def end_lease(self, lease: Lease, status: str, *, output: Any = None, error: str | None = None,
                  outcome: NewOutcome | None = None, review_deadline: float | None = None) -> bool:
        return self.target().end_lease(lease, status, output=output, error=error, outcome=outcome,
                                       review_deadline=review_deadline)

    def set_trace_id(self, run_id: str, trace_id: str) -> None:
        self.target().set_trace_id(run_id, trace_id)

    def set_reference(self, run_id: str, reference: Any) -> None:
        self.target().set_reference(run_id, reference)

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        return self.target().list_runs(status=status, workflow=workflow, kind=kind, limit=limit)

    def triage_runs(self, query: RunQuery) -> RunPage:
        return self.target().triage_runs(query)

    def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        return self.target().run_ids_starting(prefix, limit=limit)

    def child_runs(self, run_id: str) -> list[RunView]:
        return self.target().child_runs(run_id)

    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        return self.target().step_records(run_id, latest_only=latest_only)

    def llm_records(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        return self.target().llm_records(run_ids)

    def add_model_calls(self, run_id: str, record_id: int, calls: Sequence[ModelCall]) -> None:
        self.target().add_model_calls(run_id, record_id, calls)

    def model_calls(self, run_ids: Sequence[str]) -> list[ModelCallView]:
        return self.target().model_calls(run_ids)

    def workflow_model_calls(self, workflow: str, *, since: float | None = None) -> list[ModelCallView]:
        return self.target().workflow_model_calls(workflow, since=since)

    def step_history(self, workflow: str, *, since: float | None = None) -> list[StepHistoryRow]:
        return self.target().step_history(workflow, since=since)

    def decide(self, review: NewReview, *, new_records: Sequence[NewStepRecord] = (),
               run_status: str = "running", lease: Lease | None = None, supersede: Sequence[int] = (),
               from_statuses: Sequence[str] = ("paused",)) -> int:
        return self.target().decide(review, new_records=new_records, run_status=run_status, lease=lease,
                                 supersede=supersede, from_statuses=from_statuses)

    def reviews(self, run_id: str) -> list[ReviewView]:
        return self.target().reviews(run_id)

    def add_outcome(self, outcome: NewOutcome) -> int:
        return self.target().add_outcome(outcome)

    def outcomes(self, run_id: str) -> list[OutcomeView]:
        return self.target().outcomes(run_id)

    def add_attribution(self, attribution: NewAttribution) -> int:
        return self.target().add_attribution(attribution)

    def attributions(self, run_id: str | None = None, *, workflow: str | None = None) -> list[AttributionView]:
        return self.target().attributions(run_id, workflow=workflow)

    def step_period_counts(self, workflow: str, *, period: str = "week",
                           since: float | None = None) -> list[StepPeriodCounts]:
        return self.target().step_period_counts(workflow, period=period, since=since)

    def child_step_period_counts(self, workflow: str, step_id: str, *, period: str = "week",
                                 since: float | None = None) -> list[StepPeriodCounts]:
        return self.target().child_step_period_counts(workflow, step_id, period=period, since=since)

    def outcome_counts(self, workflow: str, *, period: str = "week", since: float | None = None) -> list[OutcomeCounts]:
        return self.target().outcome_counts(workflow, period=period, since=since)

    def trajectory_counts(self, workflow: str | None) -> list[TrajectoryCounts]:
        return self.target().trajectory_counts(workflow)

    def outcome_summary(self, workflow: str | None, *, window: int = 1) -> OutcomeSummary:
        return self.target().outcome_summary(workflow, window=window)

    def run_counts(self, workflow: str | None = None) -> list[RunCounts]:
        return self.target().run_counts(workflow)

    def attribution_counts(self, workflow: str) -> list[AttributionCounts]:
        return self.target().attribution_counts(workflow)

    def nondeterminism_counts(self, workflow: str) -> list[NondeterminismCounts]:
        return self.target().nondeterminism_counts(workflow)

    def count_rows(self) -> dict[str, int]:
        return self.target().count_rows()

    def close(self) -> None:
        self.target().close()
