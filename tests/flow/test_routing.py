"""`when:` runs a step only if its condition holds; `join:` says what a skipped upstream step means.

A false condition stores a ``skipped`` record whose reason shows the condition and the values it
read; its consumers are skipped too unless they say ``join: any``; a run whose output step was
skipped succeeds with output null. Conditions are checked by ``validate`` (exit 2, file:line).
"""

from __future__ import annotations

from tests.flow.conftest import FLOW, executions


def _steps(doc):
    return {s["unit"]: s for s in doc["steps"]}


def test_a_false_condition_skips_the_step_with_the_values_it_read(cli, step_log):
    res = cli("run", str(FLOW / "route.yaml"), "--input", "ticket=I was charged twice", "--json")
    assert res.exit_code == 0, res.stderr
    steps = _steps(res.json())
    assert steps["refund"]["status"] == "succeeded"
    assert steps["technical"]["status"] == "skipped"
    assert steps["technical"]["skip_reason"] == (
        "when classify.category == 'technical' and inputs.tier != 'free' was false "
        "(classify.category = 'refund', inputs.tier = 'paid')")
    assert steps["technical"]["index"] is None
    assert executions(step_log) == ["classify", "refund", "reply"]


def test_join_any_runs_with_null_for_the_skipped_branch(cli, step_log):
    res = cli("run", str(FLOW / "route.yaml"), "--input", "ticket=error 42 on login", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == {"policy": None, "fix": "known fix for: error 42 on login"}
    assert _steps(doc)["refund"]["skip_reason"] == ("when classify.category == 'refund' was false "
                                                   "(classify.category = 'technical')")


def test_join_any_is_skipped_when_no_upstream_step_ran_and_the_run_succeeds_with_null(cli, step_log):
    res = cli("run", str(FLOW / "route.yaml"), "--input", "ticket=hello", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["status"] == "succeeded" and doc["output"] is None
    assert _steps(doc)["reply"]["skip_reason"] == "every upstream step was skipped (refund, technical)"
    shown = cli("show", doc["run_id"])
    assert "output: null (the output step reply was skipped: every upstream step was skipped" in shown.stdout


def test_by_default_a_consumer_of_a_skipped_step_is_skipped_too(cli, step_log):
    res = cli("run", str(FLOW / "route_all.yaml"), "--input", "ticket=hello", "--json")
    assert res.exit_code == 0, res.stderr
    assert _steps(res.json())["reply"]["skip_reason"] == "upstream refund was skipped"
    assert executions(step_log) == ["classify"]


def test_a_condition_that_reads_the_inputs_routes_per_run(cli, step_log):
    res = cli("run", str(FLOW / "route.yaml"), "--input", "ticket=error 7", "--input", "tier=free", "--json")
    assert res.exit_code == 0
    assert _steps(res.json())["technical"]["status"] == "skipped"


def test_validate_names_file_line_step_and_the_unknown_name(cli):
    res = cli("validate", str(FLOW / "bad_when_name.yaml"), db=False)
    assert res.exit_code == 2
    assert "bad_when_name.yaml:7" in res.stderr
    assert "step 'refund' when: condition \"clasify.category == 'refund'\" reads 'clasify', which is no step" \
        in res.stderr
    assert "Traceback" not in res.stderr


def test_validate_refuses_a_condition_that_does_not_parse(cli):
    res = cli("validate", str(FLOW / "bad_when_syntax.yaml"), db=False)
    assert res.exit_code == 2
    assert "bad_when_syntax.yaml:9" in res.stderr and "does not parse" in res.stderr


def test_validate_refuses_a_private_attribute(cli):
    res = cli("validate", str(FLOW / "bad_when_attr.yaml"), db=False)
    assert res.exit_code == 2
    assert "reads attribute '__class__': attributes starting with _ are not allowed" in res.stderr


def test_item_and_index_belong_to_mapped_steps(cli):
    res = cli("validate", str(FLOW / "bad_item_unmapped.yaml"), db=False)
    assert res.exit_code == 2
    assert "reads '$item', which only a step with for_each has" in res.stderr


def test_the_steps_a_condition_names_are_dependencies(cli):
    res = cli("validate", str(FLOW / "route.yaml"), db=False)
    assert res.exit_code == 0
    assert "order: classify -> refund -> technical -> reply" in res.stdout


def test_a_routers_choice_is_blamed_and_the_record_says_which_branch_each_replay_took(cli, step_log):
    res = cli("run", str(FLOW / "route_scored.yaml"), "--input", "ticket=I was charged twice", "--json")
    assert res.exit_code == 0 and res.json()["output"]["fix"] is None  # routed to refund: scored incorrect
    run_id = res.json()["run_id"]
    attributed = cli("attribute", run_id, "--method", "counterfactual", "--json")
    assert attributed.exit_code == 0, attributed.stderr
    doc = attributed.json()
    assert doc["blamed_step"] == "classify"
    assert doc["evidence"]["route"] == {"refund": "ran", "technical": "skipped"}
    by_step = {c["step_id"]: c for c in doc["candidates"]}
    assert by_step["classify"]["credit"] == -1.0
    assert by_step["classify"]["evidence"]["route"] == {"refund": "skipped", "technical": "ran"}
    assert by_step["classify"]["evidence"]["route_changed"] == ["refund: ran -> skipped", "technical: skipped -> ran"]
    assert "the replay took another route: refund: ran -> skipped, technical: skipped -> ran" in \
        doc["evidence"]["explanation"]
    replay = cli("show", by_step["classify"]["evidence"]["replay_run_id"], "--json").json()
    assert {s["unit"]: s["status"] for s in replay["steps"]}["refund"] == "skipped"


def test_stats_show_how_often_each_conditional_step_ran(cli, step_log):
    for ticket in ("I was charged twice", "error 12", "error 13", "hello"):
        assert cli("run", str(FLOW / "route.yaml"), "--input", f"ticket={ticket}").exit_code == 0
    doc = cli("stats", "--workflow", "route", "--json").json()
    steps = {s["step_id"]: s for s in doc["steps"]}
    assert (steps["refund"]["runs"], steps["refund"]["skipped_runs"]) == (4, 3)
    assert (steps["technical"]["runs"], steps["technical"]["skipped_runs"]) == (4, 2)
    assert steps["reply"]["skipped_runs"] == 1 and steps["classify"]["skipped_runs"] == 0
    assert steps["refund"]["trend"][-1]["skipped_runs"] == 3
    shown = cli("stats", "--workflow", "route")
    assert "1 ran, 3 skipped" in shown.stdout and "2 ran, 2 skipped" in shown.stdout


def test_a_skipped_branch_is_no_candidate_of_any_method_and_costs_no_replay(cli, step_log):
    """A step that did not run produced nothing a later step consumed: the trace does not list it (not even
    as unchecked), counterfactual spends no replay on it, and it is no Shapley player."""
    res = cli("run", str(FLOW / "route_scored.yaml"), "--input", "ticket=I was charged twice", "--json")
    run_id = res.json()["run_id"]
    traced = cli("trace", run_id, "--json").json()
    assert "technical" not in [c["step_id"] for c in traced["candidates"]]
    assert "technical" not in traced["evidence"]["coverage"]["unchecked"]
    counterfactual = cli("attribute", run_id, "--method", "counterfactual", "--json").json()
    assert sorted(c["step_id"] for c in counterfactual["candidates"]) == ["classify", "refund", "reply"]
    assert len(counterfactual["evidence"]["replays"]) == 3  # one per unit that ran
    shapley = cli("attribute", run_id, "--method", "shapley", "--json").json()
    assert shapley["params"]["players"] == 3
    assert "technical" not in [c["step_id"] for c in shapley["candidates"]]


def test_join_any_counts_a_workflow_input_as_present_so_the_step_runs_when_every_upstream_step_was_skipped(
        cli, step_log):
    res = cli("run", str(FLOW / "route_reads_input.yaml"), "--input", "ticket=hello", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert _steps(doc)["reply"]["status"] == "succeeded"
    assert doc["output"] == {"ticket": "hello", "policy": None, "fix": None}
    assert executions(step_log) == ["classify", "reply"]
