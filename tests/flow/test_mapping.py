"""`for_each:` runs a step once per item of a list known only at run time.

Each instance (``summarize[i]``) has its own records, gates, pause and idempotency key; the step's
output, as consumers and ``show`` see it, is the list of instance outputs in item order. A failing
gate on one instance pauses that instance only: the others finish and the consumer waits.
"""

from __future__ import annotations

import json

import pytest

from tests.flow.conftest import FLOW, executions, keys


def _units(doc):
    return {s["unit"]: s for s in doc["steps"]}


def test_one_failing_instance_pauses_alone_and_its_approval_finishes_the_list_in_order(cli, step_log):
    res = cli("run", str(FLOW / "map.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["status"] == "paused" and doc["paused_steps"] == ["summarize[3]"]
    units = _units(doc)
    assert [units[f"summarize[{i}]"]["status"] for i in range(5)] == [
        "succeeded", "succeeded", "succeeded", "gate_failed", "succeeded"]
    assert units["summarize[3]"]["index"] == 3
    assert "combine" not in units and "summarize" not in units  # the consumer waits; nothing collected yet
    listed = cli("runs", "--json").json()
    assert listed[0]["waiting_steps"] == ["summarize[3]"]

    plain = cli("approve", doc["run_id"], "--step", "summarize", "--json")
    assert plain.exit_code == 2 and "--step 'summarize[3]'" in plain.stderr
    approved = cli("approve", doc["run_id"], "--step", "summarize[3]", "--json")
    assert approved.exit_code == 0, approved.stderr
    done = approved.json()
    assert done["status"] == "succeeded"
    collected = _units(done)["summarize"]
    assert collected["index"] is None and collected["origin"] == "collected"
    assert collected["output"][0] == "document 0 word word" and len(collected["output"]) == 5
    assert done["output"].split(" | ")[3].startswith("document 3 word")
    assert sorted(executions(step_log)) == sorted(
        ["retrieve", "combine", *(f"summarize[{i}]" for i in range(5))])  # approval re-ran nothing


def test_run_names_the_paused_instance_and_its_gate_reason(cli, step_log):
    res = cli("run", str(FLOW / "map.yaml"))
    assert res.exit_code == 3, res.stderr
    paused_lines = [line for line in res.stdout.splitlines() if "paused at" in line]
    assert len(paused_lines) == 1 and "summarize[3]" in paused_lines[0], res.stdout


def test_each_instance_has_its_own_idempotency_key(cli, step_log):
    cli("run", str(FLOW / "map_filtered.yaml"), "--input", "count=4")
    found = keys(step_log)
    instance_keys = [found[u] for u in ("summarize[0]", "summarize[2]")]
    assert all(len(k) == 1 for k in instance_keys) and instance_keys[0] != instance_keys[1]


def test_a_condition_on_item_filters_instances_and_they_contribute_null(cli, step_log):
    res = cli("run", str(FLOW / "map_filtered.yaml"), "--input", "count=4", "--json")
    assert res.exit_code == 0, res.stderr
    units = _units(res.json())
    assert units["summarize[1]"]["status"] == "skipped"
    assert units["summarize[1]"]["skip_reason"] == "when item.id % 2 == 0 was false (item.id = 1)"
    assert units["summarize"]["output"] == ["document 0 word word", None, "document 2 word word", None]
    assert "summarize[1]" not in executions(step_log)


def test_an_empty_list_gives_an_empty_output_and_the_consumers_run(cli, step_log):
    res = cli("run", str(FLOW / "map.yaml"), "--input", "count=0", "--json")
    assert res.exit_code == 0, res.stderr
    assert _units(res.json())["summarize"]["output"] == []
    assert executions(step_log) == ["retrieve", "combine"]


def test_a_value_that_is_not_a_list_fails_the_step_naming_its_type(cli, step_log):
    res = cli("run", str(FLOW / "map_not_list.yaml"), "--json")
    assert res.exit_code == 1
    doc = res.json()
    assert "for_each retrieve.docs is an object, not a list" in doc["error"]
    assert _units(doc)["summarize"]["status"] == "failed"


def test_more_items_than_allowed_fails_the_step_naming_the_count(cli, step_log, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_MAX_ITEMS", "3")
    res = cli("run", str(FLOW / "map.yaml"), "--input", "count=4", "--json")
    assert res.exit_code == 1
    assert "for_each retrieve.docs has 4 items, more than the 3 allowed (ORCHESTRATOR_MAX_ITEMS)" in res.json()["error"]
    assert executions(step_log) == ["retrieve"]


def test_a_workflow_input_can_be_mapped(cli, step_log, tmp_path):
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"docs": [{"text": "a b"}, {"text": "c"}]}))
    res = cli("run", str(FLOW / "map_inputs.yaml"), "--input-file", str(inputs), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "a b | c"


def test_a_failing_instance_fails_the_step_and_names_the_instance(cli, step_log, monkeypatch):
    monkeypatch.setenv("FAIL_ITEM", "2")
    res = cli("run", str(FLOW / "map_filtered.yaml"), "--input", "count=4", "--json")
    assert res.exit_code == 1
    doc = res.json()
    assert "step 'summarize[2]' failed: ValueError: cannot summarise document 2" in doc["error"]
    units = _units(doc)
    assert units["summarize[0]"]["status"] == "succeeded" and units["summarize[2]"]["status"] == "failed"
    assert "summarize" not in units and "combine" not in units


def test_a_condition_that_raises_fails_the_step_with_the_error(cli, step_log):
    res = cli("run", str(FLOW / "when_raises.yaml"), "--input", "ticket=x", "--json")
    assert res.exit_code == 1
    doc = res.json()
    assert "ConditionError: when classify.urgency > 3 raised UndefinedError" in doc["error"]
    assert "Traceback" not in res.stderr


def test_editing_an_instance_at_the_cause_supersedes_the_consumer_never_the_siblings(cli, step_log, tmp_path):
    res = cli("run", str(FLOW / "map_checked.yaml"), "--json")
    assert res.exit_code == 3, res.stderr  # combine's gate fails: 9 words, limit 6
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["combine"]
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps("x"))
    before = executions(step_log)
    edited = cli("edit", run_id, "--step", "summarize[1]", "--output", str(fixed), "--json")
    assert edited.exit_code == 3, edited.stderr  # combine runs again and still fails (7 words)
    doc = edited.json()
    assert executions(step_log)[len(before):] == ["combine"]  # no sibling instance ran again
    units = _units(doc)
    assert units["summarize[1]"]["origin"] == "edited"
    assert units["summarize"]["output"] == ["document 0 word word", "x", "document 2 word word"]
    superseded = {a["unit"] for a in doc["attempts"] if a["superseded"]}
    assert superseded == {"summarize", "combine"}


