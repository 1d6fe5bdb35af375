"""The attribution record every method produces, and how it is ranked and stored.

Sign convention, shared by all methods: a step's ``credit`` is its contribution to the outcome.
Negative credit is blame (the outcome would have been better without the step's behaviour),
positive credit is help. Candidates are ranked most blamed first: ascending credit, ties broken
by position in the workflow (earliest first). ``blamed_step`` is the first candidate when its
credit is negative, else ``None`` (nothing to blame).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.core.errors import InputError
from orchestrator.spec.records import iso
from orchestrator.store import NewAttribution
from orchestrator.store.base import OutcomeStore

METHODS = ("trace", "counterfactual", "shapley", "difference")
"""The attribution methods; all but ``trace`` replay the workflow and need an outcome evaluator."""

REPLAY_METHODS = ("counterfactual", "shapley", "difference")

BLAME_EPSILON = 1e-9


@dataclass
class Candidate:
    """One step (or, with ``--by agent``, one agent through its earliest step) and its credit."""

    step_id: str
    agent: str
    credit: float
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "agent": self.agent, "credit": round(self.credit, 6),
                "evidence": self.evidence}


@dataclass
class AttributionResult:
    """How one run's outcome was distributed over its steps and agents (a credit assignment log).

    ``to_json`` gives the ``trace``/``attribute`` JSON contract: ``{"run_id", "method",
    "blamed_step", "confidence", "candidates": [{"step_id", "agent", "credit", "evidence"}]}``
    plus ``agents``, ``params``, ``evidence`` and ``cost``.
    """

    run_id: str
    method: str
    params: dict[str, Any]
    candidates: list[Candidate]
    """Ranked most to least blamed."""
    agent_credits: dict[str, float]
    blamed_step: str | None
    confidence: float
    evidence: dict[str, Any]
    cost: int = 0
    """Step executions the method paid for (0 for ``trace``)."""
    outcome_id: int | None = None
    attribution_id: int | None = None
    created_at: float | None = None

    @property
    def blamed_agent(self) -> str | None:
        for c in self.candidates:
            if c.step_id == self.blamed_step:
                return c.agent
        return None

    def top(self, k: int) -> list[str]:
        """The ``k`` most blamed step ids."""
        return [c.step_id for c in self.candidates[:k]]

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "method": self.method, "blamed_step": self.blamed_step,
                "confidence": self.confidence, "candidates": [c.to_json() for c in self.candidates],
                "agents": {a: round(v, 6) for a, v in self.agent_credits.items()}, "params": self.params,
                "evidence": self.evidence, "cost": self.cost, "outcome_id": self.outcome_id,
                "attribution_id": self.attribution_id,
                "created_at": iso(self.created_at) if self.created_at is not None else None}


def rank(candidates: list[Candidate], order: list[str], units: Sequence[str] = ()) -> list[Candidate]:
    """Most blamed first: ascending credit, then earliest in the workflow (a loop's iterations by number, a
    map's instances by index); paths into child runs by their place in ``units`` (the candidates in workflow
    order), after the unit that starts them."""
    from orchestrator.spec.records import parse_unit, path_head

    position = {sid: i for i, sid in enumerate(order)}
    placed = {unit: i for i, unit in enumerate(units)}

    def key(c: Candidate) -> tuple[float, int, int, int, int]:
        step_id, index, iteration = parse_unit(path_head(c.step_id))
        return (round(c.credit, 9), position.get(step_id, len(position)), -1 if index is None else index,
                -1 if iteration is None else iteration, placed.get(c.step_id, -1))

    return sorted(candidates, key=key)


def blamed(candidates: list[Candidate]) -> str | None:
    if candidates and candidates[0].credit < -BLAME_EPSILON:
        return candidates[0].step_id
    return None


def blame_share(candidates: list[Candidate]) -> float:
    """The blamed candidate's share of all negative credit: 1.0 when one step explains the loss."""
    negative = [-c.credit for c in candidates if c.credit < -BLAME_EPSILON]
    if not negative:
        return 0.0
    return round(max(negative) / sum(negative), 4)


def agent_totals(candidates: list[Candidate]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for c in candidates:
        totals[c.agent] = totals.get(c.agent, 0.0) + c.credit
    return totals


def save(store: OutcomeStore, result: AttributionResult) -> int:
    """Store the result as an attribution record and remember its id on the result."""
    result.attribution_id = store.add_attribution(NewAttribution(
        result.run_id, method=result.method, params=result.params,
        step_credits=[c.to_json() for c in result.candidates],
        agent_credits={a: round(v, 6) for a, v in result.agent_credits.items()}, blamed_step=result.blamed_step,
        confidence=result.confidence, evidence=result.evidence, cost=result.cost, outcome_id=result.outcome_id))
    return result.attribution_id


def require_evaluator(workflow: BoundWorkflow) -> None:
    """Replay methods score replays with the workflow's evaluator; say how to add one."""
    if workflow.outcome is None:
        raise InputError(f"workflow {workflow.name!r} has no outcome evaluator; add `outcome: module:callable` "
                         "(counterfactual, shapley and difference score replays with it; `trace` works without)")
