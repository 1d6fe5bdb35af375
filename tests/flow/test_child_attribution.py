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

from orchestrator.store import open_store
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


def _attribute(cli: Any, run_id: str, method: str) -> dict[str, Any]:
    res = cli("attribute", run_id, "--method", method, "--json")
    assert res.exit_code == 0, res.stderr
    return dict(res.json())


def test_counterfactual_on_a_child_step_replays_the_child_then_the_parent_and_shows_the_flip(cli, step_log):
    run_id = _run(cli, "parent")
    child_run = cli("show", run_id, "--json").json()["children"][0]["run_id"]
    before = len(_lines(step_log))
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] == "research > retrieve"
    credits = {c["step_id"]: c["credit"] for c in doc["candidates"]}
    assert credits == {"plan": 0.0, "research > retrieve": -1.0, "research > summarize": 0.0, "write": 0.0,
                       "publish": 0.0}
    top = doc["candidates"][0]
    assert (top["evidence"]["reference"], top["evidence"]["value_actual"], top["evidence"]["value_with_reference"]) \
        == ("baseline", 0.0, 1.0)
    assert top["evidence"]["run_id"] == child_run
    # the child replayed first: its retrieve took the baseline, its summarize ran on the three facts
    child_replay = cli("show", top["evidence"]["child_replays"]["research"], "--json").json()
    assert (child_replay["kind"], child_replay["parent_run_id"]) == ("counterfactual", child_run)
    assert {s["unit"]: s["origin"] for s in child_replay["steps"]} == {"retrieve": "baseline", "summarize": "executed"}
    # then the parent, from the child's step on: plan reused, research took the child replay's output
    replay = cli("show", top["evidence"]["replay_run_id"], "--json").json()
    assert (replay["kind"], replay["parent_step"]) == ("counterfactual", "research > retrieve")
    assert {s["unit"]: s["origin"] for s in replay["steps"]} == {
        "plan": "reused", "research": "replayed", "write": "executed", "publish": "simulated"}
    assert replay["output"]["facts"] == 3
    assert "replacing step 'research > retrieve' by its baseline raises the outcome from 0.000 to 1.000" in \
        doc["evidence"]["explanation"]
    # no replay published anything: the side-effecting step only ever ran its dry run
    replayed = _lines(step_log)[before:]
    assert "tree-attr-parent.publish" not in replayed and "tree-attr-parent.publish(dry run)" in replayed
    assert "tree-attr-research.retrieve" not in replayed  # the child's own retrieve never ran again
    shown = cli("attribute", run_id, "--method", "counterfactual")
    assert "research > retrieve" in shown.stdout


def test_shapley_players_reach_into_the_child(cli, step_log):
    run_id = _run(cli, "parent")
    doc = _attribute(cli, run_id, "shapley")
    assert doc["blamed_step"] == "research > retrieve"
    credits = {c["step_id"]: round(c["credit"], 6) for c in doc["candidates"]}
    assert credits["research > retrieve"] == -1.0 and doc["evidence"]["sum_of_credits"] == -1.0
    assert set(credits) == {"plan", "research > retrieve", "research > summarize", "write", "publish"}
    difference = _attribute(cli, run_id, "difference")
    assert difference["blamed_step"] == "research > retrieve" and difference["candidates"][0]["credit"] == -1.0
    by_agent = cli("attribute", run_id, "--method", "shapley", "--by", "agent", "--json").json()
    assert by_agent["evidence"]["blamed_agent"] == "retrieve" and by_agent["blamed_step"] == "research > retrieve"


def test_counterfactual_blames_one_child_of_a_map_and_replays_only_that_child(cli, step_log):
    run_id = _run(cli, "map")
    before = len(_lines(step_log))
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] == "per_ticket[1] > classify"
    top = doc["candidates"][0]
    assert top["credit"] == -1.0 and list(top["evidence"]["child_replays"]) == ["per_ticket[1]"]
    paths = {c["step_id"] for c in doc["candidates"]}
    assert {"per_ticket[0] > classify", "per_ticket[2] > answer", "tickets", "combine"} <= paths
    replay = cli("show", top["evidence"]["replay_run_id"], "--json").json()
    origins = {s["unit"]: s["origin"] for s in replay["steps"]}
    assert (origins["per_ticket[0]"], origins["per_ticket[1]"], origins["per_ticket[2]"]) == \
        ("reused", "replayed", "reused")
    assert replay["output"] == ["ticket 0: billing", "ticket 1: billing", "ticket 2: billing"]
    # the siblings' child runs were never replayed for it, and no original classify ran again
    assert "tree-attr-triage.classify" not in _lines(step_log)[before:]


