"""`orchestrator validate` and `run` on bad workflow files: one clear line, exit 2, nothing stored."""

from __future__ import annotations

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import SpecError
from orchestrator.store import open_store
from tests.conftest import FIXTURES

BAD_FILES = [
    ("syntax_error.yaml", r"syntax_error\.yaml:6:7: YAML syntax error: expected ',' or '\]'"),
    ("unknown_key.yaml", r"unknown_key\.yaml:8: steps\.left\.timout: unknown key 'timout' in steps\.left; valid keys:"),
    ("duplicate_ids.yaml", r"duplicate_ids\.yaml:5: .*duplicate step id 'src'"),
    ("missing_step.yaml", r"missing_step\.yaml:7: .*step 'summarize' depends on 'fetch_sources', "
                          r"which is not defined\. "
                          r"Defined steps: \['fetch', 'summarize'\]"),
    ("missing_input.yaml", r"missing_input\.yaml:7: .*references workflow input 'query', which is not declared"),
    ("cycle.yaml", r"cycle\.yaml:5: .*cycle: plan -> draft -> review -> plan"),
    ("bad_import.yaml", r"bad_import\.yaml:4: .*cannot import module 'no_such_module_here'"),
    ("bad_attr.yaml", r"bad_attr\.yaml:4: .*module 'steps' has no attribute 'sauce'"),
    ("not_callable.yaml", r"not_callable\.yaml:4: .*'steps:NOT_CALLABLE' is a int, not a callable"),
    ("param_mismatch.yaml",
     r"param_mismatch\.yaml:7: .*input 'val' does not match any parameter of steps:double\(value\)"),
    ("bad_output.yaml", r"bad_output\.yaml:5: output: output names step 'final', which is not defined"),
    ("wrong_type.yaml", r"wrong_type\.yaml:5: steps\.src\.timeout: Input should be a valid number"),
    ("review_timeout_inf.yaml",
     r"review_timeout_inf\.yaml:16: steps\.scored\.review_timeout: Input should be a finite number"),
    ("review_timeout_huge.yaml",
     r"review_timeout_huge\.yaml:16: steps\.scored\.review_timeout: Input should be less than or equal to 31622400"),
    ("python_tools.yaml", r"python_tools\.yaml:5: steps\.src\.tools: step 'src' has tools: but no prompt:, so it "
                          r"calls no model and tools: would be ignored"),
    ("python_stream.yaml", r"python_stream\.yaml:5: steps\.src\.stream: step 'src' has stream: but no prompt:, so "
                           r"it calls no model and stream: would be ignored"),
    ("critic_schema.yaml", r"critic_schema\.yaml:11: steps\.check\.output_schema: step 'check' is a critic, so "
                           r"its output is its verdict"),
    ("python_bad_schema.yaml", r"python_bad_schema\.yaml:5: steps\.src\.output_schema: step 'src' output_schema is "
                               r"not a JSON Schema: 'banana' is not valid"),
]


@pytest.mark.parametrize(("name", "message"), BAD_FILES, ids=[n for n, _ in BAD_FILES])
def test_validate_reports_each_bad_file_in_one_line_with_exit_2(cli, name, message):
    result = cli("validate", str(FIXTURES / name), db=False)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    import re

    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize(("name", "message"), BAD_FILES[:4], ids=[n for n, _ in BAD_FILES[:4]])
def test_run_on_a_bad_file_fails_the_same_way_and_stores_nothing(cli, db_url, name, message):
    result = cli("run", str(FIXTURES / name))
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    counts = open_store(db_url).count_rows()
    assert counts["runs"] == 0 and counts["step_records"] == 0


def test_cycle_names_every_step_on_it():
    with pytest.raises(SpecError, match=r"plan -> draft -> review -> plan") as info:
        load_workflow(FIXTURES / "cycle.yaml")
    assert info.value.problems[0].line == 5


def test_valid_file_reports_order(cli):
    result = cli("validate", str(FIXTURES / "ok.yaml"), db=False)
    assert result.exit_code == 0
    assert "src -> left -> right -> total" in result.stdout


def test_missing_file_is_exit_2(cli, tmp_path):
    result = cli("validate", str(tmp_path / "nope.yaml"), db=False)
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_empty_file_is_exit_2(cli, tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    result = cli("validate", str(tmp_path / "empty.yaml"), db=False)
    assert result.exit_code == 2
    assert "empty" in result.stderr


def test_several_problems_are_all_listed(cli, tmp_path):
    (tmp_path / "two.yaml").write_text(
        "name: two\nsteps:\n  - id: a\n    run: nowhere:thing\n"
        "  - id: b\n    run: nowhere:other\n    inputs: {v: zz}\n")
    result = cli("validate", str(tmp_path / "two.yaml"), db=False)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3
    assert any("depends on 'zz'" in line for line in lines)


def test_json_schema_of_the_yaml_format_ships(cli):
    import json

    from tests.conftest import REPO

    result = cli("schema", db=False)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert {"name", "steps", "inputs", "output", "outcome"} <= set(schema["properties"])
    shipped = json.loads((REPO / "orchestrator" / "spec" / "workflow.schema.json").read_text())
    assert shipped == schema, "regenerate with: orchestrator schema -o orchestrator/spec/workflow.schema.json"