def test_trace_blames_the_instance_and_stats_count_its_blame_for_the_step(cli, step_log):
    res = cli("run", str(FLOW / "map.yaml"), "--json")
    run_id = res.json()["run_id"]
    assert cli("reject", run_id).exit_code == 1  # the run as a whole (rejecting --step summarize[3] ends the instance)
    labelled = cli("label", run_id, "--incorrect")
    assert labelled.exit_code == 0, labelled.stderr
    traced = cli("trace", run_id, "--json").json()
    assert traced["blamed_step"] == "summarize[3]"
    ranked = [c["step_id"] for c in traced["candidates"]]
    assert ranked[0] == "summarize[3]" and "summarize[0]" in ranked
    assert traced["candidates"][0]["agent"] == "summarize"
    stats = cli("stats", "--workflow", "map", "--json").json()
    assert stats["blamed_distribution"] == {"summarize": 1.0}


def test_reports_count_each_executed_instance_as_a_step_of_the_trajectory(cli, step_log):
    cli("run", str(FLOW / "map_filtered.yaml"), "--input", "count=4")  # 2 instances run, 2 skipped
    doc = cli("report", "--workflow", "map-filtered", "--json").json()
    steps = doc["trajectory_steps"]
    # retrieve, summarize[0], summarize[2], combine: the skipped instances and the collected list are no work
    assert steps["max"] == 4 and steps["min"] == 4


