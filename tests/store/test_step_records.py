"""The store contract for step records, their gate verdicts and the history ``stats`` reads."""

from __future__ import annotations

import json

from orchestrator.store import GateRow, NewStepRecord, Store
from tests.store.rows import add_run, add_workflow, gate, step


def test_a_step_record_reads_back_with_every_field_decoded(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    src = store.insert_step_record(step(run_id, wf, "a"))
    record_id = store.insert_step_record(NewStepRecord(
        run_id=run_id, workflow_id=wf, step_id="b", step_type="llm", agent="writer", attempt=2, status="failed",
        started_at=10.25, ended_at=12.5, inputs=json.dumps({"text": {"$record": src}, "n": 3}),
        output=json.dumps({"summary": "s", "scores": [0.5, 1]}), error_type="GateFailed",
        error_message="too short", consumed=json.dumps([[src, "a", 0.75]]),
        injected=json.dumps([{"step": "c", "needs": "a list"}]), origin="edited"))
    [record] = [r for r in store.step_records(run_id) if r.id == record_id]
    assert record.id == record_id and record.run_id == run_id
    assert (record.step_id, record.step_type, record.agent, record.attempt) == ("b", "llm", "writer", 2)
    assert (record.status, record.origin) == ("failed", "edited")
    assert (record.started_at, record.ended_at, record.duration) == (10.25, 12.5, 2.25)
    assert record.inputs == {"text": {"$record": src}, "n": 3}
    assert record.output == {"summary": "s", "scores": [0.5, 1]}
    assert (record.error_type, record.error_message, record.error) == ("GateFailed", "too short",
                                                                       "GateFailed: too short")
    assert record.consumed == [{"record_id": src, "step_id": "a", "delay": 0.75}]
    assert record.injected == [{"step": "c", "needs": "a list"}]
    assert record.gates == []


def test_absent_json_columns_read_back_as_their_empty_values(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(NewStepRecord(run_id=run_id, workflow_id=wf, step_id="a", step_type="python",
                                           agent="a", attempt=1, status="running", started_at=1.0, ended_at=1.0))
    [record] = store.step_records(run_id)
    assert (record.inputs, record.output, record.error_type, record.error_message) == (None, None, None, None)
    assert (record.consumed, record.injected, record.gates, record.origin) == ([], [], [], "executed")


def test_json_null_output_reads_back_as_none(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "a", output=None))
    assert store.step_records(run_id)[0].output is None


def test_gate_verdicts_are_stored_with_their_record_in_order(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    gates = [gate("not_empty"),
             GateRow(gate="critic", passed=False, score=None, reason="vague", details=json.dumps({"hits": [1, 2]}),
                     severity="warn", duration=0.125),
             gate("regex", details={"pattern": "^a"})]
    record_id = store.insert_step_record(step(run_id, wf, "a", gates=gates))
    [record] = store.step_records(run_id)
    assert [g.gate for g in record.gates] == ["not_empty", "critic", "regex"]
    first, critic, regex = record.gates
    assert (first.passed, first.score, first.reason, first.details, first.severity, first.duration) == \
        (True, 1.0, "ok", {}, "block", 0.0)
    assert (critic.passed, critic.score, critic.reason, critic.severity, critic.duration) == \
        (False, None, "vague", "warn", 0.125)
    assert critic.details == {"hits": [1, 2]}
    assert regex.details == {"pattern": "^a"}
    assert {g.record_id for g in record.gates} == {record_id}
    assert [g.gate for g in record.failed_gates] == ["critic"]
    assert store.count_rows()["gate_results"] == 3


def test_records_come_back_in_insertion_order_with_increasing_ids(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    ids = [store.insert_step_record(step(run_id, wf, s, started_at=t)) for s, t in
           (("b", 5.0), ("a", 1.0), ("b", 3.0))]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [(r.id, r.step_id) for r in store.step_records(run_id)] == list(zip(ids, ["b", "a", "b"], strict=True))


def test_records_and_gates_belong_to_their_run_only(store: Store):
    wf = add_workflow(store)
    one, two = add_run(store, wf), add_run(store, wf)
    store.insert_step_record(step(one, wf, "a", gates=[gate()]))
    store.insert_step_record(step(two, wf, "a", gates=[gate(passed=False)]))
    assert [r.run_id for r in store.step_records(one)] == [one]
    assert [g.passed for r in store.step_records(two) for g in r.gates] == [False]
    assert store.step_records(add_run(store, wf)) == []


def test_latest_only_keeps_the_last_record_of_each_step_in_first_appearance_order(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    a1 = store.insert_step_record(step(run_id, wf, "a", status="failed", gates=[gate(passed=False)]))
    b1 = store.insert_step_record(step(run_id, wf, "b"))
    a2 = store.insert_step_record(step(run_id, wf, "a", attempt=2, gates=[gate()]))
    c1 = store.insert_step_record(step(run_id, wf, "c"))
    latest = store.step_records(run_id, latest_only=True)
    assert [(r.step_id, r.id) for r in latest] == [("a", a2), ("b", b1), ("c", c1)]
    assert [g.passed for g in latest[0].gates] == [True]
    assert a1 not in {r.id for r in latest}
    assert {k: v.id for k, v in store.latest_records(run_id).items()} == {"a": a2, "b": b1, "c": c1}


def test_a_returned_record_view_is_a_copy(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "a", output={"items": [1]}, gates=[gate(details={"k": [1]})]))
    record = store.step_records(run_id)[0]
    record.output["items"].append(2)
    record.gates[0].details["k"].append(2)
    record.gates.clear()
    again = store.step_records(run_id)[0]
    assert again.output == {"items": [1]}
    assert [g.details for g in again.gates] == [{"k": [1]}]


def test_step_history_lists_records_of_original_runs_of_a_workflow_oldest_first(store: Store):
    wf, other = add_workflow(store), add_workflow(store, "other", "h2")
    first, second = add_run(store, wf), add_run(store, wf)
    replay = add_run(store, wf, kind="replay", parent_run_id=first)
    elsewhere = add_run(store, other, "other")
    r1 = store.insert_step_record(step(first, wf, "a", started_at=10.0, inputs=json.dumps({"x": 1})))
    store.insert_step_record(step(replay, wf, "a", started_at=11.0))
    store.insert_step_record(step(elsewhere, other, "a", started_at=12.0))
    r2 = store.insert_step_record(step(second, wf, "b", started_at=13.0, attempt=2, status="failed"))
    r3 = store.insert_step_record(step(first, wf, "b", started_at=14.0, agent="writer"))
    history = store.step_history("wf")
    assert [(h.record_id, h.run_id, h.step_id) for h in history] == [(r1, first, "a"), (r2, second, "b"),
                                                                      (r3, first, "b")]
    h1, h2, h3 = history
    assert (h1.agent, h1.status, h1.started_at, h1.attempt) == ("agent-a", "succeeded", 10.0, 1)
    assert (h2.status, h2.attempt, h3.agent) == ("failed", 2, "writer")
    assert (h1.inputs, h1.output) == ('{"x": 1}', '"out"')  # raw JSON text, as stored
    assert h2.inputs is None


def test_step_history_since_keeps_records_started_at_or_after_it(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    for t in (1.0, 2.0, 3.0):
        store.insert_step_record(step(run_id, wf, "a", started_at=t))
    assert [h.started_at for h in store.step_history("wf", since=2.0)] == [2.0, 3.0]
    assert store.step_history("wf", since=9.0) == []
    assert store.step_history("unknown") == []


def test_step_history_says_whether_all_gates_of_a_record_passed(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "none"))
    store.insert_step_record(step(run_id, wf, "pass", gates=[gate(), gate("regex")]))
    store.insert_step_record(step(run_id, wf, "mixed", gates=[gate(), gate("regex", passed=False)]))
    assert [(h.step_id, h.gates_passed) for h in store.step_history("wf")] == [
        ("none", None), ("pass", True), ("mixed", False)]


def test_llm_records_gives_the_model_calls_of_executed_attempts_by_run(store: Store):
    wf = add_workflow(store)
    with_calls, without = add_run(store, wf), add_run(store, wf)
    record = step(with_calls, wf, "a")
    record.llm = json.dumps({"calls": 1, "usage": {"input_tokens": 3, "output_tokens": 2}})
    store.insert_step_record(record)
    approved = step(with_calls, wf, "a", origin="approved")
    approved.llm = record.llm  # an approved copy carries the record but made no call
    store.insert_step_record(approved)
    store.insert_step_record(step(without, wf, "a"))
    assert store.llm_records([with_calls, without, "r-unknown"]) == {
        with_calls: [{"calls": 1, "usage": {"input_tokens": 3, "output_tokens": 2}}]}
