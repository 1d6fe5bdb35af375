"""The store contract for triaging runs: one page with outcome, blame and pause (every backend, see conftest)."""

from __future__ import annotations

import time

from orchestrator.store import NewAttribution, NewOutcome, Store
from orchestrator.store.triage import RunQuery
from tests.store.rows import add_run, add_workflow, gate, review, step


def outcome(store: Store, run_id: str, correct: bool, value: float | None = None) -> int:
    return store.add_outcome(NewOutcome(run_id, value if value is not None else float(correct), correct, "human",
                                        "goal_achieved"))


def blame(store: Store, run_id: str, step_id: str | None, method: str = "trace", by: str = "step") -> int:
    return store.add_attribution(NewAttribution(run_id, method, {"by": by}, [], {}, step_id, 0.5, {}))


def ids(store: Store, **query: object) -> list[str]:
    return [row.run.run_id for row in store.triage_runs(RunQuery(**query)).rows]  # type: ignore[arg-type]


def test_a_page_lists_runs_newest_first_and_counts_every_run_the_filters_keep(store: Store):
    wf = add_workflow(store)
    runs = [add_run(store, wf) for _ in range(7)]
    page = store.triage_runs(RunQuery(limit=3, offset=2))
    assert [r.run.run_id for r in page.rows] == runs[::-1][2:5]
    assert (page.total, page.more) == (7, True)
    assert page.range_note() == "showing 3-5 of 7; --offset 5 for more"
    last = store.triage_runs(RunQuery(limit=3, offset=6))
    assert [r.run.run_id for r in last.rows] == [runs[0]] and not last.more
    assert last.range_note() == "showing 7-7 of 7"


def test_the_outcome_of_a_run_is_its_latest_outcome_and_filters_on_correctness(store: Store):
    wf = add_workflow(store)
    right, wrong, relabelled, unscored = (add_run(store, wf) for _ in range(4))
    outcome(store, right, True)
    outcome(store, wrong, False, 0.25)
    outcome(store, relabelled, False)
    outcome(store, relabelled, True, 0.9)
    rows = {r.run.run_id: r for r in store.triage_runs(RunQuery()).rows}
    assert (rows[wrong].outcome_value, rows[wrong].outcome_correct) == (0.25, False)
    assert (rows[relabelled].outcome_value, rows[relabelled].outcome_correct) == (0.9, True)
    assert (rows[unscored].outcome_value, rows[unscored].outcome_correct) == (None, None)
    assert ids(store, outcome="incorrect") == [wrong]
    assert ids(store, outcome="correct") == [relabelled, right]
    assert store.triage_runs(RunQuery(outcome="correct")).total == 2


def test_blamed_filters_on_the_step_the_explaining_attribution_blamed(store: Store):
    wf = add_workflow(store)
    first, second, third, fourth = (add_run(store, wf) for _ in range(4))
    blame(store, first, "a")
    blame(store, second, "a")
    blame(store, second, "b")  # a newer trace supersedes the earlier one
    blame(store, third, None)
    blame(store, fourth, "c", "counterfactual")
    blame(store, fourth, "a")  # a later trace does not outrank a counterfactual
    blame(store, fourth, "d", "shapley", by="agent")  # nor does credit by agent
    assert ids(store, blamed="a") == [first]
    assert ids(store, blamed="b") == [second]
    assert ids(store, blamed="c") == [fourth]
    assert {r.run.run_id: r.blamed_step for r in store.triage_runs(RunQuery()).rows} == \
        {first: "a", second: "b", third: None, fourth: "c"}


def test_blamed_names_a_step_and_matches_its_instances_iterations_and_child_steps(store: Store):
    wf = add_workflow(store)
    runs = {blamed: add_run(store, wf) for blamed in ("research", "research > retrieve", "research[2] > retrieve",
                                                      "research#3", "research_v2", "researcher > research")}
    for blamed, run_id in runs.items():
        blame(store, run_id, blamed)
    assert set(ids(store, blamed="research")) == {runs["research"], runs["research > retrieve"],
                                                  runs["research[2] > retrieve"], runs["research#3"]}
    assert ids(store, blamed="research > retrieve") == [runs["research > retrieve"]]
    assert ids(store, blamed="research[2]") == [runs["research[2] > retrieve"]]
    assert ids(store, blamed="research_v2") == [runs["research_v2"]]  # an _ is no wildcard


