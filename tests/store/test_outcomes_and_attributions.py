"""The store contract for outcomes and attribution records."""

from __future__ import annotations

import time

import pytest

from orchestrator.core.errors import NotFoundError
from orchestrator.store import NewAttribution, NewOutcome, NewRun, Store
from tests.store.rows import add_run, add_workflow


def attribution(run_id: str, method: str = "leave_one_out", **kwargs) -> NewAttribution:
    return NewAttribution(run_id=run_id, method=method, params=kwargs.pop("params", {"samples": 3}),
                          step_credits=[{"step_id": "b", "agent": "writer", "credit": 0.75, "evidence": ("x",)}],
                          agent_credits={"writer": 0.75, "reader": 0.25}, blamed_step="b", confidence=0.5,
                          evidence={"replays": [1, 2]}, **kwargs)


def test_an_outcome_reads_back_with_every_field(store: Store):
    run_id = add_run(store, add_workflow(store))
    before = time.time()
    oid = store.add_outcome(NewOutcome(run_id, 0.5, False, "human", "final", reason="wrong total", reviewer="ann"))
    [o] = store.outcomes(run_id)
    assert (o.id, o.run_id, o.value, o.correct, o.source, o.termination) == (oid, run_id, 0.5, False, "human",
                                                                              "final")
    assert (o.reason, o.reviewer) == ("wrong total", "ann")
    assert before <= o.created_at <= time.time()


def test_outcomes_belong_to_their_run_oldest_first(store: Store):
    wf = add_workflow(store)
    run_id, other = add_run(store, wf), add_run(store, wf)
    first = store.add_outcome(NewOutcome(run_id, 1, None, "test", "final"))
    store.add_outcome(NewOutcome(other, 0.0, False, "test", "final"))
    second = store.add_outcome(NewOutcome(run_id, 0.25, True, "judge", "timeout"))
    outcomes = store.outcomes(run_id)
    assert [o.id for o in outcomes] == [first, second] and first < second
    assert (outcomes[0].value, outcomes[0].correct, outcomes[0].reason, outcomes[0].reviewer) == (1.0, None, None,
                                                                                                  None)
    assert isinstance(outcomes[0].value, float)
    assert [o.value for o in store.outcomes(other)] == [0.0]
    assert store.outcomes(add_run(store, wf)) == []


def test_an_attribution_reads_back_with_every_field_decoded(store: Store):
    run_id = add_run(store, add_workflow(store))
    oid = store.add_outcome(NewOutcome(run_id, 0.0, False, "test", "final"))
    before = time.time()
    aid = store.add_attribution(attribution(run_id, cost=7, outcome_id=oid))
    [a] = store.attributions(run_id)
    assert (a.id, a.run_id, a.outcome_id, a.method) == (aid, run_id, oid, "leave_one_out")
    assert a.params == {"samples": 3}
    assert a.step_credits == [{"step_id": "b", "agent": "writer", "credit": 0.75, "evidence": ["x"]}]
    assert a.agent_credits == {"writer": 0.75, "reader": 0.25}
    assert (a.blamed_step, a.confidence, a.evidence, a.cost) == ("b", 0.5, {"replays": [1, 2]}, 7)
    assert before <= a.created_at <= time.time()


def test_an_attribution_without_outcome_blame_or_confidence(store: Store):
    run_id = add_run(store, add_workflow(store))
    store.add_attribution(NewAttribution(run_id, "none", {}, [], {}, None, None, {}))
    [a] = store.attributions(run_id)
    assert (a.outcome_id, a.blamed_step, a.confidence, a.cost) == (None, None, None, 0)
    assert (a.params, a.step_credits, a.agent_credits, a.evidence) == ({}, [], {}, {})


def test_attributions_filter_by_run_and_by_workflow_oldest_first(store: Store):
    wf, other = add_workflow(store), add_workflow(store, "other", "h2")
    one, two = add_run(store, wf), add_run(store, wf)
    elsewhere = add_run(store, other, "other")
    replay = add_run(store, wf, kind="replay", parent_run_id=one)
    a1 = store.add_attribution(attribution(one))
    a2 = store.add_attribution(attribution(elsewhere))
    a3 = store.add_attribution(attribution(two, method="shapley"))
    a4 = store.add_attribution(attribution(one, method="shapley"))
    a5 = store.add_attribution(attribution(replay))
    assert [a.id for a in store.attributions(one)] == [a1, a4]
    assert [(a.id, a.run_id) for a in store.attributions(workflow="wf")] == [(a1, one), (a3, two), (a4, one),
                                                                              (a5, replay)]
    assert [a.id for a in store.attributions(workflow="other")] == [a2]
    assert [a.id for a in store.attributions(two, workflow="wf")] == [a3]
    assert store.attributions(two, workflow="other") == []
    assert [a.id for a in store.attributions()] == [a1, a2, a3, a4, a5]
    assert store.attributions(workflow="unknown") == []


def test_a_returned_attribution_view_is_a_copy(store: Store):
    run_id = add_run(store, add_workflow(store))
    store.add_attribution(attribution(run_id))
    a = store.attributions(run_id)[0]
    a.params["samples"] = 99
    a.step_credits.clear()
    again = store.attributions(run_id)[0]
    assert (again.params, len(again.step_credits)) == ({"samples": 3}, 1)


def test_a_store_refuses_references_to_rows_it_does_not_hold(store: Store):
    """A run of a workflow never registered, an attribution of an outcome never stored: the foreign keys
    refuse them, said as what is missing, and nothing is stored."""
    run_id = add_run(store, add_workflow(store))
    with pytest.raises(NotFoundError, match="workflow definition 99 is not stored"):
        store.create_run(NewRun(99, "wf", {}))
    with pytest.raises(NotFoundError, match="outcome 7 is not stored"):
        store.add_attribution(NewAttribution(run_id, "m", {}, [], {}, None, None, {}, outcome_id=7))
    assert (store.count_rows()["runs"], store.count_rows()["attributions"]) == (1, 0)
