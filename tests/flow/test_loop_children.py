"""A `workflow:` step with `repeat:` runs its child workflow once per iteration: each iteration is a child run
of its own whose parent_step is the iteration (`improve#2`), and the loop's until reads the child's output."""

from __future__ import annotations

from tests.flow.conftest import FLOW, executions


def test_each_iteration_is_a_child_run_and_until_reads_its_output(cli, step_log):
    res = cli("run", str(FLOW / "loop_child.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == "ESSAY V2"
    assert [(c["step"], c["status"], c["workflow"]) for c in doc["children"]] == [
        ("improve#1", "succeeded", "draft-and-critique"), ("improve#2", "succeeded", "draft-and-critique")]
    steps = {s["unit"]: s for s in doc["steps"]}
    assert steps["improve#1"]["output"]["critique"] == {"passed": False}
    assert steps["improve"]["gates"][0]["reason"] == "until output.critique.passed held after 2 iterations"
    child = cli("show", doc["children"][1]["run_id"], "--json").json()
    assert (child["parent_run_id"], child["parent_step"], child["kind"]) == (doc["run_id"], "improve#2", "child")
    assert child["inputs"]["previous"]["version"] == 1  # $previous: the first child's output
    assert executions(step_log) == ["draft", "critique", "draft", "critique", "publish"]


def test_a_pause_inside_an_iterations_child_pauses_the_parent_at_its_path(cli, step_log):
    res = cli("run", str(FLOW / "loop_child_strict.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["improve#2 > draft"]
    assert [(c["step"], c["status"]) for c in doc["children"]] == [("improve#1", "succeeded"),
                                                                   ("improve#2", "paused")]
    assert "improve#2" not in {s["unit"] for s in doc["steps"]}  # the iteration has no record while it waits
    listed = cli("runs", "--json").json()
    assert listed[0]["waiting_steps"] == ["improve#2 > draft"]
