"""The store contract for workflows and runs (runs on every backend, see conftest)."""

from __future__ import annotations

import contextlib
import time

import pytest

from orchestrator.core.errors import LeaseLostError, NotFoundError
from orchestrator.store import Lease, ModelCall, NewAttribution, NewOutcome, NewRun, RunEnd, Store
from tests.store.rows import DEFINITION, add_run, add_workflow, lease, paused_run, review, step

# -- workflows -------------------------------------------------------------------------------


def test_registering_the_same_workflow_version_twice_returns_one_id(store: Store):
    first = add_workflow(store)
    assert add_workflow(store) == first
    assert store.count_rows()["workflows"] == 1


def test_a_new_hash_or_a_new_name_is_a_new_workflow_version_with_a_larger_id(store: Store):
    first = add_workflow(store, "wf", "h1")
    second = add_workflow(store, "wf", "h2")
    third = add_workflow(store, "other", "h1")
    assert first < second < third
    assert store.count_rows()["workflows"] == 3


def test_registering_again_from_a_new_source_file_updates_the_source(store: Store):
    wf = add_workflow(store, source="old.yaml")
    assert add_workflow(store, source="new.yaml") == wf
    assert store.workflow_definition(wf) == (DEFINITION, "new.yaml")


def test_registering_again_without_a_source_keeps_the_stored_source(store: Store):
    wf = add_workflow(store, source="old.yaml")
    assert add_workflow(store, source=None) == wf
    assert add_workflow(store, source="") == wf
    assert store.workflow_definition(wf)[1] == "old.yaml"


def test_a_workflow_definition_round_trips_as_json(store: Store):
    wf = store.register_workflow("wf", "2", {"steps": ("a", "b"), "n": 1.5, "none": None}, None, "h")
    assert store.workflow_definition(wf) == ({"steps": ["a", "b"], "n": 1.5, "none": None}, None)


def test_an_unknown_workflow_definition_is_not_found(store: Store):
    with pytest.raises(NotFoundError, match="workflow definition 999 is not stored"):
        store.workflow_definition(999)


# -- runs --------------------------------------------------------------------------------------


def test_a_created_run_reads_back_with_every_field(store: Store):
    wf = add_workflow(store)
    before = time.time()
    run_id = store.create_run(NewRun(wf, "wf", {"text": "hi", "pair": (1, 2)}, status="queued", kind="replay",
                                     parent_run_id="rparent", parent_step="b", owner="host:1"))
    after = time.time()
    run = store.get_run(run_id)
    assert run.run_id == run_id and isinstance(run.id, int)
    assert (run.workflow, run.workflow_id, run.status, run.kind) == ("wf", wf, "queued", "replay")
    assert run.inputs == {"text": "hi", "pair": [1, 2]}
    assert (run.output, run.error) == (None, None)
    assert (run.parent_run_id, run.parent_step) == ("rparent", "b")
    assert before <= run.created_at == run.updated_at <= after
    assert run.owner == "host:1"


def test_a_run_is_created_running_of_kind_run_without_owner_by_default(store: Store):
    run = store.get_run(add_run(store, add_workflow(store)))
    assert (run.status, run.kind, run.parent_run_id, run.parent_step) == ("running", "run", None, None)
    assert run.owner is None


def test_run_ids_are_distinct_and_row_ids_increase(store: Store):
    wf = add_workflow(store)
    runs = [store.get_run(add_run(store, wf)) for _ in range(5)]
    assert len({r.run_id for r in runs}) == 5
    assert [r.id for r in runs] == sorted(r.id for r in runs) and len({r.id for r in runs}) == 5


def test_run_ids_are_r_and_96_random_bits_in_hex(store: Store):
    wf = add_workflow(store)
    ids = [add_run(store, wf) for _ in range(20)]
    assert all(len(run_id) == 25 and run_id[0] == "r" and int(run_id[1:], 16) >= 0 for run_id in ids)
    assert len({run_id[:6] for run_id in ids}) > 1  # random from the first characters on