def test_a_mapped_steps_gate_pass_rate_counts_each_instance(cli, step_log):
    cli("run", str(FLOW / "map.yaml"))  # 5 instances, instance 3 fails its gate
    stats = cli("stats", "--workflow", "map", "--json").json()
    summarize = next(s for s in stats["steps"] if s["step_id"] == "summarize")
    assert summarize["runs"] == 1
    assert summarize["gated_runs"] == 5 and summarize["gate_pass_rate"] == 0.8


def test_a_map_whose_lease_is_taken_over_stops_and_writes_nothing_more(cli, step_log, tmp_path, monkeypatch):
    db = tmp_path / "lost.db"
    monkeypatch.setenv("STEAL_LEASE_DB", str(db))
    res = cli("run", str(FLOW / "map_lease_lost.yaml"), "--db", f"sqlite:///{db}", db=False)
    assert res.exit_code != 0 and "Traceback" not in res.stderr
    assert "lease" in res.stderr
    assert executions(step_log) == ["retrieve", "summarize[0]", "summarize[1]"]  # nothing started after the loss
    doc = cli("show", "--db", f"sqlite:///{db}", "--json", cli("runs", "--db", f"sqlite:///{db}", "--json",
                                                              db=False).json()[0]["run_id"], db=False).json()
    assert {s["unit"] for s in doc["steps"]} == {"retrieve", "summarize[0]"}  # instance 1's record was refused


def test_max_parallel_bounds_the_instances_running_at_once(cli, tmp_path, monkeypatch):
    pace_log = tmp_path / "pace.log"
    monkeypatch.setenv("PACE_LOG", str(pace_log))
    monkeypatch.setenv("ITEM_SLEEP", "0.05")
    res = cli("run", str(FLOW / "map_parallel.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == list(range(9))
    running, most, ended = 0, 0, []
    for line in pace_log.read_text().splitlines():
        event, index = line.split()
        running += 1 if event == "begin" else -1
        most = max(most, running)
        if event == "end":
            ended.append(int(index))
    assert most <= 3 and sorted(ended) == list(range(9))


def test_validate_names_a_for_each_that_reads_no_defined_step(cli):
    res = cli("validate", str(FLOW / "bad_for_each_step.yaml"), db=False)
    assert res.exit_code == 2 and "bad_for_each_step.yaml:4" in res.stderr
    assert "step 'summarize' for_each reads step 'retreive', which is not defined" in res.stderr


def test_validate_names_a_for_each_that_reads_an_undeclared_input(cli):
    res = cli("validate", str(FLOW / "bad_for_each_input.yaml"), db=False)
    assert res.exit_code == 2
    assert "step 'summarize' for_each reads workflow input 'docs', which is not declared" in res.stderr


def test_max_parallel_without_for_each_is_refused(cli):
    res = cli("validate", str(FLOW / "bad_max_parallel.yaml"), db=False)
    assert res.exit_code == 2
    assert "max_parallel: bounds the instances of a mapped step; add for_each: (or drop it)" in res.stderr


@pytest.mark.parametrize(("value", "message"), [
    ("many", "ORCHESTRATOR_MAX_ITEMS='many' is not a whole number"),
    ("1e9", "ORCHESTRATOR_MAX_ITEMS='1e9' is not a whole number"),
    ("-1", "ORCHESTRATOR_MAX_ITEMS='-1' must be a whole number from 0 to 1000000"),
    ("2000000", "ORCHESTRATOR_MAX_ITEMS='2000000' must be a whole number from 0 to 1000000"),
])
def test_a_bad_max_items_setting_is_refused_before_the_run_starts(cli, step_log, monkeypatch, value, message):
    monkeypatch.setenv("ORCHESTRATOR_MAX_ITEMS", value)
    res = cli("run", str(FLOW / "map.yaml"), "--json")
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {message}"
    assert executions(step_log) == []
    monkeypatch.delenv("ORCHESTRATOR_MAX_ITEMS")
    assert cli("runs", "--json").json() == []  # nothing stored
