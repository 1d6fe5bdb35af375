"""The store contract for model calls: every call is a row, stored with its attempt or on its own."""

from __future__ import annotations

import pytest

from orchestrator.core.errors import LeaseLostError
from orchestrator.store import ModelCall, Store
from tests.store.rows import add_run, add_workflow, lease, paused_run, step


def call(purpose: str, tokens: int, *, gate: str | None = None, started: float = 10.0) -> ModelCall:
    return ModelCall(purpose=purpose, gate=gate, provider="openai", model="m", started_at=started,
                     ended_at=started + 0.5, input_tokens=tokens, output_tokens=tokens // 2, cost=0.001 * tokens,
                     messages=[{"role": "user", "content": "hi"}], response="answer")


def test_the_calls_of_an_attempt_are_stored_with_its_record_and_read_back_in_order(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    record_id = store.insert_step_record(step(run_id, wf, "a", attempt=2, model_calls=[
        call("step", 10), call("judge", 20, gate="llm_judge", started=11.0)]))
    calls = store.model_calls([run_id])
    assert [(c.purpose, c.gate, c.step_id, c.attempt, c.record_id, c.input_tokens, c.output_tokens)
            for c in calls] == [("step", None, "a", 2, record_id, 10, 5),
                                ("judge", "llm_judge", "a", 2, record_id, 20, 10)]
    assert calls[0].messages == [{"role": "user", "content": "hi"}]
    assert calls[0].response == "answer"
    assert calls[1].latency == pytest.approx(0.5)
    assert calls[1].cost == pytest.approx(0.02)


def test_calls_made_for_a_review_are_stored_against_the_paused_record(store: Store):
    run_id, _, paused = paused_run(store)
    store.add_model_calls(run_id, paused, [call("validation", 7, gate="llm_judge")])
    (only,) = store.model_calls([run_id])
    assert (only.purpose, only.step_id, only.record_id, only.gate) == ("validation", "b", paused, "llm_judge")


def test_a_record_refused_for_a_lost_lease_stores_none_of_its_calls(store: Store):
    wf = add_workflow(store)
    holder = lease("host:1")
    run_id = add_run(store, wf, lease=holder)
    stale = step(run_id, wf, "a", lease_token="not-the-token", model_calls=[call("step", 3)])
    with pytest.raises(LeaseLostError):
        store.insert_step_record(stale)
    assert store.model_calls([run_id]) == []


def test_a_workflows_calls_leave_out_replays_and_other_workflows(store: Store):
    wf = add_workflow(store)
    original = add_run(store, wf)
    replay = add_run(store, wf, kind="replay", parent_run_id=original)
    for run_id in (original, replay):
        store.insert_step_record(step(run_id, wf, "a", model_calls=[call("step", 4)]))
    assert [c.run_id for c in store.workflow_model_calls("wf")] == [original]
    assert store.workflow_model_calls("wf", since=11.0) == []
    assert store.workflow_model_calls("other") == []