def test_run_ids_starting_with_a_prefix_are_those_ids_in_order_up_to_the_limit(store: Store):
    wf = add_workflow(store)
    ids = sorted(add_run(store, wf) for _ in range(12))
    assert store.run_ids_starting("r", limit=100) == ids
    assert store.run_ids_starting("r", limit=3) == ids[:3]
    assert store.run_ids_starting(ids[5], limit=10) == [ids[5]]
    assert store.run_ids_starting(ids[5][:-1], limit=10) == [ids[5]]
    assert store.run_ids_starting("rz", limit=10) == []
    assert store.run_ids_starting("r%", limit=10) == [] and store.run_ids_starting("r_", limit=10) == []


def test_run_ids_starting_any_prefix_are_those_ids_in_order_each_once_up_to_the_limit(store: Store):
    wf = add_workflow(store)
    ids = sorted(add_run(store, wf) for _ in range(12))
    assert store.run_ids_starting_any([ids[7][:9], ids[2], ids[7]], limit=10) == [ids[2], ids[7]]
    assert store.run_ids_starting_any(["r"], limit=100) == ids
    assert store.run_ids_starting_any(["r", ids[0]], limit=3) == ids[:3]
    assert store.run_ids_starting_any(["rz", "r%", "r_"], limit=10) == []
    assert store.run_ids_starting_any([], limit=10) == []


UNKNOWN_RUN_CALLS = {
    "get_run": lambda s: s.get_run("rnope"),
    "set_run_status": lambda s: s.set_run_status("rnope", "failed"),
    "set_run_status expecting": lambda s: s.set_run_status("rnope", "failed", expect=["running"]),
    "step_records": lambda s: s.step_records("rnope"),
    "latest_records": lambda s: s.latest_records("rnope"),
    "insert_step_record": lambda s: s.insert_step_record(step("rnope", 1, "a")),
    "decide": lambda s: s.decide(review("rnope", 1)),
    "reviews": lambda s: s.reviews("rnope"),
    "add_outcome": lambda s: s.add_outcome(NewOutcome("rnope", 1.0, True, "test", "final")),
    "outcomes": lambda s: s.outcomes("rnope"),
    "add_attribution": lambda s: s.add_attribution(NewAttribution("rnope", "m", {}, [], {}, None, None, {})),
    "attributions": lambda s: s.attributions("rnope"),
}


@pytest.mark.parametrize("call", UNKNOWN_RUN_CALLS.values(), ids=UNKNOWN_RUN_CALLS.keys())
def test_an_unknown_run_is_not_found_naming_the_run_and_stores_nothing(store: Store, call):
    add_run(store, add_workflow(store))
    before = store.count_rows()
    with pytest.raises(NotFoundError) as caught:
        call(store)
    message = str(caught.value)
    assert message.startswith("no run 'rnope' in ") and "orchestrator runs" in message
    assert store.count_rows() == before


def test_an_unknown_run_has_no_children(store: Store):
    assert store.child_runs("rnope") == []


def test_list_runs_is_newest_first_and_only_original_runs_by_default(store: Store):
    wf = add_workflow(store)
    first, second = add_run(store, wf), add_run(store, wf)
    replay = add_run(store, wf, kind="replay", parent_run_id=first)
    third = add_run(store, wf)
    assert [r.run_id for r in store.list_runs()] == [third, second, first]
    assert [r.run_id for r in store.list_runs(kind=None)] == [third, replay, second, first]
    assert [r.run_id for r in store.list_runs(kind="replay")] == [replay]


def test_list_runs_filters_by_status_and_workflow(store: Store):
    wf, other = add_workflow(store), add_workflow(store, "other", "h9")
    a = add_run(store, wf)
    b = add_run(store, other, "other")
    c = add_run(store, wf, status="queued")
    assert [r.run_id for r in store.list_runs(workflow="wf")] == [c, a]
    assert [r.run_id for r in store.list_runs(status="queued")] == [c]
    assert [r.run_id for r in store.list_runs(status="running", workflow="other")] == [b]
    assert store.list_runs(status="failed") == []
    assert [r.run_id for r in store.list_runs(status="", workflow="")] == [c, b, a]  # empty means no filter


