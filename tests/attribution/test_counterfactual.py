"""Counterfactual replay: credit a step with the outcome change its reference would have caused."""

from __future__ import annotations

import pytest

from orchestrator.attribution.counterfactual import counterfactual
from orchestrator.attribution.methods import attribute
from orchestrator.core.errors import InputError
from orchestrator.service import review
from orchestrator.service.runner import continue_run
from tests.attribution.conftest import snapshot
from tests.conftest import calls


def _credits(result):
    return {c.step_id: round(c.credit, 6) for c in result.candidates}


def test_propagated_error_is_credited_to_the_faulty_step_alone(store, run_wf):
    run = run_wf("propagated", offset=1000)
    result = counterfactual(store, run.run_id)
    assert result.blamed_step == "analyze"
    assert _credits(result) == {"analyze": -1.0, "fetch": 0.0, "summarize": 0.0, "respond": 0.0}
    assert result.candidates[0].evidence["reference"] == "baseline"
    assert result.candidates[0].evidence["value_with_reference"] == 1.0
    assert result.confidence == 1.0
    assert result.agent_credits == {"analyst": -1.0, "retriever": 0.0, "writer": 0.0}


def test_each_candidate_replay_is_a_separate_run_linked_to_the_original(store, run_wf):
    run = run_wf("propagated", offset=1000)
    result = counterfactual(store, run.run_id)
    children = store.child_runs(run.run_id)
    assert sorted(c.parent_step for c in children) == sorted(["analyze", "fetch", "summarize", "respond"])
    assert {c.kind for c in children} == {"counterfactual"}
    replay = next(c for c in children if c.parent_step == "analyze")
    assert replay.run_id == result.candidates[0].evidence["replay_run_id"]
    origins = {r.step_id: r.origin for r in store.step_records(replay.run_id)}
    assert origins == {"fetch": "reused", "analyze": "baseline", "summarize": "executed", "respond": "executed"}
    assert replay.output == {"answer": 7, "expected": 7, "quality": 1.0}


def test_counterfactual_leaves_the_original_run_untouched(store, run_wf):
    run = run_wf("propagated", offset=1000)
    before = snapshot(store, run.run_id)
    attribute(store, run.run_id, "counterfactual")
    assert snapshot(store, run.run_id) == before
    assert [a.method for a in store.attributions(run.run_id)] == ["trace", "counterfactual"]


def test_a_step_that_compensated_an_earlier_error_gets_positive_credit(store, run_wf):
    run = run_wf("compensated")
    assert store.outcomes(run.run_id)[0].value == pytest.approx(0.7)
    result = counterfactual(store, run.run_id)
    credits = _credits(result)
    assert result.blamed_step == "analyze"
    assert credits["analyze"] == pytest.approx(-0.3)  # fixing it would have given 1.0 instead of 0.7
    assert credits["patch"] == pytest.approx(0.7)  # without the lucky patch the answer is wrong
    assert [c.step_id for c in result.candidates][-1] == "patch"


def test_side_effecting_steps_are_never_executed_again_in_replays(store, run_wf, step_log):
    run = run_wf("side_effects")
    assert calls(step_log).count("notify") == 1
    result = counterfactual(store, run.run_id)
    assert calls(step_log).count("notify") == 1
    # replacing analyze changes send's inputs and send has no simulate: that replay is blocked
    analyze = next(c for c in result.candidates if c.step_id == "analyze")
    assert analyze.evidence["blocked_by"] == "send" and analyze.credit == 0.0
    # the other replays reach send with its original inputs, so they reuse its record
    fetch = next(c for c in result.candidates if c.step_id == "fetch")
    send = next(r for r in store.step_records(fetch.evidence["replay_run_id"]) if r.step_id == "send")
    assert send.origin == "reused"


def test_a_reviewers_edit_is_the_reference_of_the_step_it_replaced(store, run_wf):
    run = run_wf("paused")
    review.edit(store, run.run_id, {"value": 7, "quality": 1.0}, reviewer="ana")
    assert continue_run(store, run.run_id).status == "succeeded"
    result = counterfactual(store, run.run_id)
    analyze = next(c for c in result.candidates if c.step_id == "analyze")
    assert analyze.evidence["reference"] == "edit"
    replay = analyze.evidence["replay_run_id"]
    assert {r.step_id: r.origin for r in store.step_records(replay)}["analyze"] == "edited"
    assert result.blamed_step is None  # the edit fixed it: the outcome is correct


def test_steps_without_baseline_are_compared_with_a_fresh_execution(store, run_wf, step_log):
    run = run_wf("propagated", offset=1000)
    result = counterfactual(store, run.run_id)
    assert {c.step_id: c.evidence["reference"] for c in result.candidates}["summarize"] == "resample"
    # summarize ran once in the run, once on the corrected input, once as its own resample
    assert calls(step_log).count("carry") == 3
    assert result.cost == 6


def test_a_paused_run_is_replayed_to_the_end_with_gates_in_warn_mode(store, run_wf):
    run = run_wf("paused")
    assert run.status == "paused"
    result = attribute(store, run.run_id, "counterfactual")
    assert result.blamed_step == "analyze"
    actual_run = result.evidence["actual_run_id"]
    assert store.get_run(actual_run).status == "succeeded"
    assert store.get_run(run.run_id).status == "paused"
    gated = next(r for r in store.step_records(actual_run) if r.step_id == "analyze")
    assert gated.status == "succeeded" and gated.gates[0].passed is False  # the gate ran and was recorded


def test_workflow_without_an_evaluator_is_refused_before_anything_is_stored(store, run_wf):
    run = run_wf("no_evaluator")
    before = store.count_rows()
    with pytest.raises(InputError, match="workflow 'no-evaluator' has no outcome evaluator; "
                                         "add `outcome: module:callable`"):
        attribute(store, run.run_id, "counterfactual")
    assert store.count_rows() == before


def test_replays_are_scored_but_never_traced_automatically(store, run_wf):
    run = run_wf("propagated", offset=1000)
    counterfactual(store, run.run_id)
    children = store.child_runs(run.run_id)
    incorrect = [c for c in children if store.outcomes(c.run_id) and not store.outcomes(c.run_id)[0].correct]
    assert incorrect  # most replays still fail: only the analyze replay fixes the answer
    assert all(store.attributions(c.run_id) == [] for c in children)
