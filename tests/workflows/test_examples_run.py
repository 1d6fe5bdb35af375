"""The shipped example workflows run end to end through the CLI, offline and deterministic."""

from __future__ import annotations

import json

from tests.conftest import REPO

PROCUREMENT = REPO / "workflows" / "procurement" / "procurement.yaml"
EDIT = REPO / "workflows" / "procurement" / "procurement_edit_correct.json"


def _doc(result):
    return json.loads(result.stdout[result.stdout.index("{"):])


def test_procurement_recommends_the_right_vendor(cli):
    result = cli("run", str(PROCUREMENT), "--json")
    assert result.exit_code == 0
    doc = result.json()
    assert len(doc["steps"]) >= 20
    assert {s["type"] for s in doc["steps"]} >= {"retrieval", "reasoning", "action", "verification", "critic"}
    assert all(s["gates"] for s in doc["steps"]), "every step carries gates"
    assert doc["output"]["vendor_id"] == "V-007"
    assert doc["outcomes"][0]["value"] == 1.0 and doc["outcomes"][0]["source"] == "evaluator"


def test_procurement_fault_pauses_at_the_retrieval_step_not_at_the_end(cli):
    result = cli("run", str(PROCUREMENT), "--input", "inject_fault=true", "--json")
    assert result.exit_code == 3
    doc = result.json()
    assert doc["paused_steps"] == ["retrieve_candidates"]
    executed = [s["step_id"] for s in doc["steps"]]
    assert executed.index("retrieve_candidates") == 3  # step 4


def test_blind_approval_finishes_confidently_wrong(cli):
    run_id = cli("run", str(PROCUREMENT), "--input", "inject_fault=true", "--json").json()["run_id"]
    first = cli("approve", run_id, "--comment", "looks fine to me")
    assert first.exit_code == 3  # the critic catches the mismatch (step N against N+2)
    shown = cli("show", run_id, "--json").json()
    assert shown["paused_steps"] == ["verify_recommendation"]
    second = cli("approve", run_id, "--json")
    assert second.exit_code == 0
    doc = _doc(second)
    assert doc["output"]["vendor_id"] != "V-007"
    assert doc["output"]["confidence"] > 0.9
    assert doc["outcomes"][0]["value"] < 0.5
    assert [r["decision"] for r in doc["reviews"]] == ["approve", "approve"]


def test_editing_in_the_correct_record_finishes_right(cli):
    run_id = cli("run", str(PROCUREMENT), "--input", "inject_fault=true", "--json").json()["run_id"]
    result = cli("edit", run_id, "--output", str(EDIT), "--json")
    assert result.exit_code == 0
    doc = _doc(result)
    assert doc["output"]["vendor_id"] == "V-007"
    assert doc["outcomes"][0]["value"] == 1.0


def test_hello_runs_from_yaml_and_python_alike(cli):
    yaml_doc = cli("run", str(REPO / "workflows" / "hello" / "hello.yaml"), "--input", "name=Ada", "--json").json()
    py_doc = cli("run", str(REPO / "workflows" / "hello" / "hello.py"), "--input", "name=Ada", "--json").json()
    assert yaml_doc["status"] == py_doc["status"] == "succeeded"
    assert yaml_doc["output"] == py_doc["output"]


def test_research_names_an_agent_for_every_step(cli):
    result = cli("run", str(REPO / "workflows" / "research" / "research.yaml"), "--json")
    assert result.exit_code == 0
    doc = result.json()
    agents = {s["agent"] for s in doc["steps"]}
    assert {"planner", "researcher", "writer"} <= agents
    assert sum(1 for s in doc["steps"] if s["agent"] == "researcher") >= 2