def test_list_runs_limit_keeps_the_newest_matching_runs(store: Store):
    wf = add_workflow(store)
    runs = [add_run(store, wf, status="queued" if i % 2 else "running") for i in range(7)]
    assert [r.run_id for r in store.list_runs(limit=3)] == runs[::-1][:3]
    assert [r.run_id for r in store.list_runs(status="queued", limit=2)] == [runs[5], runs[3]]
    assert store.list_runs(limit=0) == []


def test_child_runs_are_the_replays_and_forks_of_a_run_oldest_first(store: Store):
    wf = add_workflow(store)
    parent = add_run(store, wf)
    fork = add_run(store, wf, kind="run", parent_run_id=parent, parent_step="b")
    add_run(store, wf)
    replay = add_run(store, wf, kind="replay", parent_run_id=parent)
    children = store.child_runs(parent)
    assert [r.run_id for r in children] == [fork, replay]
    assert children[0].parent_step == "b"


def test_set_run_status_moves_the_run_and_stores_output_and_error(store: Store):
    run_id = add_run(store, add_workflow(store))
    created = store.get_run(run_id)
    assert store.set_run_status(run_id, "succeeded", output={"total": 10, "items": (1, 2)}) is True
    run = store.get_run(run_id)
    assert (run.status, run.output, run.error) == ("succeeded", {"total": 10, "items": [1, 2]}, None)
    assert run.updated_at >= created.updated_at and run.created_at == created.created_at
    assert store.set_run_status(run_id, "failed", error="ValueError: boom") is True
    run = store.get_run(run_id)
    assert (run.status, run.error) == ("failed", "ValueError: boom")
    assert run.output == {"total": 10, "items": [1, 2]}  # no output given: the stored one stays


def test_set_run_status_leaves_the_owner_unless_one_is_given(store: Store):
    run_id = add_run(store, add_workflow(store), owner="host:1")
    store.set_run_status(run_id, "paused")
    assert store.get_run(run_id).owner == "host:1"
    store.set_run_status(run_id, "running", holder="host:2")
    assert store.get_run(run_id).owner == "host:2"
    store.set_run_status(run_id, "paused", holder=None)
    assert store.get_run(run_id).owner is None


def test_set_run_status_with_expect_moves_only_from_an_expected_state(store: Store):
    run_id = add_run(store, add_workflow(store), owner="host:1")
    assert store.set_run_status(run_id, "paused", expect=("running", "queued")) is True
    assert store.get_run(run_id).status == "paused"
    assert store.set_run_status(run_id, "failed", output=1, error="late", expect=["running"], holder="x") is False
    run = store.get_run(run_id)
    assert (run.status, run.output, run.error) == ("paused", None, None)
    assert run.owner == "host:1"
    assert store.set_run_status(run_id, "running", expect=iter(["paused"])) is True  # any iterable
    assert store.set_run_status(run_id, "failed", expect=[]) is False


def test_claim_queued_run_takes_the_oldest_queued_run_for_the_owner(store: Store):
    wf = add_workflow(store)
    add_run(store, wf)  # running: not claimable
    first = add_run(store, wf, status="queued")
    second = add_run(store, wf, status="queued")
    assert store.claim_queued_run(lease("host:1")) == first
    run = store.get_run(first)
    assert run.status == "running" and store.get_run(first).owner == "host:1"
    assert store.get_run(second).status == "queued"
    assert store.claim_queued_run(lease("host:2")) == second
    assert store.get_run(second).owner == "host:2"


def test_claim_queued_run_is_none_when_nothing_is_queued(store: Store):
    assert store.claim_queued_run(lease("host:1")) is None
    wf = add_workflow(store)
    add_run(store, wf)
    add_run(store, wf, status="paused")
    assert store.claim_queued_run(lease("host:1")) is None


