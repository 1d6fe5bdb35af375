"""Backward tracing: blame from recorded signals, earliest first, with an honest confidence."""

from __future__ import annotations

from orchestrator import review
from orchestrator.attribution.trace import backward_trace, trace_run, workflow_structure
from orchestrator.labels import label_run
from orchestrator.runner import continue_run


def _signals(result, step_id):
    return [s["kind"] for c in result.candidates if c.step_id == step_id for s in c.evidence["signals"]]


def test_propagated_error_blames_the_earliest_failing_step_not_the_steps_that_carried_it(store, run_wf):
    run = run_wf("propagated", offset=1000)
    result = trace_run(store, run.run_id)
    assert result.blamed_step == "analyze"
    assert [c.step_id for c in result.candidates][:2] == ["analyze", "summarize"]
    assert _signals(result, "analyze") == ["gate_warning"]
    assert result.candidates[0].credit < result.candidates[1].credit < 0
    assert result.confidence == 0.7  # a warning-tier signal, and its only upstream step (fetch) is gated
    assert "1 of 1 steps upstream" in result.evidence["explanation"]
    assert result.cost == 0


def test_incorrect_evaluator_score_stores_a_trace_at_once(store, run_wf):
    run = run_wf("propagated", offset=1000)
    (outcome,) = store.outcomes(run.run_id)
    assert outcome.correct is False and outcome.source == "evaluator"
    (record,) = store.attributions(run.run_id)
    assert record.method == "trace" and record.blamed_step == "analyze"
    assert record.outcome_id == outcome.id


def test_correct_evaluator_score_stores_no_trace(store, run_wf):
    run = run_wf("propagated", offset=0)
    assert store.outcomes(run.run_id)[0].correct is True
    assert store.attributions(run.run_id) == []


def test_approved_despite_failing_is_strong_evidence_and_unchecked_upstream_lowers_confidence(store, run_wf):
    run = run_wf("paused")
    assert run.status == "paused"
    review.approve(store, run.run_id, reviewer="ana", comment="looks fine to me")
    assert continue_run(store, run.run_id).status == "succeeded"
    (record,) = store.attributions(run.run_id)  # the evaluator scored 0: traced at once
    assert record.blamed_step == "analyze"
    top = record.step_credits[0]
    assert top["evidence"]["signals"][0]["kind"] == "approved_despite_failing"
    assert "approved by ana (looks fine to me)" in top["evidence"]["signals"][0]["detail"]
    # strong signal (0.9) halved towards 0.5 because fetch, upstream of analyze, has no gate
    assert record.confidence == 0.45
    assert "unchecked: fetch" in record.evidence["explanation"]


def test_failing_critic_blames_the_step_it_verifies_not_itself(store, run_wf):
    run = run_wf("critic")
    result = trace_run(store, run.run_id)
    assert result.blamed_step == "analyze"
    assert _signals(result, "analyze") == ["critic_failed"]
    assert "check" not in [c.step_id for c in result.candidates]  # the critic does not feed the output


def test_a_failed_run_is_traced_to_the_step_that_raised(store, run_wf):
    run = run_wf("failing")
    assert run.status == "failed"
    result = trace_run(store, run.run_id)
    assert result.blamed_step == "call_vendor"
    assert _signals(result, "call_vendor") == ["error"]
    assert "garbage" in result.candidates[0].evidence["signals"][0]["detail"]


def test_without_any_signal_nothing_is_blamed_and_confidence_is_zero(store, run_wf):
    run = run_wf("compensated")  # no gates anywhere
    result = trace_run(store, run.run_id)
    assert result.blamed_step is None and result.confidence == 0.0
    assert "0 of 5 are checked" in result.evidence["explanation"]
    assert all(c.credit == 0 for c in result.candidates)


def test_incorrect_human_label_traces_and_links_the_record_to_the_label(store, run_wf):
    run = run_wf("propagated", offset=1000)
    labelled = label_run(store, run.run_id, correct=False, reason="total is off", reviewer="ana")
    assert labelled.blamed_step == "analyze" and labelled.confidence == 0.7
    record = store.attributions(run.run_id)[-1]
    assert record.id == labelled.attribution_id and record.outcome_id == labelled.outcome_id
    assert record.evidence["outcome"]["source"] == "human"
    assert record.evidence["outcome"]["termination"] == "goal_achieved"


def test_backward_trace_is_a_pure_function_of_stored_views(store, run_wf):
    run = run_wf("propagated", offset=1000)
    view = store.get_run(run.run_id)
    before = store.count_rows()
    result = backward_trace(workflow_structure(store, view), view, store.step_records(run.run_id),
                            store.reviews(run.run_id), store.outcomes(run.run_id)[-1])
    assert result.blamed_step == "analyze"
    assert store.count_rows() == before
