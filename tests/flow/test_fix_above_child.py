"""A fix at the cause above a pause held inside a child run: editing or retrying a completed step upstream of a
unit that waits inside its child run (``node_2 > subgraph_node_2``, ``execute#2 > draft``) answers that pause as
it answers a plain one. The unit's wait is kept as a superseded record, the old child run ends (failed, naming
the fix; its open pause closed), and the unit runs again in a new child run, as every other descendant does.

Executions are counted from the step log the steps write.
"""

from __future__ import annotations

import json
from collections import Counter

from orchestrator.api import Orchestrator
from orchestrator.store import Store, open_store
from tests.flow.conftest import FLOW, executions


def _children(store: Store, run_id: str) -> list[tuple[str, str]]:
    return [(c.parent_step or "", c.status) for c in store.child_runs(run_id)]


def test_editing_a_step_above_a_pause_inside_a_child_runs_the_child_again_in_a_new_run(durable_cli, durable_url,
                                                                                       step_log, tmp_path):
    cli, db_url = durable_cli, durable_url
    res = cli("run", str(FLOW / "tree_map.yaml"), "--input", "count=3", "--input", "unclear=[1, 2]", "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["per_ticket[1] > classify", "per_ticket[2] > classify"]
    fixed = tmp_path / "tickets.json"
    fixed.write_text(json.dumps({"tickets": ["ticket 0", "ticket 1", "ticket 2"]}))
    edited = cli("edit", run_id, "--step", "tickets", "--output", str(fixed), "--json")
    assert edited.exit_code == 0, edited.stderr
    assert "superseded (kept, and run again now): per_ticket[0], per_ticket[1], per_ticket[2]" in edited.stderr
    assert edited.json()["output"] == "ticket 0: billing | ticket 1: billing | ticket 2: billing"
    store = open_store(db_url)
    assert _children(store, run_id) == [("per_ticket[0]", "succeeded"), ("per_ticket[1]", "failed"),
                                        ("per_ticket[2]", "failed"), ("per_ticket[0]", "succeeded"),
                                        ("per_ticket[1]", "succeeded"), ("per_ticket[2]", "succeeded")]
    old = store.child_runs(run_id)[1]
    assert f"superseded: the fix of step 'tickets' of run {run_id}" in (old.error or "")
    waits = [r for r in store.step_records(run_id) if r.unit in ("per_ticket[1]", "per_ticket[2]") and r.superseded]
    assert [(r.unit, r.status, r.error_type) for r in waits] == [("per_ticket[1]", "gate_failed", "ChildPaused"),
                                                                 ("per_ticket[2]", "gate_failed", "ChildPaused")]
    assert [(r.step_id, r.decision) for r in store.reviews(run_id)] == [("tickets", "edit")]
    assert Counter(executions(step_log)) == Counter({"tree-map.tickets": 1, "tree-triage.classify": 6,
                                                     "tree-triage.answer": 4, "tree-map.combine": 1})
    assert cli("runs", "--kind", "child", "--status", "paused", "--json").json() == []
    assert cli("approve", old.run_id).exit_code == 2  # its pause is closed


def test_retrying_the_planner_above_a_loop_iterations_child_pause_runs_the_loop_again(cli, db_url, step_log):
    res = cli("run", str(FLOW / "loop_child_planned.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["execute#2 > draft"]
    before = Counter(executions(step_log))
    retried = cli("retry", run_id, "--step", "planner", "--json")
    assert retried.exit_code == 3, retried.stderr  # the second draft fails its gate again, in the new child
    assert "superseded (kept, and run again now): planner, execute#1, execute#2" in retried.stderr
    assert retried.json()["paused_steps"] == ["execute#2 > draft"]
    assert Counter(executions(step_log)) - before == Counter({"loop-child-planned.planner": 1, "draft": 2,
                                                              "critique": 1})
    store = open_store(db_url)
    assert _children(store, run_id) == [("execute#1", "succeeded"), ("execute#2", "failed"),
                                        ("execute#1", "succeeded"), ("execute#2", "paused")]
    assert len(cli("runs", "--kind", "child", "--status", "paused", "--json").json()) == 1


def test_the_python_api_fixes_above_a_pause_inside_a_child(db_url, step_log):
    with Orchestrator(db_url) as orch:
        run = orch.run(FLOW / "tree_review.yaml")
        assert run.status == "paused"
        [paused_child] = open_store(db_url).child_runs(run.run_id)
        done = orch.edit(run.run_id, "wind", step="plan")
        store = open_store(db_url)
        assert [c.status for c in store.child_runs(run.run_id)] == ["failed", "paused"]
        assert store.get_run(paused_child.run_id).status == "failed"
        assert done.status == "paused"
    assert Counter(executions(step_log))["tree-research.retrieve"] == 2


def test_a_fix_inside_one_child_answers_a_pause_held_inside_a_later_child(cli, db_url, step_log, tmp_path):
    """research (a child run) fed triage (another child run), which waits at its classify: editing the finding
    inside research runs research's summarize again, ends triage's child and runs triage in a new one."""
    res = cli("run", str(FLOW / "tree_two_children.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["triage > classify"]
    fixed = tmp_path / "findings.json"
    fixed.write_text(json.dumps({"findings": ["wind fact", "sun fact"]}))
    edited = cli("edit", run_id, "--step", "research > retrieve", "--output", str(fixed), "--json")
    assert edited.exit_code == 0, edited.stderr
    assert "superseded (kept, and run again now): research > summarize, research, triage" in edited.stderr
    assert edited.json()["output"] == "wind fact; sun fact: billing"
    store = open_store(db_url)
    assert _children(store, run_id) == [("research", "succeeded"), ("triage", "failed"), ("triage", "succeeded")]
    assert Counter(executions(step_log)) == Counter({"tree-two-children.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 2, "tree-triage.classify": 2,
                                                     "tree-triage.answer": 1})
