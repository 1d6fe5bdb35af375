"""The store contract for review decisions: one decision per paused record, all or nothing."""

from __future__ import annotations

import time

import pytest

from orchestrator.core.errors import ReviewError
from orchestrator.store import NewDecision, Store
from tests.store.rows import gate, lease, paused_run, review, step


def test_decide_stores_the_review_its_new_records_and_the_run_status_in_one_go(store: Store):
    run_id, wf, paused = paused_run(store)
    before = time.time()
    review_id = store.decide(review(run_id, paused, decision="edit", output_before="out",
                                    output_after={"text": "fixed", "tags": ("a",)}),
                             new_records=[step(run_id, wf, "b", attempt=2, origin="edited", output="fixed",
                                               gates=[gate(details={"edited": True})])])
    assert isinstance(review_id, int)
    assert store.get_run(run_id).status == "running"
    [stored] = store.reviews(run_id)
    assert stored.id == review_id and stored.run_id == run_id and stored.record_id == paused
    assert (stored.step_id, stored.decision, stored.reviewer, stored.comment) == ("b", "edit", "ann", "looks right")
    assert (stored.output_before, stored.output_after) == ("out", {"text": "fixed", "tags": ["a"]})
    assert stored.forced is False and before <= stored.created_at <= time.time()
    latest = store.latest_records(run_id)["b"]
    assert (latest.attempt, latest.origin, latest.output) == (2, "edited", "fixed")
    assert [(g.gate, g.passed, g.details, g.record_id) for g in latest.gates] == [
        ("not_empty", True, {"edited": True}, latest.id)]


def test_decide_moves_the_run_to_the_status_given(store: Store):
    run_id, _, paused = paused_run(store)
    store.decide(review(run_id, paused, decision="reject"), run_status="failed")
    assert store.get_run(run_id).status == "failed"


def test_a_decision_without_new_records_stores_only_the_review(store: Store):
    run_id, _, paused = paused_run(store)
    before = store.count_rows()
    store.decide(review(run_id, paused, comment=None, forced=True))
    after = store.count_rows()
    assert after == {**before, "reviews": before["reviews"] + 1}
    [stored] = store.reviews(run_id)
    assert (stored.comment, stored.forced, stored.output_after) == (None, True, None)


def test_decide_twice_on_one_pause_stores_one_review(store: Store):
    run_id, wf, paused = paused_run(store)
    store.decide(review(run_id, paused, reviewer="ann"), new_records=[step(run_id, wf, "b", attempt=2)])
    assert store.set_run_status(run_id, "paused")  # even when the run pauses again
    before = store.count_rows()
    with pytest.raises(ReviewError, match=rf"step 'b' of run {run_id} was already decided by another reviewer"):
        store.decide(review(run_id, paused, reviewer="bob"), new_records=[step(run_id, wf, "b", attempt=3)])
    assert store.count_rows() == before
    assert [r.reviewer for r in store.reviews(run_id)] == ["ann"]
    assert store.get_run(run_id).status == "paused"
    assert store.latest_records(run_id)["b"].attempt == 2


def test_a_decision_on_a_run_that_is_not_paused_stores_nothing(store: Store):
    run_id, wf, paused = paused_run(store)
    store.set_run_status(run_id, "running")
    before = store.count_rows()
    with pytest.raises(ReviewError, match=rf"run {run_id} is no longer paused"):
        store.decide(review(run_id, paused), new_records=[step(run_id, wf, "b", attempt=2)], run_status="failed")
    assert store.count_rows() == before
    assert store.reviews(run_id) == []
    assert store.get_run(run_id).status == "running"
    # the refused decision left the record undecided: once the run is paused again it can be decided
    store.set_run_status(run_id, "paused")
    store.decide(review(run_id, paused))
    assert len(store.reviews(run_id)) == 1


