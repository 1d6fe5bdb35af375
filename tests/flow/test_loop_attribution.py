"""A loop's iterations are attribution candidates: the record names the iteration the blame landed on.

loop_blame.yaml revises a list of facts three times; its second iteration drops a fact and the third keeps
the draft it was given, so the final draft is wrong. A warning gate flags iterations 2 and 3; replacing
iteration 2 by the baseline reviser is the one change that fixes the outcome.
"""

from __future__ import annotations

from tests.flow.conftest import FLOW, executions


def _run(cli) -> str:
    res = cli("run", str(FLOW / "loop_blame.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == {"facts": ["price", "delivery"], "polish": 3}
    return str(doc["run_id"])


def test_trace_ranks_iterations_and_blames_the_first_that_went_wrong(cli, step_log):
    run_id = _run(cli)
    trace = cli("trace", run_id, "--json").json()
    assert trace["blamed_step"] == "revise#2"
    ranked = [c["step_id"] for c in trace["candidates"]]
    assert ranked[:2] == ["revise#2", "revise#3"] and {"revise", "revise#1"} <= set(ranked)
    assert trace["candidates"][0]["agent"] == "revise"


def test_counterfactual_replaces_one_iteration_and_replays_the_rest_of_the_loop(cli, step_log):
    run_id = _run(cli)
    before = len(executions(step_log))
    result = cli("attribute", run_id, "--method", "counterfactual", "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["blamed_step"] == "revise#2"
    credits = {c["step_id"]: c["credit"] for c in doc["candidates"]}
    assert credits == {"revise#1": 0.0, "revise#2": -1.0, "revise#3": 0.0}
    top = doc["candidates"][0]
    assert top["evidence"]["reference"] == "baseline" and "replacing step 'revise#2'" in doc["evidence"]["explanation"]
    replay = cli("show", top["evidence"]["replay_run_id"], "--json").json()
    assert (replay["kind"], replay["parent_step"]) == ("counterfactual", "revise#2")
    origins = {s["unit"]: s["origin"] for s in replay["steps"]}
    assert origins["revise#1"] == "reused" and origins["revise#2"] == "baseline"
    assert origins["revise#3"] == "executed"  # it revised the baseline's draft, keeping every fact
    assert replay["output"] == {"facts": ["price", "delivery", "warranty"], "polish": 3}
    # the replays reused every iteration whose inputs and previous draft were unchanged: the step's own code
    # ran once, for iteration 3 after the baseline of iteration 2
    assert executions(step_log)[before:] == ["revise#3"]


def test_shapley_players_are_the_iterations(cli, step_log):
    run_id = _run(cli)
    doc = cli("attribute", run_id, "--method", "shapley", "--json").json()
    assert doc["blamed_step"] == "revise#2"
    credits = {c["step_id"]: round(c["credit"], 6) for c in doc["candidates"]}
    assert credits == {"revise#1": 0.0, "revise#2": -1.0, "revise#3": 0.0}
    assert doc["evidence"]["sum_of_credits"] == -1.0  # v(all) - v(none)


def test_stats_blame_an_iteration_to_its_step_and_judge_each_iteration(cli, step_log):
    _run(cli)
    stats = cli("stats", "--workflow", "loop-blame", "--json").json()
    step = stats["steps"][0]
    assert step["step_id"] == "revise" and step["blamed"] == 1 and stats["blamed_distribution"] == {"revise": 1.0}
    # three iterations (the first passes, the two that lost a fact fail) and the loop's own repeat verdict
    assert (step["gated_runs"], step["gate_pass_rate"]) == (4, 0.5)
    report = cli("report", "--workflow", "loop-blame", "--json").json()
    assert report["trajectory_steps"]["max"] == 3.0  # each iteration executed is a step of the trajectory
