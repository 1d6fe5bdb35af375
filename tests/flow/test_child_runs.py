"""A `workflow:` step runs another workflow as a child run, inside its parent's execution.

The child is a run of its own (kind ``child``, ``parent_run_id``, ``parent_step``, its own records); its
output is the step's output and the step's gates judge it; its failure fails the step with the child's
error and run id; a pause inside it pauses the parent at ``research > retrieve``; with ``for_each`` each
item gets a child run of its own, and one pausing leaves its siblings finished.
"""

from __future__ import annotations

from collections import Counter

from orchestrator.store import open_store
from tests.flow.conftest import FLOW, executions


def _records(store, run_id):
    return {r.unit: r for r in store.step_records(run_id, latest_only=True)}


def test_the_childs_output_is_the_steps_output_and_the_child_is_a_run_of_its_own(cli, step_log, db_url):
    res = cli("run", str(FLOW / "tree_parent.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == "report: solar panels fact 0; solar panels fact 1; solar panels fact 2"
    [child] = doc["children"]
    assert child["step"] == "research" and child["status"] == "succeeded" and child["workflow"] == "tree-research"
    shown = cli("show", child["run_id"], "--json").json()
    assert shown["kind"] == "child"
    assert shown["parent_run_id"] == doc["run_id"] and shown["parent_step"] == "research"
    assert shown["inputs"] == {"topic": "solar panels", "count": 3}
    assert [s["step_id"] for s in shown["steps"]] == ["retrieve", "summarize"]
    research = next(s for s in doc["steps"] if s["step_id"] == "research")
    assert research["output"] == shown["output"] == shown["steps"][1]["output"]
    assert executions(step_log) == ["tree-parent.plan", "tree-research.retrieve", "tree-research.summarize",
                                    "tree-parent.write"]


def test_show_lists_a_parents_child_runs_and_names_a_childs_parent(cli, step_log):
    doc = cli("run", str(FLOW / "tree_parent.yaml"), "--json").json()
    [child] = doc["children"]
    parent_text = cli("show", doc["run_id"]).stdout
    assert "child runs" in parent_text
    assert any(line.split() == ["research", "succeeded", child["run_id"], "(tree-research)"]
               for line in parent_text.splitlines())
    child_text = cli("show", child["run_id"]).stdout
    assert f"child run of {doc['run_id']} at step research" in child_text


def test_a_child_run_is_not_listed_among_the_runs_unless_asked_for(cli, step_log):
    run_id = cli("run", str(FLOW / "tree_parent.yaml"), "--json").json()["run_id"]
    listed = cli("runs", "--json").json()
    assert [r["run_id"] for r in listed] == [run_id]
    children = cli("runs", "--kind", "child", "--json").json()
    assert [(r["workflow"], r["parent_run_id"]) for r in children] == [("tree-research", run_id)]


def test_the_steps_gates_judge_the_childs_output(cli, step_log):
    res = cli("run", str(FLOW / "tree_parent.yaml"), "--input", "count=2", "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["research"]
    research = next(s for s in doc["steps"] if s["step_id"] == "research")
    assert research["status"] == "gate_failed"
    assert research["gates"][0]["reason"] == "2 items (need 3)"
    assert doc["children"][0]["status"] == "succeeded"
    assert "tree-parent.write" not in executions(step_log)


def test_a_failed_child_fails_the_step_with_the_childs_error_and_run_id(cli, step_log, monkeypatch, db_url):
    monkeypatch.setenv("FAIL_STEP", "tree-research.summarize")
    res = cli("run", str(FLOW / "tree_parent.yaml"), "--json")
    assert res.exit_code == 1, res.stderr
    doc = res.json()
    child_id = doc["children"][0]["run_id"]
    assert doc["children"][0]["status"] == "failed"
    research = next(s for s in doc["steps"] if s["step_id"] == "research")
    assert research["status"] == "failed"
    assert research["error"].startswith(f"ChildRunFailed: child run {child_id} failed: step 'summarize' failed: "
                                        "RuntimeError: summarize cannot reach its source")
    assert child_id in doc["error"]
    monkeypatch.delenv("FAIL_STEP")
    resumed = cli("resume", doc["run_id"], "--json")  # the child's failed step runs again, nothing else
    assert resumed.exit_code == 0, resumed.stderr
    assert Counter(executions(step_log)) == Counter({"tree-parent.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 2, "tree-parent.write": 1})
    assert [c["run_id"] for c in resumed.json()["children"]] == [child_id]


def test_a_pause_inside_the_child_pauses_the_parent_at_the_path(cli, step_log, db_url):
    res = cli("run", str(FLOW / "tree_parent.yaml"), "--input", "count=1", "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["status"] == "paused"
    assert doc["paused_steps"] == ["research > retrieve"]
    child = doc["children"][0]
    assert child["status"] == "paused"
    store = open_store(db_url)
    assert _records(store, child["run_id"])["retrieve"].status == "gate_failed"
    assert "research" not in _records(store, doc["run_id"])  # the parent's step waits: no record yet


def test_a_map_of_child_runs_runs_one_per_item_and_one_pausing_leaves_its_siblings_done(cli, step_log, db_url):
    res = cli("run", str(FLOW / "tree_map.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["per_ticket[3] > classify"]
    children = {c["step"]: c["status"] for c in doc["children"]}
    assert children == {"per_ticket[0]": "succeeded", "per_ticket[1]": "succeeded", "per_ticket[2]": "succeeded",
                        "per_ticket[3]": "paused", "per_ticket[4]": "succeeded"}
    store = open_store(db_url)
    parent = _records(store, doc["run_id"])
    assert {u: r.status for u, r in parent.items() if r.index is not None} == {
        f"per_ticket[{i}]": "succeeded" for i in (0, 1, 2, 4)}
    assert "combine" not in parent
    counts = Counter(executions(step_log))
    assert counts["tree-triage.classify[0]"] == 0 and counts["tree-triage.classify"] == 5
    assert counts["tree-triage.answer"] == 4


def test_resuming_a_paused_tree_runs_nothing_again(cli, step_log):
    doc = cli("run", str(FLOW / "tree_map.yaml"), "--json").json()
    before = Counter(executions(step_log))
    res = cli("resume", doc["run_id"], "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["per_ticket[3] > classify"]
    assert Counter(executions(step_log)) == before
    assert len(res.json()["children"]) == 5


def test_a_python_parent_runs_its_child_workflow_object(cli, step_log):
    res = cli("run", str(FLOW / "tree_py.py"), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "report: solar panels fact 0; solar panels fact 1; solar panels fact 2"
    assert res.json()["children"][0]["workflow"] == "tree-research"
