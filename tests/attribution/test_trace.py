"""Backward tracing: blame from recorded signals, earliest first, with an honest confidence."""

from __future__ import annotations

from orchestrator.attribution.trace import backward_trace, trace_run, workflow_structure
from orchestrator.service import review
from orchestrator.service.labels import label_run
from orchestrator.service.runner import continue_run


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


def _approved_critic_run(store, run_wf):
    """critic_paused: the critic finds fetch (7) and summarize (1007) inconsistent; ana approves it anyway."""
    run = run_wf("critic_paused")
    assert run.status == "paused"
    review.approve(store, run.run_id, step="check", reviewer="ana", comment="ship it")
    assert continue_run(store, run.run_id).status == "succeeded"
    return run.run_id


def test_an_approved_failing_critic_blames_the_earliest_verified_step_and_itself(store, run_wf):
    run_id = _approved_critic_run(store, run_wf)
    labelled = label_run(store, run_id, correct=False, reason="answer is 1007, not 7", reviewer="bob")
    assert labelled.blamed_step == "analyze"
    record = store.attributions(run_id)[-1]
    ranked = [c["step_id"] for c in record.step_credits]
    assert ranked[:2] == ["analyze", "check"]  # the verified step first, the overridden critic next
    (signal,) = record.step_credits[0]["evidence"]["signals"]
    assert signal["kind"] == "critic_overridden"
    assert "critic 'check' found 'analyze' inconsistent: 7 vs 1007" in signal["detail"]
    assert "approved by ana (ship it) despite it" in signal["detail"]
    (own,) = record.step_credits[1]["evidence"]["signals"]
    assert own["kind"] == "approved_despite_failing"
    assert "critic: 7 vs 1007" in own["detail"] and "implicates 'analyze'" in own["detail"]
    summarize = next(c for c in record.step_credits if c["step_id"] == "summarize")
    assert summarize["evidence"]["signals"] == []  # verified too, but downstream of the implicated step
    assert "unchecked" not in record.evidence["explanation"]
    assert record.evidence["coverage"]["unchecked"] == ["respond"]  # a critic's verdict checks the critic too
    assert record.confidence == 0.9


def test_a_critic_verdict_naming_a_step_implicates_that_step(store, run_wf):
    run_id = _approved_critic_run(store, run_wf)
    view = store.get_run(run_id)
    records = store.step_records(run_id)
    for rec in records:
        for gate in rec.gates:
            if gate.gate == "critic":
                gate.details["implicates"] = ["summarize"]
    result = backward_trace(workflow_structure(store, view), view, records, store.reviews(run_id),
                            store.outcomes(run_id)[-1] if store.outcomes(run_id) else None)
    assert result.blamed_step == "summarize"
    assert _signals(result, "analyze") == []


def test_every_attempt_of_a_critic_counts_a_retry_weakly_the_approval_strongly(store, run_wf):
    run = run_wf("critic_paused")
    review.retry(store, run.run_id, step="check", reviewer="ana")
    assert continue_run(store, run.run_id).status == "paused"  # the same inputs: the critic fails again
    review.approve(store, run.run_id, step="check", reviewer="ana")
    assert continue_run(store, run.run_id).status == "succeeded"
    result = label_run(store, run.run_id, correct=False, reviewer="bob")
    assert result.blamed_step == "analyze"
    trace = trace_run(store, run.run_id, store_result=False)
    assert _signals(trace, "analyze") == ["critic_retried", "critic_overridden"]
    assert _signals(trace, "check") == ["retried", "approved_despite_failing"]


def test_a_critic_that_passes_signals_nothing(store, run_wf):
    run = run_wf("critic_paused", offset=0)
    assert run.status == "succeeded"
    result = trace_run(store, run.run_id, store_result=False)
    assert result.blamed_step is None and _signals(result, "analyze") == [] and _signals(result, "check") == []


def test_show_keeps_the_failed_verdict_an_approval_overrode(store, run_wf, cli):
    run_id = _approved_critic_run(store, run_wf)
    doc = cli("show", run_id, "--json").json()
    check = next(s for s in doc["steps"] if s["step_id"] == "check")
    assert check["origin"] == "approved" and check["status"] == "succeeded"
    assert [(g["gate"], g["passed"], g["reason"]) for g in check["gates"]] == [("critic", False, "7 vs 1007")]
    assert [g["gate"] for g in check["overridden_gates"]] == ["critic"]
    assert check["override"]["decision"] == "approve" and check["override"]["phrase"] == "approved despite"
    assert check["override"]["review"]["reviewer"] == "ana" and check["override"]["review"]["comment"] == "ship it"
    paused = next(a for a in doc["attempts"] if a["step_id"] == "check" and a["status"] == "gate_failed")
    assert check["override"]["record_id"] == paused["record_id"]
    analyze = next(s for s in doc["steps"] if s["step_id"] == "analyze")
    assert analyze["overridden_gates"] == [] and analyze["override"] is None
    text = cli("show", run_id).stdout
    assert "approved despite: critic: 7 vs 1007" in text


def test_show_says_edited_after_for_an_edit_of_a_failing_step(store, run_wf, cli, tmp_path):
    run = run_wf("paused")
    fixed = tmp_path / "fixed.json"
    fixed.write_text('{"value": 7, "quality": 1.0}')
    assert cli("edit", run.run_id, "--output", str(fixed), "--reviewer", "ana").exit_code == 0
    doc = cli("show", run.run_id, "--json").json()
    analyze = next(s for s in doc["steps"] if s["step_id"] == "analyze")
    assert analyze["origin"] == "edited"
    assert [g["passed"] for g in analyze["gates"]] == [True]  # the edited output's own verdicts
    assert [g["gate"] for g in analyze["overridden_gates"]] == ["range"]
    assert analyze["override"]["phrase"] == "edited after"
    assert "edited after: range:" in cli("show", run.run_id).stdout