def test_a_paused_run_shows_its_waiting_step_and_the_failed_gate_reason(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "a", status="gate_failed", started_at=100.0,
                                  gates=[gate("not_empty"), gate("range", passed=False, reason="score 0.2 < 0.5")]))
    store.insert_step_record(step(run_id, wf, "b", status="gate_failed", started_at=101.0,
                                  gates=[gate(passed=False, reason="empty")]))
    store.set_run_status(run_id, "paused")
    row = store.triage_runs(RunQuery()).rows[0]
    assert (row.waiting_steps, row.waiting_step, row.gate_reason) == (["a", "b"], "a", "score 0.2 < 0.5")
    assert row.to_json()["waiting_step"] == "a" and row.to_json()["gate_reason"] == "score 0.2 < 0.5"


def test_an_answered_pause_is_no_longer_waiting(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    first = store.insert_step_record(step(run_id, wf, "a", status="gate_failed", started_at=100.0,
                                          gates=[gate(passed=False, reason="first")]))
    store.insert_step_record(step(run_id, wf, "b", status="gate_failed", started_at=101.0,
                                  gates=[gate(passed=False, reason="second")]))
    store.set_run_status(run_id, "paused")
    store.decide(review(run_id, first, "a"), run_status="paused")
    row = store.triage_runs(RunQuery()).rows[0]
    assert (row.waiting_steps, row.gate_reason) == (["b"], "second")


def test_a_run_that_is_not_paused_waits_nowhere(store: Store):
    wf = add_workflow(store)
    run_id = add_run(store, wf)
    store.insert_step_record(step(run_id, wf, "a", status="gate_failed", gates=[gate(passed=False)]))
    store.set_run_status(run_id, "failed")
    row = store.triage_runs(RunQuery()).rows[0]
    assert (row.waiting_step, row.gate_reason) == (None, None)


def test_kind_since_status_and_workflow_filter_the_page_and_the_total(store: Store):
    wf = add_workflow(store)
    other = add_workflow(store, "other", "h2")
    old = add_run(store, wf)
    cutoff = time.time()
    time.sleep(0.01)
    replay = add_run(store, wf, kind="replay", parent_run_id=old)
    new = add_run(store, wf)
    elsewhere = add_run(store, other, "other", status="queued")
    assert ids(store) == [elsewhere, new, old]
    assert ids(store, kind="replay") == [replay]
    assert ids(store, kind=None) == [elsewhere, new, replay, old]
    assert ids(store, since=cutoff) == [elsewhere, new]
    assert ids(store, status="queued") == [elsewhere]
    page = store.triage_runs(RunQuery(workflow="wf", since=cutoff, kind=None))
    assert [r.run.run_id for r in page.rows] == [new, replay] and page.total == 2


def test_a_part_of_the_workflow_name_filters_the_page_and_the_total_case_blind(store: Store):
    """The review app's filter: ``Triage`` finds ``triage_demo`` and ``my_triage``; ``_`` and ``%`` are no wildcards."""
    names = ("triage_demo", "my_triage", "trivia", "100%_done")
    runs = {name: add_run(store, add_workflow(store, name, name), name) for name in names}
    page = store.triage_runs(RunQuery(workflow_part="Triage", limit=1))
    assert [r.run.run_id for r in page.rows] == [runs["my_triage"]] and page.total == 2
    assert ids(store, workflow_part="e_d") == [runs["triage_demo"]]
    assert ids(store, workflow_part="%") == [runs["100%_done"]]
    assert ids(store, workflow_part="0%_") == [runs["100%_done"]]
    assert ids(store, workflow_part="nothing") == []
