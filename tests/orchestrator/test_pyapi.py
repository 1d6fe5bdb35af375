"""Workflows defined in Python load into the same spec as YAML and give the same results."""

from __future__ import annotations

from orchestrator.bind.loader import load_workflow
from tests.conftest import FIXTURES


def test_python_and_yaml_definitions_give_equal_specs():
    from_yaml = load_workflow(FIXTURES / "ok.yaml")
    from_python = load_workflow(FIXTURES / "py_ok.py")
    assert from_python.definition == from_yaml.definition
    assert from_python.content_hash == from_yaml.content_hash
    assert from_python.spec == from_yaml.spec


def test_python_and_yaml_definitions_give_equal_results(cli):
    yaml_doc = cli("run", str(FIXTURES / "ok.yaml"), "--input", "x=4", "--json").json()
    py_doc = cli("run", str(FIXTURES / "py_ok.py"), "--input", "x=4", "--json").json()
    assert yaml_doc["output"] == py_doc["output"] == 20
    strip = ("started_at", "ended_at", "duration", "record_id", "consumed", "inputs")

    def by_step(doc):  # concurrent branches (left, right) finish in either order
        return sorted(({k: v for k, v in s.items() if k not in strip} for s in doc["steps"]),
                      key=lambda s: s["step_id"])

    assert by_step(yaml_doc) == by_step(py_doc)


def test_inputs_are_inferred_from_parameter_names():
    spec = load_workflow(FIXTURES / "py_inferred.py").spec
    assert spec.step("greet").inputs == {"name": "$inputs.name"}
    assert spec.step("length").inputs == {"greet": "greet", "shout": "shout"}
    assert spec.step("greet").type == "retrieval"


def test_python_workflow_runs_from_the_cli(cli):
    doc = cli("run", str(FIXTURES / "py_inferred.py"), "--input", "name=ada", "--json").json()
    assert doc["status"] == "succeeded"
    assert doc["output"] == "HELLO ADA!"
    greet = {s["step_id"]: s for s in doc["steps"]}["greet"]
    assert greet["injected"] == [{"step_id": "shout", "agent": "shout", "needs": "a short greeting",
                                  "description": None}]


def test_a_python_file_needs_exactly_one_workflow(cli):
    result = cli("validate", str(FIXTURES / "py_two.py"), db=False)
    assert result.exit_code == 2
    assert "several Workflow objects: ['a', 'b']" in result.stderr