def test_a_claimed_run_is_never_claimed_again(store: Store):
    wf = add_workflow(store)
    runs = [add_run(store, wf, status="queued") for _ in range(4)]
    claimed = [store.claim_queued_run(lease(f"host:{i}")) for i in range(6)]
    assert claimed == [*runs, None, None]


def test_a_requeued_run_can_be_claimed_again(store: Store):
    run_id = add_run(store, add_workflow(store), status="queued")
    assert store.claim_queued_run(lease("host:1")) == run_id
    assert store.set_run_status(run_id, "queued", expect=["running"], holder=None)
    assert store.claim_queued_run(lease("host:2")) == run_id


def test_a_returned_run_view_is_a_copy(store: Store):
    run_id = add_run(store, add_workflow(store))
    store.set_run_status(run_id, "succeeded", output={"items": [1]})
    run = store.get_run(run_id)
    run.inputs["x"] = "changed"
    run.output["items"].append(2)
    run.status = "failed"
    again = store.get_run(run_id)
    assert (again.inputs, again.output, again.status) == ({"x": 1}, {"items": [1]}, "succeeded")


def test_inputs_given_to_create_run_are_copied(store: Store):
    wf = add_workflow(store)
    inputs = {"items": [1]}
    run_id = store.create_run(NewRun(wf, "wf", inputs))
    inputs["items"].append(2)
    assert store.get_run(run_id).inputs == {"items": [1]}


# -- row counts ------------------------------------------------------------------------------

TABLES = ["workflows", "runs", "step_records", "gate_results", "reviews", "outcomes", "attributions", "model_calls",
          "notifications", "datasets", "dataset_examples", "experiments", "experiment_runs"]


def test_a_new_store_counts_zero_rows_in_every_table(store: Store):
    counts = store.count_rows()
    assert list(counts) == TABLES
    assert set(counts.values()) == {0}


def test_count_rows_counts_what_was_written(store: Store):
    run_id, wf, paused = paused_run(store)
    store.decide(review(run_id, paused), new_records=[step(run_id, wf, "b", attempt=2, origin="approved")])
    outcome = store.add_outcome(NewOutcome(run_id, 1.0, True, "test", "final"))
    store.add_attribution(NewAttribution(run_id, "m", {}, [], {}, None, None, {}, outcome_id=outcome))
    store.add_model_calls(run_id, paused, [ModelCall("validation", "llm_judge", "openai", "m", 1.0, 2.0)])
    assert store.count_rows() == {"workflows": 1, "runs": 1, "step_records": 3, "gate_results": 1, "reviews": 1,
                                  "outcomes": 1, "attributions": 1, "model_calls": 1, "notifications": 0,
                                  "datasets": 0, "dataset_examples": 0, "experiments": 0, "experiment_runs": 0}


def test_a_read_the_database_refuses_leaves_the_store_usable(store: Store):
    run_id = add_run(store, add_workflow(store))
    with contextlib.suppress(Exception):  # whichever error it is, the store must survive it
        store.list_runs(limit=-1)  # PostgreSQL refuses a negative LIMIT; SQLite and memory do not fail
    assert store.get_run(run_id).status == "running"
    assert store.set_run_status(run_id, "failed") is True
    assert store.count_rows()["runs"] == 1


# -- leases: exactly one executor per run ------------------------------------------------------------

def test_of_two_claimants_of_a_free_run_exactly_one_wins_the_lease(store: Store):
    run_id = add_run(store, add_workflow(store), status="paused")
    first, second = lease("host:1", run_id), lease("host:2", run_id)
    assert store.acquire_lease(first, statuses=["paused"]) is True
    assert store.acquire_lease(second, statuses=["paused", "running"]) is False
    run = store.get_run(run_id)
    assert (run.status, run.owner) == ("running", "host:1")


