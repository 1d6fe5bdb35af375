"""Attribution through child runs: candidates are paths into the tree, and the record keeps the path.

tree_attr_parent.yaml plans a topic, runs tree_attr_research.yaml as its child ``research`` (``retrieve``
drops the last fact, a warning gate says so, and its baseline keeps every fact), writes a report and publishes
it (``side_effects``, with a dry run). The evaluator wants every fact asked for, so the outcome is wrong, and
the fault is two levels down: ``research > retrieve``. tree_attr_map.yaml maps tree_attr_triage.yaml over three
tickets, and the child of ticket 1 misfiles it (``per_ticket[1] > classify``). tree_attr_loop.yaml repeats
tree_attr_round.yaml, whose draft loses its citation in round 2 (``improve#2 > draft``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.flow.conftest import FLOW


def _lines(log: Path) -> list[str]:
    return [line.strip() for line in log.read_text().splitlines() if line.strip()]


def _run(cli: Any, name: str) -> str:
    res = cli("run", str(FLOW / f"tree_attr_{name}.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    return str(res.json()["run_id"])


def test_trace_blames_the_child_step_that_produced_the_bad_value_by_its_path(cli, step_log):
    run_id = _run(cli, "parent")
    assert cli("label", run_id, "--incorrect").exit_code == 0
    trace = cli("trace", run_id, "--json").json()
    assert trace["blamed_step"] == "research > retrieve"
    top = trace["candidates"][0]
    assert (top["step_id"], top["agent"]) == ("research > retrieve", "retrieve")
    assert top["evidence"]["signals"][0]["kind"] == "gate_warning"
    child_run = cli("show", run_id, "--json").json()["children"][0]["run_id"]
    assert top["evidence"]["run_id"] == child_run  # the record it read is the child's
    paths = [c["step_id"] for c in trace["candidates"]]
    assert {"plan", "research", "research > summarize", "write", "publish"} <= set(paths)
    # the label stored the trace: read again, the stored record keeps the path, and the text output names it
    assert cli("trace", run_id, "--json").json()["created_at"] == trace["created_at"]
    assert "blamed step research > retrieve (agent retrieve)" in cli("trace", run_id).stdout


def test_trace_blames_one_instance_of_a_map_of_children(cli, step_log):
    run_id = _run(cli, "map")
    trace = cli("trace", run_id, "--recompute", "--json").json()
    assert trace["blamed_step"] == "per_ticket[1] > classify"
    paths = [c["step_id"] for c in trace["candidates"]]
    assert {"per_ticket[0] > classify", "per_ticket[2] > answer", "per_ticket[1]", "combine"} <= set(paths)


def test_trace_says_which_iteration_of_a_loop_of_children_the_blame_landed_on(cli, step_log):
    run_id = _run(cli, "loop")
    trace = cli("trace", run_id, "--recompute", "--json").json()
    assert trace["blamed_step"] == "improve#2 > draft"
    assert trace["evidence"]["blamed_iteration"] == 2
    assert trace["candidates"][0]["evidence"]["iteration"] == 2
    # iteration 3 kept the draft it was given: the earlier iteration is upstream of it, and explains it
    assert [c["step_id"] for c in trace["candidates"][:2]] == ["improve#2 > draft", "improve#3 > draft"]
    assert "improve#1 > critique" in trace["evidence"]["explanation"]  # an unchecked unit upstream of the blame


def test_stats_of_the_parent_count_blame_inside_a_child_against_the_workflow_step(cli, step_log):
    run_id = _run(cli, "parent")
    assert cli("label", run_id, "--incorrect").exit_code == 0
    stats = cli("stats", "--workflow", "tree-attr-parent", "--json").json()
    assert stats["blamed_distribution"] == {"research": 1.0}
    assert {s["step_id"]: s["blamed"] for s in stats["steps"]} == {"plan": 0, "research": 1, "write": 0, "publish": 0}
