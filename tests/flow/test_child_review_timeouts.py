"""A pause inside a child run times out by its own step's ``review_timeout``, as a pause of the root would:
``run`` waits for it and applies ``on_review_timeout`` to the child's step, then continues the child and its
parent; a worker finds it by the deadline stored on the root (whatever the depth of the pause) and hands the
tree, decided, to the queue. The decision is stored once, on the child run holding the record."""

from __future__ import annotations

import shutil
import time
from collections import Counter

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.service.worker import ReviewTimeouts, work
from orchestrator.store import open_store
from tests.flow.conftest import FLOW, executions, keys

EACH_ONCE = Counter({"tree-timeout-map.tickets": 1, "tree-timeout-triage.classify": 3,
                     "tree-timeout-triage.answer": 3, "tree-timeout-map.combine": 1})
"""Three child runs of two steps and the parent's two steps, each executed once."""


def _reviews_of_children(store, run_id: str) -> list[tuple[str, str, str, str]]:
    return [(child.parent_step, r.step_id, r.decision, r.reviewer) for child in store.child_runs(run_id)
            for r in store.reviews(child.run_id)]


def test_run_waits_for_a_child_steps_review_timeout_then_continues_the_child_and_the_parent(cli, step_log, db_url):
    res = cli("run", str(FLOW / "tree_timeout_map.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["status"] == "succeeded"
    assert doc["output"] == "ticket 0: billing | ticket 1 ???: other | ticket 2: billing"
    store = open_store(db_url)
    assert _reviews_of_children(store, doc["run_id"]) == [("per_ticket[1]", "classify", "approve", "review-timeout")]
    assert store.reviews(doc["run_id"]) == []  # the decision lives on the child that held the pause
    assert Counter(executions(step_log)) == EACH_ONCE
    assert all(len(found) == EACH_ONCE[unit] for unit, found in keys(step_log).items())  # no key twice


def test_a_child_steps_review_timeout_that_rejects_ends_the_instance_and_the_map_goes_on(cli, step_log, tmp_path):
    """The pause is inside an instance's child: its timed-out rejection ends that instance (null to combine)."""
    for name in ("tree_timeout_map.yaml", "tree_steps.py"):
        shutil.copy(FLOW / name, tmp_path / name)
    child = (FLOW / "tree_timeout_triage.yaml").read_text()
    (tmp_path / "tree_timeout_triage.yaml").write_text(child.replace("on_review_timeout: approve",
                                                                     "on_review_timeout: reject"))
    res = cli("run", str(tmp_path / "tree_timeout_map.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["status"] == "succeeded"
    assert doc["output"] == "ticket 0: billing | None | ticket 2: billing"
    assert {c["step"]: c["status"] for c in doc["children"]}["per_ticket[1]"] == "rejected"
    assert executions(step_log).count("tree-timeout-map.combine") == 1


def test_a_worker_decides_a_timed_out_pause_inside_a_child_and_runs_the_tree_on(step_log, db_url):
    store = open_store(db_url)
    paused = start_run(store, load_workflow(FLOW / "tree_timeout_map.yaml"), {})
    assert paused.status == "paused" and paused.paused_steps == ["per_ticket[1] > classify"]
    ReviewTimeouts(store).decide(now=time.time() + 60)  # a minute on: past the child step's review_timeout (0.5 s)
    root = store.get_run(paused.run_id)
    assert (root.status, root.lease_expires_at) == ("queued", None)  # handed to any worker, decided
    assert _reviews_of_children(store, paused.run_id) == [("per_ticket[1]", "classify", "approve", "review-timeout")]
    work(store, once=True)
    assert store.get_run(paused.run_id).status == "succeeded"
    assert Counter(executions(step_log)) == EACH_ONCE
    assert all(len(found) == EACH_ONCE[unit] for unit, found in keys(step_log).items())


def test_a_worker_rejects_a_timed_out_pause_inside_an_instances_child_and_the_map_goes_on(step_log, tmp_path):
    for name in ("tree_timeout_map.yaml", "tree_steps.py"):
        shutil.copy(FLOW / name, tmp_path / name)
    child = (FLOW / "tree_timeout_triage.yaml").read_text()
    (tmp_path / "tree_timeout_triage.yaml").write_text(child.replace("on_review_timeout: approve",
                                                                     "on_review_timeout: reject"))
    store = open_store(f"sqlite:///{tmp_path / 'orchestrator.db'}")
    paused = start_run(store, load_workflow(tmp_path / "tree_timeout_map.yaml"), {})
    assert paused.status == "paused" and paused.paused_steps == ["per_ticket[1] > classify"]
    time.sleep(0.6)  # past the child step's review_timeout (0.5 s)
    ReviewTimeouts(store).decide()
    root = store.get_run(paused.run_id)
    assert (root.status, root.lease_expires_at) == ("queued", None)  # the instance ended: the map goes on
    assert _reviews_of_children(store, paused.run_id) == [("per_ticket[1]", "classify", "reject", "review-timeout")]
    work(store, once=True)
    done = store.get_run(paused.run_id)
    assert (done.status, done.output) == ("succeeded", "ticket 0: billing | None | ticket 2: billing")
    assert {c.parent_step: c.status for c in store.child_runs(paused.run_id)}["per_ticket[1]"] == "rejected"
    assert executions(step_log).count("tree-timeout-map.combine") == 1