def test_an_expired_lease_is_taken_over_and_shown_as_interrupted_meanwhile(store: Store):
    run_id = add_run(store, add_workflow(store), status="paused")
    dead = lease("host:1", run_id, seconds=0.05)
    assert store.acquire_lease(dead, statuses=["paused"])
    time.sleep(0.1)
    assert store.get_run(run_id).status == "interrupted"
    assert [r.run_id for r in store.list_runs(status="interrupted")] == [run_id]
    assert store.list_runs(status="running") == []
    assert store.acquire_lease(lease("host:2", run_id), statuses=["running"]) is True
    assert store.get_run(run_id).owner == "host:2"


def test_the_lease_of_a_holder_known_dead_is_ended_only_for_that_holder(store: Store):
    run_id = add_run(store, add_workflow(store), status="paused")
    dead = lease("host:1#100@m", run_id)
    assert store.acquire_lease(dead, statuses=["paused"])
    assert store.expire_lease(run_id, "host:1#101@m") is False  # another holder (the pid's next process)
    assert store.acquire_lease(lease("host:2", run_id), statuses=["running"]) is False
    assert store.expire_lease(run_id, dead.holder) is True
    assert store.get_run(run_id).status == "interrupted"
    assert store.expire_lease(run_id, dead.holder) is False  # nothing live left to end
    assert store.acquire_lease(lease("host:2", run_id), statuses=["running"]) is True
    assert store.expire_lease(run_id, dead.holder) is False  # the taker's lease is not the dead one's


def test_paused_runs_are_due_for_review_by_their_stored_deadline_earliest_first(store: Store):
    workflow_id = add_workflow(store)
    later, sooner, untimed, ended = (add_run(store, workflow_id, status="queued") for _ in range(4))
    for run_id, deadline in ((later, 200.0), (sooner, 100.0), (untimed, None)):
        held = lease("host:1", run_id)
        assert store.acquire_lease(held, statuses=["queued"])
        assert store.end_lease(held, "paused", review_due=deadline)
    held = lease("host:1", ended)
    assert store.acquire_lease(held, statuses=["queued"])
    assert store.end_lease(held, "failed", review_due=50.0)  # only a paused run is ever due

    assert store.due_reviews(99.0) == []
    assert store.due_reviews(1000.0) == [(sooner, 100.0), (later, 200.0)]
    assert store.due_reviews(1000.0, limit=1) == [(sooner, 100.0)]
    assert store.set_review_deadline(sooner, 300.0, was=99.0) is False  # read before it changed: refused
    assert store.set_review_deadline(sooner, 300.0, was=100.0) is True
    assert store.set_review_deadline(later, None, was=200.0) is True
    assert store.due_reviews(1000.0) == [(sooner, 300.0)]

    resumed = lease("host:2", sooner)  # continued, then paused again with no timed pause: nothing due
    assert store.acquire_lease(resumed, statuses=["paused"])
    assert store.set_review_deadline(sooner, 1.0, was=300.0) is False  # no longer paused
    assert store.end_lease(resumed, "paused")
    assert store.due_reviews(1000.0) == []


def taken_over(store: Store, run_id: str) -> tuple[Lease, Lease]:
    """A paused run's lease taken by ``host:1``, left to expire and taken over by ``host:2``: (stalled, held)."""
    stalled = lease("host:1", run_id, seconds=0.05)
    assert store.acquire_lease(stalled, statuses=["paused"])
    time.sleep(0.1)
    held = lease("host:2", run_id)
    assert store.acquire_lease(held, statuses=["running"])
    return stalled, held


def test_a_lost_lease_can_neither_be_renewed_nor_write_records_nor_end_the_run(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf, status="paused")
    stalled, _ = taken_over(store, run_id)
    before = store.count_rows()
    assert store.renew_lease(stalled) is False
    record = step(run_id, wf, "a")
    record.lease_token = stalled.token
    with pytest.raises(LeaseLostError, match=f"lost the lease on run {run_id}"):
        store.insert_step_record(record)
    assert store.end_lease(stalled, "failed", error="late") is False
    assert store.count_rows() == before
    assert store.get_run(run_id).status == "running"


