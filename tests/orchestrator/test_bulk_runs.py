"""``orchestrator run FILE --input-file inputs.jsonl``: one run per line, a summary, the batch's exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

WORKFLOW = """\
name: bulk
version: 1
inputs:
  x: {type: integer}
steps:
  - id: check
    run: bulk_steps:check
    inputs: {x: $inputs.x}
    gates:
      - gate: range
        field: value
        max: 100
"""

STEPS = """\
def check(x):
    if x < 0:
        raise ValueError(f"negative: {x}")
    return {"value": x}
"""


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    (tmp_path / "bulk_steps.py").write_text(STEPS)
    path = tmp_path / "bulk.yaml"
    path.write_text(WORKFLOW)
    return path


def jsonl(path: Path, values: list[int]) -> Path:
    path.write_text("".join(json.dumps({"x": v}) + "\n" for v in values))
    return path


def test_twenty_lines_run_as_twenty_runs_with_mixed_outcomes(cli, workflow, tmp_path):
    values = [*range(14), 101, 102, 103, -1, -2, -3]  # 14 succeed, 3 pause at the gate, 3 fail
    result = cli("run", str(workflow), "--input-file", str(jsonl(tmp_path / "in.jsonl", values)), "--json",
                 "--parallel", "4")
    assert result.exit_code == 1, result.stderr  # any failed run: exit 1
    doc = result.json()
    assert [row["line"] for row in doc] == list(range(1, 21))
    statuses = [row["status"] for row in doc]
    assert statuses == ["succeeded"] * 14 + ["paused"] * 3 + ["failed"] * 3
    assert [row["output"] for row in doc[:14]] == [{"value": v} for v in range(14)]
    assert all(row["paused_steps"] == ["check"] for row in doc[14:17])
    assert all("negative" in row["error"] for row in doc[17:])
    assert len({row["run_id"] for row in doc}) == 20
    stored = cli("runs", "--json").json()
    assert sorted(r["run_id"] for r in stored) == sorted(row["run_id"] for row in doc)


def test_a_batch_with_pauses_and_no_failure_exits_3_with_a_table(cli, workflow, tmp_path):
    result = cli("run", str(workflow), "--input-file", str(jsonl(tmp_path / "in.jsonl", [1, 2, 500])))
    assert result.exit_code == 3, result.stderr
    assert "waiting at check" in result.stdout
    assert "2 succeeded" in result.stdout and "1 paused" in result.stdout


def test_an_all_good_batch_exits_0_and_input_pairs_apply_to_every_line(cli, workflow, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{}\n\n{"x": 7}\n')  # blank lines are skipped; a line's own keys win over --input
    result = cli("run", str(workflow), "--input-file", str(path), "--input", "x=3", "--json")
    assert result.exit_code == 0, result.stderr
    assert [(row["line"], row["output"]) for row in result.json()] == [(1, {"value": 3}), (3, {"value": 7})]


@pytest.mark.parametrize("lines, message", [
    ('{"x": 1}\n{"x": 2\n', "in.jsonl:2:"),
    ('{"x": 1}\n[1, 2]\n', "in.jsonl:2: each line must be a JSON object of inputs, not list"),
    ('{"x": 1}\n{"x": 2}\n{"y": 3}\n', "in.jsonl:3: workflow 'bulk' has no input 'y'"),
    ('{"x": 1}\n{"x": "many"}\n', "in.jsonl:2:"),
])
def test_a_bad_line_names_file_and_line_and_starts_nothing(cli, workflow, tmp_path, lines, message):
    path = tmp_path / "in.jsonl"
    path.write_text(lines)
    result = cli("run", str(workflow), "--input-file", str(path))
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "orchestrator.db").exists()  # the test's --db: not even created


def test_a_json_file_with_one_object_is_still_one_run(cli, workflow, tmp_path):
    path = tmp_path / "in.json"
    path.write_text('{\n  "x": 5\n}\n')  # pretty-printed over several lines: still one object
    result = cli("run", str(workflow), "--input-file", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["output"] == {"value": 5}


def test_a_multi_line_json_file_is_a_batch(cli, workflow, tmp_path):
    path = tmp_path / "in.json"
    path.write_text('{"x": 1}\n{"x": 2}\n')
    result = cli("run", str(workflow), "--input-file", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert [row["output"]["value"] for row in result.json()] == [1, 2]