def test_a_decision_on_a_record_that_is_not_stored_is_refused_and_stores_nothing(store: Store):
    run_id, wf, paused = paused_run(store)
    before = store.count_rows()
    with pytest.raises(ReviewError):
        store.decide(review(run_id, paused + 1000), new_records=[step(run_id, wf, "b", attempt=2)])
    assert store.count_rows() == before
    assert store.get_run(run_id).status == "paused"


def test_each_paused_record_takes_its_own_decision(store: Store):
    run_id, wf, paused = paused_run(store)
    store.decide(review(run_id, paused), new_records=[step(run_id, wf, "b", attempt=2, status="paused")],
                 run_status="paused")
    second = store.latest_records(run_id)["b"].id
    store.decide(review(run_id, second, decision="reject"), run_status="failed")
    assert [(r.record_id, r.decision) for r in store.reviews(run_id)] == [(paused, "approve"), (second, "reject")]
    assert store.get_run(run_id).status == "failed"


def test_reviews_belong_to_their_run_oldest_first(store: Store):
    run_id, _, paused = paused_run(store)
    other, _, other_paused = paused_run(store)
    store.decide(review(other, other_paused, reviewer="bob"))
    store.decide(review(run_id, paused, reviewer="ann"))
    assert [r.reviewer for r in store.reviews(run_id)] == ["ann"]
    assert [r.reviewer for r in store.reviews(other)] == ["bob"]
    ids = [store.reviews(other)[0].id, store.reviews(run_id)[0].id]
    assert ids == sorted(ids)


def test_a_returned_review_view_is_a_copy(store: Store):
    run_id, _, paused = paused_run(store)
    store.decide(review(run_id, paused, output_before={"items": [1]}))
    store.reviews(run_id)[0].output_before["items"].append(2)
    assert store.reviews(run_id)[0].output_before == {"items": [1]}


def test_decisions_on_several_runs_are_stored_together(store: Store):
    first, wf, first_paused = paused_run(store)
    second, _, second_paused = paused_run(store)
    ids = store.decide_all([NewDecision(review(first, first_paused), lease=lease("me", first)),
                            NewDecision(review(second, second_paused, decision="edit"),
                                        new_records=[step(second, wf, "b", attempt=2, origin="edited")])])
    assert [[r.id for r in store.reviews(run)] for run in (first, second)] == [[ids[0]], [ids[1]]]
    assert store.get_run(first).owner == "me" and store.get_run(second).status == "running"
    assert store.latest_records(second)["b"].origin == "edited"


def test_when_one_of_several_decisions_is_refused_none_is_stored(store: Store):
    """A fix reaching from a child run into the runs above it is all or nothing: refused on the last run
    (here: decided meanwhile by someone else), the runs decided before it in the same call keep nothing."""
    first, wf, first_paused = paused_run(store)
    second, _, second_paused = paused_run(store)
    store.decide(review(second, second_paused, reviewer="bob"))
    assert store.set_run_status(second, "paused")
    before = store.count_rows()
    with pytest.raises(ReviewError, match=rf"step 'b' of run {second} was already decided by another reviewer"):
        store.decide_all([NewDecision(review(first, first_paused), new_records=[step(first, wf, "b", attempt=2)],
                                      supersede=[first_paused]),
                          NewDecision(review(second, second_paused))])
    assert store.count_rows() == before
    assert store.reviews(first) == [] and store.get_run(first).status == "paused"
    assert store.latest_records(first)["b"].attempt == 1
    third, _, third_paused = paused_run(store)
    assert store.set_run_status(third, "running")  # (the decision found it paused; it went on meanwhile)
    with pytest.raises(ReviewError, match=rf"run {third} is no longer paused"):
        store.decide_all([NewDecision(review(first, first_paused)), NewDecision(review(third, third_paused))])
    assert store.count_rows() == before | {"runs": before["runs"] + 1, "step_records": before["step_records"] + 2,
                                           "gate_results": before["gate_results"] + 1}
    assert store.reviews(first) == [] and store.get_run(first).status == "paused"
