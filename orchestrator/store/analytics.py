"""Aggregated rows for ``stats``, ``report`` and the dashboard: what the store counts, not what it stores.

The analytics read methods of :class:`~orchestrator.store.base.Store` return these rows. Their
number grows with the steps and periods shown (and, for a few, with the distinct reward
values, attribution methods or run states), never with the number of runs: the stores read
them from a summary per step and UTC day that each read brings up to date
(:mod:`orchestrator.store.sql_summary`, read by :mod:`orchestrator.store.sql_analytics`).

Rules every implementation follows (the contract tests in ``tests/store/`` hold them to it):

- Only runs of kind ``run`` or ``child`` of the named workflow count (:data:`PRODUCTION_KINDS`): a workflow's
  runs started alone and those a parent's ``workflow:`` step started; replays and forks are not production
  traffic.
- **A run's start** is the earliest start of its step records, or its creation time when it has
  none. A run belongs to the period holding its start; ``since`` keeps runs starting at or after it.
- **Periods** are UTC days, or ISO weeks starting Monday 00:00 UTC; see :func:`period_start`.
- **A step's gate verdict in a run** is that of its first gated attempt (all gates passed or not).
- **An incorrect outcome** is a run whose latest outcome has ``correct`` false. **Whom it blames**:
  the run's *explaining* attribution record (:func:`attribution_rank`: the most informative method,
  the newest record within it), the same record the review screen's header and trace panel show; no
  record, or one that blamed no step, is *unattributed* (``blamed_step`` None). The counts say
  which method each blame came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PRODUCTION_KINDS = ("run", "child")
"""The kinds of run that are a workflow's traffic: started alone, or as a child run of a parent's step."""

PRODUCTION_SQL = "('run', 'child')"
""":data:`PRODUCTION_KINDS` as an SQL list, for ``kind IN ...``."""

PERIOD_SECONDS = {"day": 86400, "week": 7 * 86400}
PERIOD_OFFSET = {"day": 0, "week": 3 * 86400}
"""The epoch (1970-01-01) was a Thursday: shifting by three days makes week buckets start on Mondays."""


def period_start(ts: float, period: str) -> float:
    """Epoch seconds of the start of the UTC day or ISO week holding ``ts``."""
    size, offset = PERIOD_SECONDS[period], PERIOD_OFFSET[period]
    return float(math.floor((ts + offset) / size) * size - offset)


@dataclass(frozen=True, slots=True)
class ModelCallGroup:
    """A workflow's model calls of one step, purpose, gate and UTC day, added up: what ``stats`` shows of them."""

    step_id: str
    purpose: str
    gate: str | None
    day_start: float
    """The UTC midnight starting the day."""
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float
    """The summed price of the answered calls (failed calls are not charged)."""
    unpriced: int
    """Answered calls whose price is unknown: a total holding one has no known cost."""


@dataclass(frozen=True, slots=True)
class StepPeriodCounts:
    """One step in one period: what its records in the period's runs add up to."""

    step_id: str
    period_start: float
    agent: str
    """The step's agent as its records name it (the smallest, when they disagree)."""
    first_record: int
    """The id of the step's earliest record among them: steps unknown to the definition are listed in this order."""
    runs: int
    """Runs with at least one record of the step."""
    gated_runs: int
    """Runs in which an attempt of the step was checked by gates; for a mapped step, instances (each
    instance of each run is judged on its own)."""
    gate_passes: int
    """Of those, the ones whose first gated attempt passed all its gates."""
    attempts: int
    """Records of the step (every attempt, skipped ones included)."""
    failures: int
    """Records with status ``failed``."""
    gate_failures: int
    """Records with status ``gate_failed``."""
    retries: int
    """Records of attempt 2 or later."""
    model_records: int = 0
    """Executed LLM attempts (copies a review or replay made are not counted)."""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    priced_records: int = 0
    """Of the LLM attempts, those with a known cost."""
    cost: float = 0.0
    skipped_runs: int = 0
    """Runs in which the step's ``when`` (or a skipped upstream step) kept it from running: with ``runs``,
    the route distribution of a conditional step."""
    """USD summed over the priced LLM attempts."""


METHOD_PREFERENCE: dict[str, int] = {"counterfactual": 0, "shapley": 0, "difference": 1, "trace": 2}
"""Lower is more informative. Counterfactual and Shapley replay the run and measure each step's effect
on the outcome; difference credit is Shapley's cheaper approximation; a trace only reads the recorded
signals. Methods not listed rank after trace."""

BY_AGENT_RANK = 1
"""A record that credits agents names only that agent's first step as blamed: never above rank 1."""


def attribution_rank(method: str, by_agent: bool) -> int:
    """The rank of one attribution record under the one rule every face uses (lower explains better);
    among records of equal rank the newest (highest id) wins."""
    rank = METHOD_PREFERENCE.get(method, len(METHOD_PREFERENCE))
    return max(rank, BY_AGENT_RANK) if by_agent else rank


@dataclass(frozen=True, slots=True)
class OutcomeCounts:
    """Runs of one period with one outcome state: incorrect (with whom it blames) or not."""

    period_start: float
    incorrect: bool
    blamed_step: str | None
    """For incorrect runs: the step the chosen attribution record blamed; None when unattributed."""
    runs: int
    method: str | None = None
    """For incorrect runs: the method of the explaining attribution record; None without one."""


@dataclass(frozen=True, slots=True)
class TrajectoryCounts:
    """How many runs executed ``steps`` distinct steps in ``attempts`` attempts (skipped records left out)."""

    steps: int
    attempts: int
    runs: int


@dataclass(frozen=True, slots=True)
class OutcomeSummary:
    """The latest outcome of each production run, summed up."""

    scored: int = 0
    """Runs with an outcome."""
    correct: int = 0
    nonzero: int = 0
    """Runs whose latest reward is above zero."""
    values: dict[float, int] = field(default_factory=dict)
    """Latest reward -> number of runs (as many entries as distinct rewards)."""
    by_source: dict[str, int] = field(default_factory=dict)
    by_termination: dict[str, int] = field(default_factory=dict)
    early_mean: float | None = None
    """Mean reward of the first ``window`` scored runs, in creation order."""
    recent_mean: float | None = None
    """Mean reward of the last ``window`` scored runs."""


@dataclass(frozen=True, slots=True)
class RunCounts:
    """Runs of one workflow version, kind and shown status (``interrupted`` for lapsed leases)."""

    workflow: str
    workflow_id: int
    kind: str
    status: str
    runs: int


@dataclass(frozen=True, slots=True)
class AttributionCounts:
    """Attribution records of one method and parameter set."""

    method: str
    params: str
    """The parameters as stored (JSON text)."""
    records: int
    cost: int
    """Step executions their replays spent."""


@dataclass(frozen=True, slots=True)
class NondeterminismCounts:
    """One step: of the inputs seen in two or more runs, how many gave different outputs.

    Each run contributes its step's first attempt that produced an output (succeeded or
    gate_failed), compared through the digests written with it (:mod:`orchestrator.store.digests`).
    """

    step_id: str
    first_record: int
    repeated_inputs: int
    varied: int
    not_covered: int
    """Attempts left out because they have no inputs digest (written before digests were stored)."""
