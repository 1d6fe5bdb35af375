"""`repeat:` runs a step again until its condition holds, at most `max` times.

Each iteration (``draft#2``) has its own records, gates, pause and idempotency key; consumers read the
last iteration's output, from the loop's own record. Reaching `max` with `until` still false fails the
loop's gate `repeat`, which pauses the run by default: approve accepts the last iteration, edit replaces
it, retry runs a new round of up to `max` more iterations.
"""

from __future__ import annotations

import json

import pytest

from tests.flow.conftest import FLOW, executions, keys


def _units(doc):
    return {s["unit"]: s for s in doc["steps"]}


def test_a_loop_ends_when_until_holds_and_its_consumer_reads_the_last_iteration(cli, step_log):
    res = cli("run", str(FLOW / "loop.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    units = _units(doc)
    assert [(u, s["iteration"], s["index"]) for u, s in units.items() if s["step_id"] == "draft"] == [
        ("draft", None, None), ("draft#1", 1, None), ("draft#2", 2, None), ("draft#3", 3, None)]
    loop = units["draft"]
    assert loop["output"] == units["draft#3"]["output"] == {"text": "essay v3", "score": 0.9, "revises": "essay v2"}
    assert [(g["gate"], g["passed"], g["reason"]) for g in loop["gates"]] == [
        ("repeat", True, "until output.score >= inputs.target held after 3 iterations")]
    assert units["draft#1"]["output"]["revises"] is None  # $previous is null on the first iteration
    assert units["draft#2"]["inputs"]["previous"] == {"$record": units["draft#1"]["record_id"]}
    assert units["draft#2"]["inputs"]["iteration"] == 2
    assert doc["output"] == "ESSAY V3"
    assert executions(step_log) == ["draft#1", "draft#2", "draft#3", "publish"]
    assert len({k for u in ("draft#1", "draft#2", "draft#3") for k in keys(step_log)[u]}) == 3  # a key each


def test_reaching_max_pauses_at_the_repeat_gate_and_approve_accepts_the_last_iteration(cli, step_log):
    res = cli("run", str(FLOW / "loop.yaml"), "--input", "target=5", "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["draft"]
    loop = _units(doc)["draft"]
    assert loop["status"] == "gate_failed"
    assert [(g["gate"], g["passed"], g["reason"]) for g in loop["gates"]] == [
        ("repeat", False, "until output.score >= inputs.target still false after 4 iterations")]
    listed = cli("runs", "--json").json()[0]
    assert listed["waiting_steps"] == ["draft"]
    assert listed["gate_reason"] == "until output.score >= inputs.target still false after 4 iterations"

    approved = cli("approve", doc["run_id"], "--json")
    assert approved.exit_code == 0, approved.stderr
    assert approved.json()["output"] == "ESSAY V4"
    assert executions(step_log) == ["draft#1", "draft#2", "draft#3", "draft#4", "publish"]  # nothing ran again


def test_edit_replaces_the_output_of_a_loop_that_reached_max(cli, step_log, tmp_path):
    run_id = cli("run", str(FLOW / "loop.yaml"), "--input", "target=5", "--json").json()["run_id"]
    replacement = tmp_path / "draft.json"
    replacement.write_text(json.dumps({"text": "written by hand", "score": 1.0, "revises": "essay v4"}))
    edited = cli("edit", run_id, "--output", str(replacement), "--json")
    assert edited.exit_code == 0, edited.stderr
    doc = edited.json()
    assert doc["output"] == "WRITTEN BY HAND"
    assert _units(doc)["draft"]["origin"] == "edited"
    assert executions(step_log) == ["draft#1", "draft#2", "draft#3", "draft#4", "publish"]


def test_retry_runs_a_new_round_of_up_to_max_iterations_numbered_on(cli, step_log):
    run_id = cli("run", str(FLOW / "loop.yaml"), "--input", "target=2", "--json").json()["run_id"]
    retried = cli("retry", run_id, "--comment", "keep going", "--json")
    assert retried.exit_code == 0, retried.stderr
    doc = retried.json()
    units = _units(doc)
    assert [u for u in units if u.startswith("draft#")] == [f"draft#{n}" for n in range(1, 8)]
    assert units["draft#5"]["output"]["revises"] == "essay v4"  # the new round goes on from the last iteration
    assert units["draft"]["attempt"] == 2
    assert units["draft"]["gates"][0]["reason"] == "until output.score >= inputs.target held after 7 iterations"
    assert doc["output"] == "ESSAY V7"
    assert executions(step_log) == [*(f"draft#{n}" for n in range(1, 8)), "publish"]  # each iteration once


def test_a_round_that_reaches_max_again_pauses_again_counting_every_iteration(cli, step_log):
    run_id = cli("run", str(FLOW / "loop.yaml"), "--input", "target=5", "--json").json()["run_id"]
    again = cli("retry", run_id, "--json")
    assert again.exit_code == 3, again.stderr
    loop = _units(again.json())["draft"]
    assert loop["gates"][0]["reason"] == "until output.score >= inputs.target still false after 8 iterations"
    assert executions(step_log) == [f"draft#{n}" for n in range(1, 9)]


def test_a_gate_that_fails_one_iteration_pauses_that_iteration_and_the_loop_goes_on_after_approval(cli, step_log):
    res = cli("run", str(FLOW / "loop_gated.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["draft#2"]
    assert "draft" not in _units(doc) and "publish" not in _units(doc)
    plain = cli("approve", doc["run_id"], "--step", "draft")
    assert plain.exit_code == 2 and "--step 'draft#2'" in plain.stderr
    approved = cli("approve", doc["run_id"], "--step", "draft#2", "--json")
    assert approved.exit_code == 0, approved.stderr
    done = approved.json()
    assert done["output"] == "ESSAY V3"
    assert _units(done)["draft#2"]["origin"] == "approved"
    assert executions(step_log) == ["draft#1", "draft#2", "draft#3", "publish"]


def test_editing_a_completed_iteration_supersedes_the_later_ones_and_the_loop_goes_on_from_it(cli, step_log,
                                                                                               tmp_path):
    run_id = cli("run", str(FLOW / "loop.yaml"), "--input", "target=5", "--json").json()["run_id"]
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps({"text": "good enough", "score": 9, "revises": "essay v1"}))
    edited = cli("edit", run_id, "--step", "draft#2", "--output", str(fixed), "--json")
    assert edited.exit_code == 0, edited.stderr
    doc = edited.json()
    assert doc["output"] == "GOOD ENOUGH"  # until holds for the edited iteration: the loop ends there
    superseded = sorted(a["unit"] for a in doc["attempts"] if a["superseded"])
    assert superseded == ["draft", "draft#3", "draft#4"]
    assert executions(step_log) == ["draft#1", "draft#2", "draft#3", "draft#4", "publish"]


def test_a_mapped_step_loops_per_instance_and_one_instance_reaching_max_pauses_alone(cli, step_log, tmp_path):
    items = tmp_path / "items.json"
    items.write_text(json.dumps({"items": [{"name": "a", "target": 0.5}, {"name": "b", "target": 5},
                                           {"name": "c", "target": 0.3}]}))
    res = cli("run", str(FLOW / "loop_mapped.yaml"), "--input-file", str(items), "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["draft[1]"]
    units = _units(doc)
    assert [(u, units[u]["index"], units[u]["iteration"]) for u in ("draft[0]#1", "draft[0]#2", "draft[0]")] == [
        ("draft[0]#1", 0, 1), ("draft[0]#2", 0, 2), ("draft[0]", 0, None)]
    assert units["draft[1]"]["gates"][0]["reason"] == "until output.score >= item.target still false after 3 iterations"
    assert "draft[2]#2" not in units
    approved = cli("approve", doc["run_id"], "--step", "draft[1]", "--json")
    assert approved.exit_code == 0, approved.stderr
    assert approved.json()["output"] == "a v2 | b v3 | c v1"
    assert sorted(executions(step_log)) == sorted(
        ["draft[0]#1", "draft[0]#2", "draft[1]#1", "draft[1]#2", "draft[1]#3", "draft[2]#1", "publish"])


def test_on_gate_fail_fail_fails_the_run_when_max_comes_first(cli, step_log, tmp_path):
    path = _variant(tmp_path, "max: 4}", "max: 2}\n    on_gate_fail: fail")
    res = cli("run", str(path), "--json")
    assert res.exit_code == 1
    doc = res.json()
    assert doc["status"] == "failed"
    assert "until output.score >= inputs.target still false after 2 iterations" in doc["error"]
    assert executions(step_log) == ["draft#1", "draft#2"]


def _variant(tmp_path, old: str, new: str):
    """loop.yaml with one line changed, next to a copy of its step module."""
    (tmp_path / "loop_steps.py").write_text((FLOW / "loop_steps.py").read_text())
    path = tmp_path / "variant.yaml"
    text = (FLOW / "loop.yaml").read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_on_gate_fail_warn_records_the_verdict_and_goes_on_with_the_last_iteration(cli, step_log, tmp_path):
    path = _variant(tmp_path, "max: 4}", "max: 2}\n    on_gate_fail: warn")
    res = cli("run", str(path), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == "ESSAY V2"
    loop = _units(doc)["draft"]
    assert loop["status"] == "succeeded" and loop["gates"][0]["passed"] is False
    assert loop["gates"][0]["details"]["values"] == "output.score = 0.6, inputs.target = 0.8"


def test_an_until_that_raises_fails_the_step_with_its_error(cli, step_log, tmp_path):
    path = _variant(tmp_path, 'until: "output.score >= inputs.target"', 'until: "output.missing.deeper"')
    res = cli("run", str(path), "--json")
    assert res.exit_code == 1
    doc = res.json()
    assert doc["status"] == "failed" and "repeat until output.missing.deeper raised" in doc["error"]
    assert executions(step_log) == ["draft#1"]


def test_show_lists_the_iterations_under_their_loop(cli, step_log):
    run_id = cli("run", str(FLOW / "loop.yaml"), "--input", "target=5", "--json").json()["run_id"]
    shown = cli("show", run_id)
    assert shown.exit_code == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "draft" in line and "│" in line]
    assert [line.split("│")[1].strip() for line in lines] == ["draft", "draft#1", "draft#2", "draft#3", "draft#4"]
    assert "draft / repeat: until output.score >= inputs.target still false after 4 iterations" in shown.stdout


def test_validate_names_the_file_line_step_and_name_of_each_bad_loop(cli):
    res = cli("validate", str(FLOW / "bad_repeat.yaml"), db=False)
    assert res.exit_code == 2
    errors = res.stderr.strip().splitlines()
    assert any(":8: steps.draft.repeat.until:" in e and "'threshold'" in e for e in errors), errors
    assert any(":12: steps.twice.repeat.until:" in e and "does not parse" in e for e in errors), errors
    assert any(":16: steps.itself.repeat.until:" in e and "its output is `output`" in e for e in errors), errors
    assert any(":19: steps.plain.inputs.previous:" in e and "'$previous', which only a step with repeat: has" in e
               for e in errors), errors
    bad_max = cli("validate", str(FLOW / "bad_repeat_max.yaml"), db=False)
    assert bad_max.exit_code == 2 and ":6: steps.draft.repeat.max:" in bad_max.stderr
    assert "less than or equal to 100" in bad_max.stderr
    cycle = cli("validate", str(FLOW / "cycle.yaml"), db=False)
    assert cycle.exit_code == 2
    assert "cycle: draft -> critique -> draft" in cycle.stderr and "repeat: {until: EXPR, max: N}" in cycle.stderr


def test_a_loop_without_max_is_refused(cli, tmp_path):
    res = cli("validate", str(_variant(tmp_path, ", max: 4}", "}")), db=False)
    assert res.exit_code == 2 and "steps.draft.repeat.max: missing required key 'max'" in res.stderr


def test_the_python_twin_gives_an_equal_spec_and_hash():
    from orchestrator.bind.loader import load_workflow

    yaml_twin, python_twin = load_workflow(FLOW / "loop.yaml"), load_workflow(FLOW / "loop_py.py")
    assert python_twin.spec == yaml_twin.spec and python_twin.content_hash == yaml_twin.content_hash


def test_the_python_api_names_iterations_and_decides_the_loop(db_url, step_log):
    from orchestrator import Orchestrator

    with Orchestrator(db_url, reviewer="ann") as orch:
        run = orch.run(FLOW / "loop.yaml", {"target": 5})
        assert run.status == "paused" and run.paused_steps == ["draft"]
        assert run.step("draft").gates[0].reason == "until output.score >= inputs.target still false after 4 iterations"
        assert (run.step("draft#2").iteration, run.step("draft#2").unit) == (2, "draft#2")
        done = orch.approve(run.run_id, step="draft")
        assert done.status == "succeeded" and done.output == "ESSAY V4"


def test_a_field_the_previous_iteration_lacks_fails_that_iteration_naming_the_input_and_field(cli, step_log):
    res = cli("run", str(FLOW / "loop_missing_field.yaml"), "--json")
    assert res.exit_code == 1
    doc = res.json()
    failed = {s["unit"]: s for s in doc["steps"]}["draft#2"]
    assert failed["status"] == "failed"
    assert failed["error"] == ("InputError: input 'previous' of step 'draft#2': the previous iteration's output has "
                               "no field 'summary'")
    assert executions(step_log) == ["draft#1"]


def test_a_field_an_upstream_output_lacks_fails_the_consumer_naming_the_input_and_field(cli, step_log):
    res = cli("run", str(FLOW / "missing_field.yaml"), "--json")
    assert res.exit_code == 1
    failed = {s["unit"]: s for s in res.json()["steps"]}["combine"]
    assert failed["error"] == ("InputError: input 'summaries' of step 'combine': the upstream output has no field "
                               "'summaries'")
    assert executions(step_log) == ["retrieve"]


@pytest.mark.parametrize("name", ["loop_implicit_required.yaml", "loop_implicit_defaults.yaml"])
def test_a_loop_function_declaring_previous_and_iteration_gets_them_without_inputs(cli, name):
    assert cli("validate", str(FLOW / name), db=False).exit_code == 0
    res = cli("run", str(FLOW / name), "--json")
    assert res.exit_code == 0, res.stderr
    units = _units(res.json())
    assert [units[f"draft#{n}"]["output"] for n in (1, 2, 3)] == [
        {"text": "essay v1", "score": 0.3, "revises": None},
        {"text": "essay v2", "score": 0.6, "revises": "essay v1"},
        {"text": "essay v3", "score": 0.9, "revises": "essay v2"}]
    assert units["draft#2"]["inputs"]["previous"] == {"$record": units["draft#1"]["record_id"]}
    assert units["draft#2"]["inputs"]["iteration"] == 2


def test_a_function_off_a_loop_declaring_previous_is_still_refused(cli, tmp_path):
    loop = '    repeat: {until: "output.score >= 0.8", max: 4}\n'
    spec = (FLOW / "loop_implicit_required.yaml").read_text().replace(loop, "")
    path = tmp_path / "no_loop.yaml"
    path.write_text(spec)
    (tmp_path / "loop_steps.py").write_text((FLOW / "loop_steps.py").read_text())
    res = cli("validate", str(path), db=False)
    assert res.exit_code == 2
    assert "parameter 'previous' of loop_steps:draft_required(brief, previous, iteration) is not given" in res.stderr
