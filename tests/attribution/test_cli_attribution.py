"""The label, trace and attribute commands: stored records, printed answers and exit codes."""

from __future__ import annotations

from tests.attribution.conftest import FIX

CONTRACT = {"run_id", "method", "blamed_step", "confidence", "candidates"}
CANDIDATE = {"step_id", "agent", "credit", "evidence"}


def _run(cli, name: str, *inputs: str) -> str:
    args = [x for pair in inputs for x in ("-i", pair)]
    return cli("run", str(FIX / f"{name}.yaml"), *args, "--json").json()["run_id"]


class TestLabel:
    def test_incorrect_label_prints_the_blamed_step_and_stores_outcome_and_trace(self, cli, store):
        run_id = _run(cli, "no_evaluator")
        result = cli("label", run_id, "--incorrect", "--reason", "wrong vendor", "--reviewer", "ana")
        assert result.exit_code == 0
        assert "labelled run" in result.stdout and "incorrect" in result.stdout
        assert "blamed step:" in result.stdout
        (outcome,) = store.outcomes(run_id)
        assert (outcome.source, outcome.value, outcome.correct, outcome.reviewer, outcome.termination) == \
               ("human", 0.0, False, "ana", "goal_achieved")
        (record,) = store.attributions(run_id)
        assert record.method == "trace" and record.outcome_id == outcome.id

    def test_label_names_the_step_the_trace_blames(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        result = cli("label", run_id, "--incorrect")
        assert result.exit_code == 0
        assert "blamed step: analyze (confidence 0.70)" in result.stdout

    def test_correct_label_traces_nothing(self, cli, store):
        run_id = _run(cli, "no_evaluator")
        assert cli("label", run_id, "--correct").exit_code == 0
        assert store.attributions(run_id) == []
        assert store.outcomes(run_id)[0].correct is True

    def test_reward_label_json(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        doc = cli("label", run_id, "--reward", "0.2", "--json").json()
        assert doc["value"] == 0.2 and doc["correct"] is False and doc["blamed_step"] == "analyze"

    def test_a_reward_is_judged_against_the_workflows_threshold(self, cli, store):
        run_id = _run(cli, "compensated")  # outcome_threshold: 0.9
        doc = cli("label", run_id, "--reward", "0.8", "--json").json()
        assert doc["correct"] is False and doc["attribution_id"] is not None
        assert store.outcomes(run_id)[-1].correct is False

    def test_a_paused_run_cannot_be_labelled(self, cli, store):
        run_id = cli("run", str(FIX / "paused.yaml"), "--json").json()["run_id"]
        before = store.count_rows()
        result = cli("label", run_id, "--incorrect")
        assert result.exit_code == 2 and "only a finished run can be labelled" in result.stderr
        assert store.count_rows() == before

    def test_label_of_an_unknown_run_exits_2(self, cli, store):
        result = cli("label", "r404", "--incorrect")
        assert result.exit_code == 2 and "no run 'r404'" in result.stderr

    def test_label_without_a_verdict_exits_2(self, cli):
        run_id = _run(cli, "no_evaluator")
        result = cli("label", run_id)
        assert result.exit_code == 2 and "--correct, --incorrect or --reward" in result.stderr


class TestTrace:
    def test_trace_json_keeps_the_contract_and_ranks_most_blamed_first(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        doc = cli("trace", run_id, "--json").json()
        assert CONTRACT <= set(doc)
        assert doc["method"] == "trace" and doc["blamed_step"] == "analyze" and doc["run_id"] == run_id
        assert all(CANDIDATE <= set(c) for c in doc["candidates"])
        credits = [c["credit"] for c in doc["candidates"]]
        assert credits == sorted(credits)

    def test_trace_shows_the_stored_record_instead_of_computing_another(self, cli, store):
        run_id = _run(cli, "propagated", "offset=1000")  # the evaluator's incorrect score was traced at once
        assert len(store.attributions(run_id)) == 1
        assert cli("trace", run_id).exit_code == 0
        assert len(store.attributions(run_id)) == 1
        assert cli("trace", run_id, "--recompute").exit_code == 0
        assert len(store.attributions(run_id)) == 2

    def test_trace_prints_the_ranked_steps_and_why(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        shown = cli("trace", run_id)
        assert "blamed step analyze (agent analyst), confidence 0.70" in shown.stdout
        assert "why: step 'analyze' is the earliest step" in shown.stdout

    def test_trace_of_an_unknown_run_exits_2(self, cli, store):
        result = cli("trace", "r404")
        assert result.exit_code == 2 and "no run 'r404'" in result.stderr

    def test_trace_of_a_run_without_outcome_exits_2_and_says_how_to_get_one(self, cli, store):
        run_id = _run(cli, "no_evaluator")
        before = store.count_rows()
        result = cli("trace", run_id)
        assert result.exit_code == 2
        assert "has no outcome to explain" in result.stderr and f"orchestrator label {run_id}" in result.stderr
        assert store.count_rows() == before

    def test_trace_of_a_paused_run_exits_2_until_it_finishes(self, cli):
        result = cli("run", str(FIX / "paused.yaml"), "--json")
        assert result.exit_code == 3
        traced = cli("trace", result.json()["run_id"])
        assert traced.exit_code == 2 and "is paused and has no outcome to explain yet" in traced.stderr

    def test_trace_of_a_failed_run_needs_no_label(self, cli):
        run_id = cli("run", str(FIX / "failing.yaml"), "--json").json()["run_id"]
        doc = cli("trace", run_id, "--json").json()
        assert doc["blamed_step"] == "call_vendor"


class TestAttribute:
    def test_attribute_counterfactual_json(self, cli, store):
        run_id = _run(cli, "propagated", "offset=1000")
        result = cli("attribute", run_id, "--method", "counterfactual", "--json")
        assert result.exit_code == 0
        doc = result.json()
        assert CONTRACT <= set(doc) and doc["method"] == "counterfactual" and doc["blamed_step"] == "analyze"
        assert doc["candidates"][0] == {**doc["candidates"][0], "step_id": "analyze", "agent": "analyst",
                                        "credit": -1.0}
        assert doc["cost"] == 6
        stored = store.attributions(run_id)[-1]
        assert stored.to_json()["candidates"] == doc["candidates"]

    def test_attribute_shapley_by_agent_prints_agents(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        result = cli("attribute", run_id, "-m", "shapley", "--by", "agent")
        assert result.exit_code == 0
        assert "shapley by agent: blamed step analyze (agent analyst)" in result.stdout

    def test_attribute_on_an_unknown_run_exits_2(self, cli, store):
        result = cli("attribute", "r404", "--method", "shapley")
        assert result.exit_code == 2 and "no run 'r404'" in result.stderr

    def test_replay_methods_on_a_workflow_without_evaluator_exit_2(self, cli, store):
        run_id = _run(cli, "no_evaluator")
        before = store.count_rows()
        for method in ("counterfactual", "shapley", "difference"):
            result = cli("attribute", run_id, "--method", method)
            assert result.exit_code == 2
            assert "workflow 'no-evaluator' has no outcome evaluator; add `outcome: module:callable`" in result.stderr
        assert store.count_rows() == before

    def test_bad_arguments_exit_2(self, cli):
        run_id = _run(cli, "propagated", "offset=1000")
        assert cli("attribute", run_id, "--method", "magic").exit_code == 2
        assert cli("attribute", run_id, "--method", "trace", "--by", "agent").exit_code == 2
        assert cli("attribute", run_id, "--method", "shapley", "--samples", "0").exit_code == 2
        assert cli("attribute", run_id).exit_code == 2  # --method is required