def test_counterfactual_through_a_loop_of_children_says_which_iteration(cli, step_log):
    run_id = _run(cli, "loop")
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] == "improve#2 > draft"
    assert doc["evidence"]["blamed_iteration"] == 2 and doc["candidates"][0]["evidence"]["iteration"] == 2
    # the round after it replayed its child too (its previous draft changed), and kept the citation
    top = doc["candidates"][0]
    assert set(top["evidence"]["child_replays"]) == {"improve#2", "improve#3"}
    assert cli("show", top["evidence"]["replay_run_id"], "--json").json()["output"]["cited"] is True


def test_a_side_effecting_step_inside_the_child_blocks_the_replay_by_its_path(cli, step_log):
    run_id = _run(cli, "blocked")
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] is None
    by_step = {c["step_id"]: c for c in doc["candidates"]}
    assert by_step["research > retrieve"]["evidence"]["blocked_by"] == "research > archive"
    assert "blocked by research > archive: side-effecting step with changed inputs and no simulate" in \
        doc["evidence"]["explanation"]
    assert _lines(step_log).count("tree-attr-archiving.archive") == 1  # the original run's, never a replay's


def test_instances_of_a_mapped_step_are_candidates_and_players(cli, step_log):
    run_id = _run(cli, "items")
    before = len(_lines(step_log))
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] == "classify[1]"
    assert [c["step_id"] for c in doc["candidates"]] == ["classify[1]", "tickets", "classify[0]", "classify[2]",
                                                         "combine"]
    replay = cli("show", doc["candidates"][0]["evidence"]["replay_run_id"], "--json").json()
    origins = {s["unit"]: s["origin"] for s in replay["steps"]}
    assert (origins["classify[0]"], origins["classify[1]"], origins["classify[2]"]) == ("reused", "baseline", "reused")
    assert "tree-attr-items.classify[0]" not in _lines(step_log)[before:]
    shapley = _attribute(cli, run_id, "shapley")
    assert shapley["blamed_step"] == "classify[1]"
    assert {c["step_id"]: round(c["credit"], 6) for c in shapley["candidates"]}["classify[1]"] == -1.0


def test_stats_of_a_child_workflow_count_its_runs_alone_and_as_child_runs(cli, step_log):
    _run(cli, "map")  # three child runs of tree-attr-triage
    alone = cli("run", str(FLOW / "tree_attr_triage.yaml"), "--input", "ticket=ticket 9", "--json")
    assert alone.exit_code == 0, alone.stderr
    stats = cli("stats", "--workflow", "tree-attr-triage", "--json").json()
    assert stats["runs"] == 4
    assert {s["step_id"]: s["runs"] for s in stats["steps"]} == {"classify": 4, "answer": 4}
    classify = stats["steps"][0]
    assert (classify["gated_runs"], classify["gate_pass_rate"]) == (4, 0.75)  # ticket 1's child misfiled it


