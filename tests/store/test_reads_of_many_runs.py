"""Reads of several runs in one call (a level of a tree of child runs): the same views as the one-run reads,
by run id, runs without any left out; on every store."""

from __future__ import annotations

from orchestrator.store import Store
from tests.store.rows import add_run, add_workflow, gate, paused_run, review, step


def test_child_runs_of_several_parents_are_those_of_each_by_parent(store: Store) -> None:
    wf = add_workflow(store)
    first, second, lonely = add_run(store, wf), add_run(store, wf), add_run(store, wf)
    kids = {parent: [add_run(store, wf, kind="child", parent_run_id=parent, parent_step=f"s[{i}]") for i in range(3)]
            for parent in (first, second)}
    found = store.child_runs_of([first, second, lonely])
    assert set(found) == {first, second}
    for parent in (first, second):
        assert [r.run_id for r in found[parent]] == kids[parent] == [r.run_id for r in store.child_runs(parent)]
    assert store.child_runs_of([]) == {}


def test_step_records_of_several_runs_are_those_of_each_with_their_gates(store: Store) -> None:
    wf = add_workflow(store)
    runs = [add_run(store, wf) for _ in range(3)]
    for n, run_id in enumerate(runs[:2]):
        store.insert_step_record(step(run_id, wf, "a", output=n))
        store.insert_step_record(step(run_id, wf, "b", status="gate_failed", gates=[gate(passed=False)]))
    found = store.step_records_of(runs)
    assert set(found) == set(runs[:2])
    for run_id in runs[:2]:
        assert found[run_id] == store.step_records(run_id)
    assert [[g.gate for g in r.gates] for r in found[runs[0]]] == [[], ["not_empty"]]


def test_reviews_of_several_runs_are_those_of_each(store: Store) -> None:
    run_id, _, paused = paused_run(store)
    other, _, other_paused = paused_run(store)
    undecided, _, _ = paused_run(store)
    store.decide(review(run_id, paused, reviewer="ann"))
    store.decide(review(other, other_paused, reviewer="bob"))
    found = store.reviews_of([run_id, other, undecided])
    assert set(found) == {run_id, other}
    assert found[run_id] == store.reviews(run_id) and [r.reviewer for r in found[other]] == ["bob"]
