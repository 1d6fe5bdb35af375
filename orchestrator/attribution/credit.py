"""Shapley and difference credit over steps or agents, valued by interventions on a stored run.

Players are the steps that can reach the output (``by="step"``) or their agents
(``by="agent"``). The value of a coalition is the evaluator's score of a replay in which the
members keep their own behaviour and every other player's steps are replaced by their
references; every step downstream is re-executed on the inputs it now receives, and recorded
outputs are reused only where a step's inputs are unchanged. A coalition whose replay a
side-effecting step blocks (changed inputs, no ``simulate``) has no value, so the whole result
names that step as the blocker instead of giving credit.
So ``v(all)`` is the actual outcome and ``v(none)`` the outcome with every step at its reference.

Shapley credits add up to ``v(all) - v(none)``; they are exact for up to 12 players and
estimated by permutation sampling above that (``samples`` orderings, 95% intervals in the
evidence). Difference credit is ``v(all) - v(all without the player)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from orchestrator.attribution import shapley as math_
from orchestrator.attribution.counterfactual import blocked_result
from orchestrator.attribution.replay import Plan, ReplayBlocked, ReplayEngine
from orchestrator.attribution.result import (
    AttributionResult,
    Candidate,
    blame_share,
    blamed,
    rank,
    require_evaluator,
)
from orchestrator.attribution.trace import agent_graph, iteration_of
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.core.errors import InputError
from orchestrator.store import Store

BY = ("step", "agent")


def _players(engine: ReplayEngine, by: str) -> tuple[list[str], dict[str, list[str]]]:
    """Players in workflow order and the steps each one controls."""
    if by not in BY:
        raise InputError(f"--by must be one of {list(BY)}; got {by!r}")
    if by == "step":  # a loop's iterations are players of their own (``improve#2``)
        return list(engine.candidates), {sid: [sid] for sid in engine.candidates}
    steps_of: dict[str, list[str]] = {}
    for sid in engine.candidates:
        steps_of.setdefault(engine.agent_of(sid), []).append(sid)
    return list(steps_of), steps_of


def coalition_value(engine: ReplayEngine,
                    steps_of: dict[str, list[str]]) -> Callable[[frozenset[Hashable]], float]:
    """v(S): members keep their behaviour, every other player's steps take their reference."""
    def value(coalition: frozenset[Hashable]) -> float:
        replaced = frozenset(sid for player, sids in steps_of.items() if player not in coalition for sid in sids)
        label = next(iter(replaced)) if len(replaced) == 1 else None
        evaluation = engine.evaluate(Plan(reference=replaced), kind="counterfactual", label=label)
        if evaluation.status == "blocked":  # no value exists for this coalition, so no credit can be computed
            assert evaluation.blocked_by is not None and evaluation.blocked_reason is not None
            raise ReplayBlocked(evaluation.blocked_by, evaluation.blocked_reason, evaluation.run_id)
        assert evaluation.value is not None, "callers run require_evaluator first, so every replay is scored"
        return evaluation.value
    return value


