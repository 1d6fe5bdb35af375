"""The store's interfaces, by role, and :class:`Store`, their combination.

Callers type against the role they use: an executor writes runs, leases and records; ``stats``
reads analytics. :class:`Store` combines every role, as one object on one database does.
``tests/store/`` runs one contract suite on SQLite, ``memory://`` and PostgreSQL.

- :class:`RunStore`: workflows, runs and leases;
- :class:`RecordStore`: step records, their gate verdicts and model calls;
- :class:`DecisionStore`: reviews, the human decisions on paused runs;
- :class:`OutcomeStore`: outcomes and attribution records;
- :class:`NotificationStore`: the notification outbox (written with a pause or end, claimed by senders);
- :class:`AnalyticsStore`: pages of runs and aggregated rows for ``runs``, ``stats`` and ``report``;
- :class:`DatasetStore`: datasets of examples, experiments and the runs they made.

Every method is synchronous and safe to call from several threads of one process; the executor
calls it from its event loop (a commit costs tens of microseconds on SQLite). What is written
arrives as the typed rows of :mod:`orchestrator.store.rows`, what is read comes back as the views
of :mod:`orchestrator.spec.records`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import LeaseLostError, ReviewError
from orchestrator.spec.datasets import (
    DatasetView,
    ExampleView,
    ExperimentRunLink,
    ExperimentView,
    NewExample,
    NewExperiment,
)
from orchestrator.spec.records import (
    AttributionView,
    ModelCallView,
    NotificationView,
    OutcomeView,
    ReviewView,
    RunView,
    StepRecordView,
    iso,
)
from orchestrator.store.rows import (
    UNCHANGED,
    Lease,
    ModelCall,
    NewAttribution,
    NewDecision,
    NewNotification,
    NewOutcome,
    NewReview,
    NewRun,
    NewStepRecord,
    RunEnd,
    StepHistoryRow,
)

if TYPE_CHECKING:  # annotations only: a run never loads the analytics and triage rows
    from orchestrator.store.analytics import (
        AttributionCounts,
        ModelCallGroup,
        NondeterminismCounts,
        OutcomeCounts,
        OutcomeSummary,
        RunCounts,
        StepPeriodCounts,
        TrajectoryCounts,
    )
    from orchestrator.store.triage import RunPage, RunQuery


def lease_lost(run_id: str) -> LeaseLostError:
    return LeaseLostError(f"lost the lease on run {run_id}: another process took it over after this one stalled; "
                          "stopped without writing")


def already_decided(review: NewReview, winner: ReviewView | None) -> ReviewError:
    """The loser's message in a race of decisions on one pause: who decided it, and when."""
    who = f": {winner.decision} by {winner.reviewer} at {iso(winner.created_at)}" if winner is not None else ""
    return ReviewError(f"step {review.step_id!r} of run {review.run_id} was already decided by another reviewer"
                       f"{who}; see `orchestrator show {review.run_id}`")


