"""The outcome evaluator sees the output, the run's inputs and its reference answer, and says why."""

from __future__ import annotations

import json

import pytest

from orchestrator.bind.evaluation import EvaluatorScoreError, Score, as_score, call_evaluator
from tests.attribution.conftest import FIX

WORKFLOW = (FIX / "side_effects.yaml").read_text().replace("outcome: attr_steps:score",
                                                           "outcome: attr_steps:judged_score")


@pytest.fixture
def judged(tmp_path):
    wf = tmp_path / "judged.yaml"
    wf.write_text(WORKFLOW)
    (tmp_path / "attr_steps.py").write_text((FIX / "attr_steps.py").read_text())
    return wf


@pytest.mark.parametrize("returned, expected", [
    (0.25, Score(score=0.25)), (True, Score(score=1.0)), ((0.5, "half right"), Score(score=0.5, reason="half right")),
    ({"score": 1, "reason": "exact"}, Score(score=1.0, reason="exact")), ({"score": 0.0}, Score(score=0.0)),
    (Score(score=0.75, reason="close"), Score(score=0.75, reason="close")),
])
def test_an_evaluator_may_return_a_number_a_pair_a_dict_or_a_score(returned, expected):
    assert as_score(returned) == expected


@pytest.mark.parametrize("bad", ["0.5", (2.0, "too high"), {"reason": "no score"}, float("nan"), None])
def test_anything_else_is_not_a_score(bad):
    with pytest.raises(EvaluatorScoreError, match="a score is a number in"):
        as_score(bad)


def test_inputs_and_reference_are_passed_only_when_declared():
    seen = {}

    def output_only(output):
        return 1.0

    def everything(output, inputs, reference=None):
        seen.update(inputs=inputs, reference=reference)
        return 1.0

    assert call_evaluator(output_only, {}, inputs={"x": 1}, reference={"a": 1}).score == 1.0
    call_evaluator(everything, {}, inputs={"x": 1}, reference={"a": 1})
    assert seen == {"inputs": {"x": 1}, "reference": {"a": 1}}


def test_run_with_a_reference_stores_the_evaluators_score_and_reason(cli, judged, tmp_path, step_log):
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"answer": 57}))
    doc = cli("run", str(judged), "--reference", str(ref), "--json").json()
    assert doc["reference"] == {"answer": 57}
    [outcome] = doc["outcomes"]
    assert outcome["value"] == 1.0 and outcome["evaluator_reason"] == "answer 57 vs reference 57 for x=7"
    shown = cli("show", doc["run_id"]).stdout
    assert "why: answer 57 vs reference 57 for x=7" in shown


def test_label_reference_scores_the_run_again(cli, judged, tmp_path, step_log):
    doc = cli("run", str(judged), "--json").json()
    assert [o["evaluator_reason"] for o in doc["outcomes"]] == ["no reference answer to compare with"]
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"answer": 7}))
    labelled = cli("label", doc["run_id"], "--reference", str(ref))
    assert labelled.exit_code == 0, labelled.stdout + labelled.stderr
    assert "evaluator score 0.000 incorrect: answer 57 vs reference 7 for x=7" in " ".join(labelled.stdout.split())
    after = cli("show", doc["run_id"], "--json").json()
    assert after["reference"] == {"answer": 7}
    assert [(o["source"], o["value"]) for o in after["outcomes"]] == [("evaluator", 0.5), ("evaluator", 0.0)]
    assert after["outcomes"][1]["evaluator_reason"] == "answer 57 vs reference 7 for x=7"


def test_replays_score_with_the_runs_reference(cli, store, judged, tmp_path, step_log):
    from orchestrator.attribution.methods import fork_run

    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"answer": 7}))
    run_id = cli("run", str(judged), "--reference", str(ref), "--json").json()["run_id"]
    fork = fork_run(store, run_id, "finish", {"value": 7, "quality": 1.0})
    assert fork.value == 1.0
    assert store.outcomes(fork.run_id)[0].evaluator_reason == "answer 7 vs reference 7 for x=7"


def test_a_null_reference_is_refused(cli, judged, tmp_path, step_log):
    run_id = cli("run", str(judged), "--json").json()["run_id"]
    ref = tmp_path / "ref.json"
    ref.write_text("null")
    result = cli("label", run_id, "--reference", str(ref))
    assert result.exit_code == 2 and "reference answer is null" in result.stderr


def test_each_line_of_a_bulk_file_carries_its_own_reference(cli, judged, tmp_path, step_log):
    lines = tmp_path / "many.jsonl"
    lines.write_text("\n".join(json.dumps(line) for line in (
        {"x": 7, "$reference": {"answer": 57}},
        {"x": 7, "reference": {"answer": 8}},  # plain `reference`: the workflow has no input of that name
        {"x": 7},
    )) + "\n")
    batch = cli("run", str(judged), "--input-file", str(lines), "--json")
    assert batch.exit_code == 0, batch.stderr
    reasons = []
    for item in batch.json():
        doc = cli("show", item["run_id"], "--json").json()
        reasons.append((doc["reference"], [o["evaluator_reason"] for o in doc["outcomes"]]))
    assert reasons == [({"answer": 57}, ["answer 57 vs reference 57 for x=7"]),
                       ({"answer": 8}, ["answer 57 vs reference 8 for x=7"]),
                       (None, ["no reference answer to compare with"])]


def test_a_single_input_file_may_carry_the_reference(cli, judged, tmp_path, step_log):
    given = tmp_path / "one.json"
    given.write_text(json.dumps({"x": 7, "$reference": {"answer": 57}}))
    doc = cli("run", str(judged), "--input-file", str(given), "--json").json()
    assert doc["reference"] == {"answer": 57}
    assert [o["evaluator_reason"] for o in doc["outcomes"]] == ["answer 57 vs reference 57 for x=7"]


def test_one_reference_file_for_a_file_of_many_runs_is_refused_before_anything_runs(cli, store, judged, tmp_path,
                                                                                      step_log):
    lines = tmp_path / "many.jsonl"
    lines.write_text('{"x": 7}\n{"x": 8}\n')
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"answer": 57}))
    result = cli("run", str(judged), "--input-file", str(lines), "--reference", str(ref))
    assert result.exit_code == 2
    assert "--reference gives one run's reference answer; in a file of many runs give each line its own " \
           '"$reference" key' in result.stderr
    assert store.list_runs(kind=None) == []