def test_stats_expand_lists_the_child_steps_beneath_the_workflow_step(cli, step_log):
    for _ in range(2):
        _run(cli, "map")  # scored incorrect: each run's automatic trace blames per_ticket[1] > classify
    plain = cli("stats", "--workflow", "tree-attr-map", "--json").json()
    assert [s["step_id"] for s in plain["steps"]] == ["tickets", "per_ticket", "combine"]
    assert all("steps" not in s for s in plain["steps"])  # the JSON of before, key for key
    doc = cli("stats", "--workflow", "tree-attr-map", "--expand", "--json").json()
    per_ticket = doc["steps"][1]
    assert (per_ticket["step_id"], per_ticket["runs"], per_ticket["blamed"]) == ("per_ticket", 2, 2)
    rows = {s["step_id"]: s for s in per_ticket["steps"]}
    assert list(rows) == ["per_ticket > classify", "per_ticket > answer"]
    classify = rows["per_ticket > classify"]
    assert (classify["runs"], classify["gated_runs"], classify["gate_pass_rate"]) == (6, 6, 0.6667)
    assert (classify["blamed"], classify["blamed_share"], classify["agent"]) == (2, 1.0, "classify")
    assert rows["per_ticket > answer"]["blamed"] == 0
    assert doc["blamed_distribution"] == {"per_ticket": 1.0}
    assert [s.get("steps") for s in doc["steps"] if s["step_id"] != "per_ticket"] == [None, None]
    shown = cli("stats", "--workflow", "tree-attr-map", "--expand").stdout
    lines = [line for line in shown.splitlines() if line.startswith("│") and "per_ticket" in line]
    assert [line.split("│")[1].strip() for line in lines] == ["per_ticket", "per_ticket > classify",
                                                             "per_ticket > answer"]
    assert "per_ticket > classify" not in cli("stats", "--workflow", "tree-attr-map").stdout


def test_a_grandchild_step_is_blamed_by_its_whole_path(cli, step_log):
    run_id = _run(cli, "nested")  # tree_attr_parent.yaml as the child ``outer``, research its grandchild
    assert cli("trace", run_id, "--json").json()["blamed_step"] == "outer > research > retrieve"
    before = len(_lines(step_log))
    doc = _attribute(cli, run_id, "counterfactual")
    assert doc["blamed_step"] == "outer > research > retrieve" and doc["candidates"][0]["credit"] == -1.0
    assert "tree-attr-parent.publish" not in _lines(step_log)[before:]
    stats = cli("stats", "--workflow", "tree-attr-nested", "--expand", "--json").json()
    rows = {s["step_id"]: s["blamed"] for s in stats["steps"][0]["steps"]}
    assert rows == {"outer > plan": 0, "outer > research": 1, "outer > write": 0, "outer > publish": 0}


def test_a_fork_from_a_child_step_replays_the_child_from_it_then_the_parent(cli, step_log, tmp_path):
    run_id = _run(cli, "parent")
    given = tmp_path / "found.json"
    given.write_text('{"findings": ["a", "b", "c"]}')
    before = len(_lines(step_log))
    fork = cli("replay", run_id, "--from", "research > retrieve", "--output", str(given), "--json")
    assert fork.exit_code == 0, fork.stderr
    doc = fork.json()
    assert doc["output"] == {"report": "report: a; b; c", "facts": 3, "published": True}
    shown = cli("show", doc["run_id"], "--json").json()
    assert (shown["kind"], shown["parent_run_id"], shown["parent_step"]) == ("replay", run_id, "research > retrieve")
    assert {s["unit"]: s["origin"] for s in shown["steps"]} == {
        "plan": "reused", "research": "replayed", "write": "executed", "publish": "simulated"}
    assert _lines(step_log)[before:] == ["tree-attr-research.summarize", "tree-attr-parent.write",
                                         "tree-attr-parent.publish(dry run)"]
    again = cli("replay", run_id, "--from", "research > retrieve", "--json")  # re-executed from the child step
    assert again.exit_code == 0 and _lines(step_log)[-4] == "tree-attr-research.retrieve"
    missing = cli("replay", run_id, "--from", "plan > retrieve")
    assert missing.exit_code == 2
    assert "unit 'plan' of run" in missing.stderr and "started no child run" in missing.stderr
    unknown = cli("replay", run_id, "--from", "research > nope")
    assert unknown.exit_code == 2 and "workflow 'tree-attr-research' has no step 'nope'" in unknown.stderr