def _result(engine: ReplayEngine, run_id: str, method: str, by: str, estimate: math_.CreditEstimate,
            steps_of: dict[str, list[str]], params: dict[str, Any]) -> AttributionResult:
    candidates = []
    for player, sids in steps_of.items():
        credit = estimate.values[player]
        evidence: dict[str, Any] = {"credit": credit, "references": {s: engine.reference_kind(s) for s in sids}}
        if not estimate.exact:
            lo, hi = estimate.ci95(player)
            evidence.update(stderr=estimate.stderr[player], ci95=[lo, hi])
        if by == "agent":
            evidence["steps"] = sids
            agent = player
        else:
            agent = engine.agent_of(player)
        candidates.append(Candidate(sids[0], agent, credit, evidence))
    ranked = rank(candidates, engine.order, engine.candidates)
    blamed_id = blamed(ranked)
    confidence = blame_share(ranked)
    if blamed_id is not None and not estimate.exact and len(ranked) > 1:
        top, second = ranked[0].evidence["ci95"], ranked[1].evidence["ci95"]
        if top[1] >= second[0]:  # the intervals overlap: the ranking of the top two is not settled
            confidence = round(confidence * 0.5, 4)
    agents: dict[str, float] = {}
    for c in ranked:
        agents[c.agent] = agents.get(c.agent, 0.0) + c.credit
    who = "agent" if by == "agent" else "step"
    name = ranked[0].agent if by == "agent" and blamed_id else blamed_id
    explanation = (f"{who} {name!r} carries the most negative credit ({ranked[0].credit:+.3f})" if blamed_id
                   else "no player has negative credit: nothing to blame")
    evidence = {
        "explanation": explanation, "v_all": estimate.v_all, "v_none": estimate.v_none,
        "sum_of_credits": round(estimate.total, 9), "coalitions_evaluated": estimate.evaluations,
        "replays": list(engine.replay_runs), "executions_by_step": dict(engine.executions_by_step),
        "cache_hits": engine.cache.hits, "notes": engine.notes, "trace_id": run_id,
        "agent_graph": agent_graph(list(engine.latest.values())),
    }
    if by == "agent" and blamed_id:
        evidence["blamed_agent"] = ranked[0].agent
    if blamed_id is not None and (blamed_iteration := iteration_of(blamed_id)) is not None:
        evidence["blamed_iteration"] = blamed_iteration
    return AttributionResult(run_id, method, params, ranked, agents, blamed_id, confidence, evidence,
                             cost=engine.executions)


def _base_params(engine: ReplayEngine, by: str, players: list[str]) -> dict[str, Any]:
    return {"by": by, "players": len(players), "reference": "edit > baseline > resample",
            "replay_gates": "warn", "failure_value": engine.failure_value,
            "coalition": "members keep their behaviour; others take their reference; downstream re-executes"}


def shapley_attribution(store: Store, run_id: str, *, by: str = "step", samples: int | None = None,
                        seed: int | None = 0, workflow: BoundWorkflow | None = None, engine: ReplayEngine | None = None,
                        exact_limit: int = math_.EXACT_LIMIT) -> AttributionResult:
    """Shapley credit per step or agent; exact up to ``exact_limit`` players unless ``samples`` is given."""
    engine = engine or ReplayEngine(store, run_id, workflow=workflow)
    require_evaluator(engine.workflow)
    players, steps_of = _players(engine, by)
    if samples is not None and samples < 1:
        raise InputError(f"--samples must be at least 1; got {samples}")
    try:
        estimate = math_.shapley(players, coalition_value(engine, steps_of), samples=samples, seed=seed,
                                 exact_limit=exact_limit)
    except ReplayBlocked as blocked:
        return blocked_result(engine, run_id, "shapley", blocked.step_id, blocked.reason,
                              _base_params(engine, by, players), blocked.run_id)
    params = {**_base_params(engine, by, players), "exact": estimate.exact, "samples": estimate.samples,
              "seed": seed, "exact_limit": exact_limit}
    return _result(engine, run_id, "shapley", by, estimate, steps_of, params)


def difference_attribution(store: Store, run_id: str, *, by: str = "step", workflow: BoundWorkflow | None = None,
                           engine: ReplayEngine | None = None) -> AttributionResult:
    """Difference rewards per step or agent: what the outcome loses when the player alone is replaced."""
    engine = engine or ReplayEngine(store, run_id, workflow=workflow)
    require_evaluator(engine.workflow)
    players, steps_of = _players(engine, by)
    params = {**_base_params(engine, by, players), "credit": "v(all) - v(all without the player)"}
    try:
        estimate = math_.difference_rewards(players, coalition_value(engine, steps_of))
    except ReplayBlocked as blocked:
        return blocked_result(engine, run_id, "difference", blocked.step_id, blocked.reason, params, blocked.run_id)
    return _result(engine, run_id, "difference", by, estimate, steps_of, params)