class RunStore(ABC):
    """Workflows, runs and leases: what starting, claiming, resuming and ending a run writes and reads."""

    @abstractmethod
    def register_workflow(self, name: str, version: str, definition: dict[str, Any], source: str | None,
                          content_hash: str) -> int:
        """Store a workflow version once per (name, content hash) and return its id."""

    @abstractmethod
    def workflow_definition(self, workflow_id: int) -> tuple[dict[str, Any], str | None]:
        """The stored definition and the source file it was loaded from."""

    @abstractmethod
    def create_run(self, run: NewRun, *, lease: Lease | None = None) -> str:
        """Create a run and return its id; with ``lease``, the run is created held (its run_id is ignored)."""

    @abstractmethod
    def get_run(self, run_id: str) -> RunView:
        """One run; NotFoundError naming the run when it does not exist."""

    @abstractmethod
    def list_runs(self, *, status: str | None = None, workflow: str | None = None, kind: str | None = "run",
                  limit: int = 1000) -> list[RunView]:
        """Runs, newest first."""

    @abstractmethod
    def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        """Up to ``limit`` run ids beginning with ``prefix`` (the ids are lowercase letters and digits),
        in id order: how a prefix typed for a run finds it (:mod:`orchestrator.store.run_prefix`)."""

    @abstractmethod
    def run_ids_starting_any(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        """Up to ``limit`` run ids beginning with any of ``prefixes``, in id order, each once: the ids a page
        of listed runs shares its prefixes with, read at once (one query where a query costs a round trip)."""

    @abstractmethod
    def child_runs(self, run_id: str) -> list[RunView]:
        """Replays and forks of a run, oldest first."""

    @abstractmethod
    def child_runs_of(self, run_ids: Sequence[str]) -> dict[str, list[RunView]]:
        """:meth:`child_runs` of several runs at once, by parent run id (runs without any left out): one level
        of a tree read in one call, however many runs it holds."""

    @abstractmethod
    def set_run_status(self, run_id: str, status: str, *, output: Any = None, error: str | None = None,
                       expect: Iterable[str] | None = None, holder: str | None = UNCHANGED) -> bool:
        """Move a run to ``status``; with ``expect``, only from one of those states (False if not).
        ``holder``: who holds the run from now on (None: nobody)."""

    @abstractmethod
    def set_trace_id(self, run_id: str, trace: str) -> None:
        """Remember the run's OpenTelemetry trace id."""

    @abstractmethod
    def set_reference(self, run_id: str, answer: Any) -> None:
        """Store the answer (JSON data) the run's outcome evaluator compares with, replacing any earlier one."""

    @abstractmethod
    def claim_queued_run(self, lease: Lease) -> str | None:
        """Atomically take the oldest queued run under ``lease`` (its run_id is ignored); None when none is queued."""

    @abstractmethod
    def acquire_lease(self, lease: Lease, *, statuses: Iterable[str]) -> bool:
        """Take the run's lease and mark it ``running``, in one conditional update.

        Succeeds only when the run is in one of ``statuses`` and nobody else holds a live lease
        (none, expired, or this very token): exactly one of any number of claimants wins.
        """

    @abstractmethod
    def renew_lease(self, lease: Lease) -> bool:
        """Extend a held lease (the heartbeat); False when it was taken over, ended or handed back."""

    @abstractmethod
    def hand_back_lease(self, lease: Lease) -> bool:
        """Let a held lease lapse now without ending its run: the run shows as ``interrupted`` and anyone may
        take it at once. The token stops holding the run, so a renewal sent before (and still on its way)
        cannot extend the lease again. False when the lease was no longer held."""

    @abstractmethod
    def due_reviews(self, now: float, *, limit: int = 100) -> list[tuple[str, float]]:
        """Paused runs whose review deadline is at or before ``now``, earliest first: ``(run_id, deadline)``.
        Indexed: a worker asks on every idle poll, whatever the number of paused runs."""

    @abstractmethod
    def set_review_deadline(self, run_id: str, deadline: float | None, *, was: float) -> bool:
        """Move a paused run's review deadline from ``was`` (as :meth:`due_reviews` read it) to ``deadline``;
        False, and nothing changed, when the run changed meanwhile (decided, continued, paused again)."""

    @abstractmethod
    def expire_lease(self, run_id: str, holder: str) -> bool:
        """End now the live lease ``holder`` has on the run, whose process is known to be gone, so that
        :meth:`acquire_lease` may take the run at once; False when that holder holds no lease on it."""

    @abstractmethod
    def end_lease(self, lease: Lease, status: str, *, output: Any = None, error: str | None = None,
                  outcome: NewOutcome | None = None, review_due: float | None = None,
                  notifications: Sequence[NewNotification] = ()) -> bool:
        """Write the run's end and release the lease, only if still held; False when it was taken over.

        ``notifications`` (who is told of this pause or end) are written in the same transaction: a process
        killed right after the end leaves them for the next sender, and an end not written writes none.

        ``review_due``: of a ``paused`` end, when its earliest ``review_timeout`` is due (None: no
        pause times out); any end replaces the run's previous deadline (see :meth:`due_reviews`).

        ``outcome`` (the evaluator's score of the run) is stored in the same transaction: a run never
        ends without the score its execution computed, so a process killed in between leaves a run
        that is still resumable and is scored by whoever resumes it, not one succeeded and unscored."""



class RecordStore(ABC):
    """Step records with their gate verdicts and model calls: what each attempt commits, read back per run."""

    @abstractmethod
    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        """Commit attempts and their gate verdicts in one transaction, all or none; returns the record
        ids in order. Under a lease (a record naming its lease's token) nothing is written once the
        run's lease has another token: LeaseLostError. Steps finishing together share a commit
        (:mod:`orchestrator.engine.group_commit`). With ``end``, the run's end is written in the same
        transaction, as :meth:`end_lease` would (LeaseLostError, and nothing written, when the lease
        was taken over)."""

    def insert_step_record(self, record: NewStepRecord) -> int:
        """Commit one attempt and its gate verdicts in one transaction; returns the record id."""
        return self.insert_step_records([record])[0]

    @abstractmethod
    def step_records(self, run_id: str, *, latest_only: bool = False) -> list[StepRecordView]:
        """Records of a run in insertion order with their gates; optionally the latest per step."""

    @abstractmethod
    def step_records_of(self, run_ids: Sequence[str]) -> dict[str, list[StepRecordView]]:
        """:meth:`step_records` of several runs at once, by run id (runs without any left out)."""

    def latest_records(self, run_id: str) -> dict[str, StepRecordView]:
        """The latest record of each step of a run."""
        return {v.step_id: v for v in self.step_records(run_id, latest_only=True)}

    @abstractmethod
    def llm_records(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The model-call records of executed attempts of these runs, by run id (runs without any left out)."""

    @abstractmethod
    def add_model_calls(self, run_id: str, record_id: int, calls: Sequence[ModelCall]) -> None:
        """Store model calls made outside a step's attempt for record ``record_id`` (a gate checking a
        reviewer's edit): paid for whether or not the edit is accepted, so counted either way."""

    @abstractmethod
    def model_calls(self, run_ids: Sequence[str]) -> list[ModelCallView]:
        """Every model call of these runs, oldest first."""



class DecisionStore(ABC):
    """Reviews: a human decision on a paused (or failed) run, stored with what it changes in one transaction."""

    @abstractmethod
    def decide(self, review: NewReview, *, new_records: Sequence[NewStepRecord] = (),
               run_status: str = "running", lease: Lease | None = None, supersede: Sequence[int] = (),
               from_statuses: Sequence[str] = ("paused",)) -> int:
        """Store a review, its new records, and move the run out of ``paused``, in one transaction.

        Exactly one decision per paused record is ever stored: a second one, or one for a run
        that is no longer paused, raises ReviewError and stores nothing.

        ``lease``: the decision also claims the run's lease for its continuation (the run becomes
        ``running`` held by it), so no other process can start the run between the decision and
        the continuation; when the lease cannot be taken, nothing is stored. ``supersede``: ids of
        the run's records a fix of an upstream step replaces; each is marked with the review's id
        (kept, never deleted). ``from_statuses``: the run states the decision applies to (a fix
        also applies to a ``failed`` run).
        """

    @abstractmethod
    def decide_all(self, decisions: Sequence[NewDecision]) -> list[int]:
        """Store several decisions, each as :meth:`decide` would, in one transaction: all of them or none.

        A fix of a child run's completed step reaches up into the runs above it (each run's records after
        the child's unit are superseded, bound to the pause it answers): written one run at a time, a
        process killed in between would leave the runs above fixed and the child not, and the fix lost.
        """

    @abstractmethod
    def reviews(self, run_id: str) -> list[ReviewView]:
        """Decisions on a run, oldest first."""

    @abstractmethod
    def reviews_of(self, run_ids: Sequence[str]) -> dict[str, list[ReviewView]]:
        """:meth:`reviews` of several runs at once, by run id (runs without any left out)."""



class OutcomeStore(ABC):
    """Outcomes and attribution records: how a run turned out, and which steps it is blamed on."""

    @abstractmethod
    def add_outcome(self, outcome: NewOutcome) -> int:
        """Store a final-output signal; returns its id."""

    @abstractmethod
    def outcomes(self, run_id: str) -> list[OutcomeView]:
        """Outcomes of a run, oldest first."""

    @abstractmethod
    def add_attribution(self, attribution: NewAttribution) -> int:
        """Store an attribution record; returns its id."""

    @abstractmethod
    def attributions(self, run_id: str | None = None, *, workflow: str | None = None) -> list[AttributionView]:
        """Attribution records of a run or of a workflow's runs, oldest first."""



class NotificationStore(ABC):
    """The notification outbox: rows written with the pause or end that causes them (:meth:`RunStore.end_lease`,
    a :class:`~orchestrator.store.rows.RunEnd`), claimed and delivered by senders, at least once.

    Times are the caller's clock (``now``): a claim lasts until ``now + claim_seconds``, and a row is due once
    its ``next_try_at`` has come."""

    @abstractmethod
    def add_notifications(self, notifications: Sequence[NewNotification]) -> None:
        """Write notifications in one transaction of their own (those not caused by a pause or an end)."""

    @abstractmethod
    def claim_notifications(self, holder: str, *, now: float, claim_seconds: float, limit: int = 20,
                            run_id: str | None = None) -> list[NotificationView]:
        """Claim up to ``limit`` due, pending notifications (of one run, with ``run_id``), oldest first, for
        ``holder``: each row is claimed by one conditional update, so of several senders exactly one gets it.
        A claim that lapsed (its holder died or stalled) may be taken again."""

    @abstractmethod
    def finish_notification(self, notification_id: int, holder: str, *, delivered: bool, tries: int,
                            error: str | None, retry_at: float | None, now: float) -> bool:
        """Record how the delivery of a claimed notification went and end the claim: delivered, pending again
        from ``retry_at``, or failed for good (``retry_at`` None). ``tries``: the total so far. False, and
        nothing written, when ``holder`` no longer holds the claim."""

    @abstractmethod
    def notification_claim_holders(self, now: float) -> list[str]:
        """Who holds live claims on pending notifications (a sender checks whether they are still alive)."""

    @abstractmethod
    def release_notification_claims(self, holder: str) -> int:
        """End every claim ``holder`` has on pending notifications (its process is known to be gone), so that
        another sender delivers them at once; returns how many."""

    @abstractmethod
    def notifications(self, *, failed: bool = False, run_id: str | None = None,
                      limit: int = 100) -> list[NotificationView]:
        """Notifications, newest first: all, those whose delivery failed (given up, or pending after a failed
        try) with ``failed``, or one run's with ``run_id``."""


class AnalyticsStore(ABC):
    """What ``runs``, ``stats``, ``report`` and the dashboard read: pages of runs and aggregated rows whose
    number does not grow with the runs (:mod:`orchestrator.store.analytics`, :mod:`orchestrator.store.triage`)."""

    @abstractmethod
    def triage_runs(self, query: RunQuery) -> RunPage:
        """One page of runs, newest first, with outcome, blamed step and waiting step; the rules are in
        :mod:`orchestrator.store.triage`. A fixed number of queries per page, never one per run."""

    @abstractmethod
    def step_history(self, workflow: str, *, since: float | None = None) -> list[StepHistoryRow]:
        """Every record of original runs of a workflow, oldest first: the raw data of ``stats``."""

    @abstractmethod
    def workflow_model_calls(self, workflow: str, *, since: float | None = None) -> list[ModelCallView]:
        """Every model call of a workflow's original runs (no replays) started since ``since``: ``stats`` reads them."""

    @abstractmethod
    def workflow_model_usage(self, workflow: str, *, since: float | None = None) -> list[ModelCallGroup]:
        """The model calls of a workflow's original runs (no replays) started since ``since``, added up per step,
        purpose, gate and UTC day by the database: what ``stats`` shows of them, in memory that grows with the
        steps and days, not the calls (each loaded call cost about a kilobyte)."""

    @abstractmethod
    def step_period_counts(self, workflow: str, *, period: str = "week",
                           since: float | None = None) -> list[StepPeriodCounts]:
        """Per step and ``day``/``week``: runs, gate verdicts, attempts, failures, retries, model usage.

        Ordered by period, then by each step's first record. Runs starting before ``since`` are left out.
        """

    @abstractmethod
    def child_step_period_counts(self, workflow: str, step_id: str, *, period: str = "week",
                                 since: float | None = None) -> list[StepPeriodCounts]:
        """:meth:`step_period_counts` of a ``workflow:`` step's child workflow, over the child runs that the step's
        units (its instances and iterations too) started in ``workflow``'s production runs; a child run belongs
        to the period of its own start. Step ids are the child's own (``retrieve``)."""

    @abstractmethod
    def outcome_counts(self, workflow: str, *, period: str = "week", since: float | None = None) -> list[OutcomeCounts]:
        """Per period: production runs by outcome state, incorrect ones by the step their attribution blamed."""

    @abstractmethod
    def trajectory_counts(self, workflow: str | None) -> list[TrajectoryCounts]:
        """How many production runs (of one workflow, or all) executed how many steps in how many attempts.

        Runs without records count as zero steps in zero attempts; skipped records are left out."""

    @abstractmethod
    def outcome_summary(self, workflow: str | None, *, window: int = 1) -> OutcomeSummary:
        """The latest outcome of each production run (of one workflow, or all), summed up, with the mean
        reward of the first and last ``window`` scored runs in creation order."""

    @abstractmethod
    def run_counts(self, workflow: str | None = None) -> list[RunCounts]:
        """Runs of every kind by workflow version, kind and shown status (of one workflow, or all)."""

    @abstractmethod
    def attribution_counts(self, workflow: str) -> list[AttributionCounts]:
        """Attribution records of a workflow's runs by method and parameters, in order of first use."""

    @abstractmethod
    def nondeterminism_counts(self, workflow: str) -> list[NondeterminismCounts]:
        """Per step of production runs: repeated inputs, how many gave varied outputs, records not covered."""


class DatasetStore(ABC):
    """Datasets (named, versioned lists of examples) and experiments (a workflow version run on a dataset
    version, one run per example). Examples are never changed or removed: a dataset only grows."""

    @abstractmethod
    def add_examples(self, dataset: str, examples: Sequence[NewExample], *, create: bool = True,
                     description: str | None = None) -> DatasetView:
        """Add examples as the dataset's next version (version 1 creates it), all in one transaction and one
        batch insert. ``create=False``: InputError when the dataset exists already (``dataset create``);
        the dataset is created when missing either way. Returns the dataset at its new version."""

    @abstractmethod
    def datasets(self) -> list[DatasetView]:
        """Every dataset at its latest version, by name."""

    @abstractmethod
    def dataset(self, name: str) -> DatasetView:
        """One dataset at its latest version; NotFoundError naming it when there is none."""

    @abstractmethod
    def examples(self, dataset: str, *, version: int | None = None) -> list[ExampleView]:
        """The examples of a dataset version (None: the latest), in the order they were added."""

    @abstractmethod
    def create_experiment(self, experiment: NewExperiment) -> ExperimentView:
        """Store a new experiment (status ``running``); InputError when the name is taken."""

    @abstractmethod
    def link_experiment_runs(self, experiment: str, links: Sequence[ExperimentRunLink]) -> None:
        """Link runs to the experiment and their examples, in one transaction."""

    @abstractmethod
    def finish_experiment(self, experiment: str, status: str, summary: dict[str, Any]) -> None:
        """Set the experiment's status and what it counted."""

    @abstractmethod
    def experiments(self, *, dataset: str | None = None) -> list[ExperimentView]:
        """Experiments, oldest first (of one dataset, or all)."""

    @abstractmethod
    def experiment(self, name: str) -> ExperimentView:
        """One experiment; NotFoundError naming it when there is none."""

    @abstractmethod
    def experiment_runs(self, experiment: str) -> list[ExperimentRunLink]:
        """The runs of an experiment with their examples, in example order."""


class Store(RunStore, RecordStore, DecisionStore, OutcomeStore, NotificationStore, AnalyticsStore, DatasetStore):
    """Every role on one database: runs, step records, gate results, reviews, outcomes and attribution records."""

    url: str
    """The URL the store was opened with (credentials included; show :attr:`display_url`)."""

    @property
    def display_url(self) -> str:
        """The URL without credentials, for messages."""
        return self.url.split("@")[-1] if "@" in self.url else self.url

    @property
    def embedded(self) -> bool:
        """Whether the database lives in this process (SQLite: a file, or memory): a call costs tens of
        microseconds and waits on nothing but this host, less than handing it to a thread and back. A worker
        keeps such calls on its loop; a server's (a network round trip, a restart to wait out) leave it
        (``benchmarks/bench_off_loop.py`` measures both)."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def count_rows(self) -> dict[str, int]:
        """Row counts per table: how tests prove that bad input stored nothing."""