def test_a_replay_starts_the_child_run_a_misrouted_original_never_started(cli, step_log):
    """route_child.yaml routes a charge to ``refund`` (wrong: the evaluator wants a fix); the right branch,
    ``technical``, is a child run the original never started. The counterfactual world may start it: the
    router is blamed, and the replay's child run is linked to the unit that would have started it."""
    res = cli("run", str(FLOW / "route_child.yaml"), "--input", "ticket=I was charged twice", "--json")
    assert res.exit_code == 0, res.stderr
    run_id = res.json()["run_id"]
    attributed = cli("attribute", run_id, "--method", "counterfactual", "--json")
    assert attributed.exit_code == 0, attributed.stderr
    doc = attributed.json()
    assert doc["blamed_step"] == "classify"
    by_step = {c["step_id"]: c for c in doc["candidates"]}
    assert by_step["classify"]["credit"] == -1.0 and "blocked_by" not in by_step["classify"]["evidence"]
    assert "technical" not in by_step  # it did not run in the original
    replay = cli("show", by_step["classify"]["evidence"]["replay_run_id"], "--json").json()
    assert {s["unit"]: s["status"] for s in replay["steps"]}["technical"] == "succeeded"
    children = cli("runs", "--kind", "counterfactual", "--json").json()
    started = [r for r in children if r["workflow"] == "route-child-tech"]
    assert len(started) == 1
    child = cli("show", started[0]["run_id"], "--json").json()
    assert (child["parent_run_id"], child["parent_step"]) == (run_id, "technical")
    assert {s["unit"]: s["origin"] for s in child["steps"]} == {"lookup": "executed", "notify": "simulated"}


def test_a_step_that_acts_inside_a_child_the_original_never_started_blocks_by_its_path(cli, step_log):
    res = cli("run", str(FLOW / "route_child_acting.yaml"), "--input", "ticket=I was charged twice", "--json")
    run_id = res.json()["run_id"]
    doc = cli("attribute", run_id, "--method", "counterfactual", "--json").json()
    classify = {c["step_id"]: c for c in doc["candidates"]}["classify"]
    assert classify["evidence"]["blocked_by"] == "technical > notify"
    assert "never ran in the original run" in classify["evidence"]["blocked_reason"]


EXECUTING = {"executed", "baseline", "resampled", "simulated"}
"""Origins of a record whose output a replay paid for (the rest were reused, cached, replaced or edited)."""


def test_a_coalition_whose_replay_executes_nothing_new_is_no_stored_run_and_the_cost_counts_what_was(
        cli, db_url, step_log):
    res = cli("run", str(FLOW / "tree_attr_items.yaml"), "--input", "count=5", "--json")
    assert res.exit_code == 0, res.stderr
    run_id = res.json()["run_id"]  # players: tickets, classify[0] .. classify[4], combine
    store = open_store(db_url)
    before = store.count_rows()
    doc = _attribute(cli, run_id, "shapley")
    after = store.count_rows()
    assert doc["params"]["exact"] is True and doc["evidence"]["coalitions_evaluated"] == 2 ** 7
    assert doc["blamed_step"] == "classify[1]"
    stored = doc["evidence"]["stored"]
    assert stored == {"replay_runs": after["runs"] - before["runs"],
                      "step_records": after["step_records"] - before["step_records"]}
    replays = [r for r in store.child_runs(run_id) if r.kind == "counterfactual"]
    assert len(replays) == stored["replay_runs"] <= doc["cost"]  # 128 coalitions, a handful of them executed
    for replay in replays:  # each stored replay executed something the cache did not know
        assert EXECUTING & {r.origin for r in store.step_records(replay.run_id)}, replay.run_id
    shown = cli("attribute", run_id, "--method", "shapley")  # a new attribution pays the same again
    assert (f"cost: {doc['cost']} step executions; {stored['replay_runs']} replay runs stored "
            f"({stored['step_records']} step records)") in shown.stdout


def test_replays_of_a_map_of_children_store_only_what_executed_and_say_so(cli, db_url, step_log):
    run_id = _run(cli, "map")
    store = open_store(db_url)
    before = store.count_rows()
    doc = _attribute(cli, run_id, "shapley")
    after = store.count_rows()
    assert doc["blamed_step"] == "per_ticket[1] > classify"
    assert doc["evidence"]["stored"] == {"replay_runs": after["runs"] - before["runs"],
                                         "step_records": after["step_records"] - before["step_records"]}
    assert doc["evidence"]["stored"]["replay_runs"] < doc["evidence"]["coalitions_evaluated"]