def test_the_holder_writes_renews_and_ends_its_lease(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf, status="paused")
    held = lease("host:1", run_id)
    assert store.acquire_lease(held, statuses=["paused"])
    assert store.renew_lease(held) is True
    record = step(run_id, wf, "a")
    record.lease_token = held.token
    assert store.insert_step_record(record) > 0
    assert store.end_lease(held, "succeeded", output={"ok": True}) is True
    run = store.get_run(run_id)
    assert (run.status, run.output, run.lease_expires_at) == ("succeeded", {"ok": True}, None)
    assert store.acquire_lease(lease("host:2", run_id), statuses=["paused", "running"]) is False  # finished


def test_a_runs_end_and_its_evaluator_outcome_are_written_together_and_only_under_the_lease(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf, status="paused")
    stalled, held = taken_over(store, run_id)
    scored = NewOutcome(run_id, value=0.9, correct=True, source="evaluator", termination="goal_achieved")
    assert store.end_lease(stalled, "succeeded", output=1, outcome=scored) is False
    assert store.outcomes(run_id) == [] and store.get_run(run_id).status == "running"
    assert store.end_lease(held, "succeeded", output=2, outcome=scored) is True
    assert (store.get_run(run_id).status, store.get_run(run_id).output) == ("succeeded", 2)
    assert [(o.source, o.value, o.correct) for o in store.outcomes(run_id)] == [("evaluator", 0.9, True)]


def test_records_of_one_batch_are_committed_together_with_the_runs_end(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf, status="paused")
    held = lease("host:1", run_id)
    assert store.acquire_lease(held, statuses=["paused"])
    records = [step(run_id, wf, sid) for sid in ("a", "b", "c")]
    for record in records:
        record.lease_token = held.token
    ids = store.insert_step_records(records, end=RunEnd(held, "succeeded", {"n": 3}))
    assert len(set(ids)) == 3 and [r.id for r in store.step_records(run_id)] == ids
    run = store.get_run(run_id)
    assert (run.status, run.output, run.lease_expires_at) == ("succeeded", {"n": 3}, None)


def test_a_batch_under_a_lost_lease_writes_nothing_and_leaves_the_run_alone(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf, status="paused")
    stalled = lease("host:1", run_id, seconds=0.05)
    assert store.acquire_lease(stalled, statuses=["paused"])
    time.sleep(0.1)
    assert store.acquire_lease(lease("host:2", run_id), statuses=["running"])
    before = store.count_rows()
    unleased = step(run_id, wf, "a")  # would be written alone; in the batch it shares the batch's fate
    late = step(run_id, wf, "b")
    late.lease_token = stalled.token
    with pytest.raises(LeaseLostError):
        store.insert_step_records([unleased, late])
    with pytest.raises(LeaseLostError):
        store.insert_step_records([unleased], end=RunEnd(stalled, "succeeded", 1))
    assert store.count_rows() == before
    assert (store.get_run(run_id).status, store.get_run(run_id).owner) == ("running", "host:2")


def test_a_run_created_under_a_lease_is_held_from_its_first_moment(store: Store):
    wf = add_workflow(store)
    held = lease("host:1")
    run_id = store.create_run(NewRun(wf, "wf", {}), lease=held)
    assert store.acquire_lease(lease("host:2", run_id), statuses=["running"]) is False
    assert store.renew_lease(Lease(run_id, held.holder, held.token, held.seconds)) is True


def test_a_run_created_with_its_reference_answer_has_it_from_its_first_row(store: Store):
    wf = add_workflow(store)
    queued = add_run(store, wf, status="queued", reference={"vendor": "V-007"})
    plain = add_run(store, wf)
    assert store.get_run(queued).reference == {"vendor": "V-007"}  # a worker claiming it at once sees it
    assert store.get_run(plain).reference is None
