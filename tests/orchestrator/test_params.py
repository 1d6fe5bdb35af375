"""``params:`` passes literal keyword arguments to a step: a string there is never read as a
reference to a step or an input, unlike every string under ``inputs:``."""

from __future__ import annotations

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import SpecError
from tests.conftest import FIXTURES


def test_a_literal_string_reaches_the_step_as_is(cli):
    doc = cli("run", str(FIXTURES / "params.yaml"), "--json").json()
    assert doc["status"] == "succeeded"
    assert doc["output"] == {"value": 2, "path": "/tmp/x.txt", "tone": "src"}  # 'src' names a step: still literal
    shown = cli("show", doc["run_id"], "--json").json()
    label = {s["step_id"]: s for s in shown["steps"]}["label"]
    assert label["inputs"]["path"] == "/tmp/x.txt" and label["inputs"]["tone"] == "src"


def test_params_are_part_of_the_definition_and_its_hash(tmp_path):
    bound = load_workflow(FIXTURES / "params.yaml")
    assert bound.definition["steps"][1]["params"] == {"path": "/tmp/x.txt", "tone": "src"}
    assert "label" not in {d for s in bound.spec.steps for d in s.step_dependencies()}  # no edge from a param
    changed = tmp_path / "params.yaml"
    changed.write_text((FIXTURES / "params.yaml").read_text().replace("tone: src", "tone: formal"))
    (tmp_path / "steps.py").write_text((FIXTURES / "steps.py").read_text())
    assert load_workflow(changed).content_hash != bound.content_hash


def test_the_python_decorator_takes_params_and_gives_the_yaml_twin(cli):
    from_yaml = load_workflow(FIXTURES / "params.yaml")
    from_python = load_workflow(FIXTURES / "params_py.py")
    assert from_python.spec == from_yaml.spec
    assert from_python.content_hash == from_yaml.content_hash
    doc = cli("run", str(FIXTURES / "params_py.py"), "--json").json()
    assert doc["output"] == {"value": 2, "path": "/tmp/x.txt", "tone": "src"}


def test_a_string_constant_under_inputs_points_to_params(cli, db_url):
    result = cli("validate", str(FIXTURES / "string_constant.yaml"), db=False)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, lines  # path and tone
    assert lines[0] == ("error: " + str(FIXTURES / "string_constant.yaml") + ":7: steps.label.inputs.path: "
                        "step 'label' depends on '/tmp/x', which is not defined. Defined steps: ['src', 'label']; "
                        "to pass a literal string, use params: {path: /tmp/x.txt}")
    assert lines[1].endswith("use params: {tone: formal}")


def test_a_parameter_under_both_inputs_and_params_is_refused():
    message = (r"params_and_input\.yaml:8: steps\.label\.params\.path: step 'label' parameter 'path' is under "
               r"both inputs: and params:; a parameter gets its value from one")
    with pytest.raises(SpecError, match=message):
        load_workflow(FIXTURES / "params_and_input.yaml")


def test_a_missing_parameter_names_params_as_a_way_to_give_it(tmp_path):
    (tmp_path / "steps.py").write_text((FIXTURES / "steps.py").read_text())
    (tmp_path / "half.yaml").write_text("name: half\nsteps:\n  - id: src\n    run: steps:source\n"
                                        "  - id: label\n    run: steps:labelled\n    inputs: {value: src.value}\n"
                                        "    params: {path: /tmp/x.txt}\n")
    with pytest.raises(SpecError, match=r"parameter 'tone' of steps:labelled\(value, path, tone\) is not given "
                                        r"by any input; add it under 'inputs' \(or 'params' for a literal value\)"):
        load_workflow(tmp_path / "half.yaml")
