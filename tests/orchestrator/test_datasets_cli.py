"""``orchestrator dataset``: create from stored runs, add from JSONL, list, show, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store import open_store

WORKFLOW = """\
name: echo
inputs:
  q: {type: string}
steps:
  - id: answer
    run: echo_steps:answer
    inputs: {q: $inputs.q}
outcome: echo_steps:score
output: answer
"""

STEPS = """\
def answer(q):
    return {"text": q.upper()}

def score(output, reference=None):
    return 1.0 if output["text"] == reference else 0.0
"""


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    (tmp_path / "echo_steps.py").write_text(STEPS)
    path = tmp_path / "echo.yaml"
    path.write_text(WORKFLOW)
    return path


def run_lines(cli, workflow: Path, tmp_path: Path, lines: list[dict]) -> list[str]:
    path = tmp_path / "inputs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = cli("run", str(workflow), "--input-file", str(path), "--json", "--parallel", "1")
    assert result.exit_code == 0, result.stderr
    return [row["run_id"] for row in result.json()]


def test_a_dataset_of_incorrect_runs_keeps_inputs_reference_label_and_run(durable_cli, workflow, tmp_path):
    runs = run_lines(durable_cli, workflow, tmp_path, [{"q": "a", "$reference": "A"}, {"q": "b", "$reference": "x"},
                                                       {"q": "c", "$reference": "y"}])
    created = durable_cli("dataset", "create", "misses", "--from-runs", "--workflow", "echo", "--outcome", "incorrect",
                          "--json")
    assert created.exit_code == 0, created.stderr
    assert (created.json()["version"], created.json()["size"]) == (1, 2)
    shown = durable_cli("dataset", "show", "misses", "--json").json()
    examples = sorted(shown["examples"], key=lambda e: e["inputs"]["q"])
    assert [(e["inputs"], e["reference"], e["label"], e["source_run_id"]) for e in examples] == [
        ({"q": "b"}, "x", "incorrect", runs[1]), ({"q": "c"}, "y", "incorrect", runs[2])]
    limited = durable_cli("dataset", "create", "newest", "--from-runs", "--limit", "1", "--json")
    assert limited.json()["size"] == 1
    listed = durable_cli("dataset", "list", "--json").json()
    assert [(d["name"], d["version"], d["size"]) for d in listed] == [("misses", 1, 2), ("newest", 1, 1)]


def test_creating_from_runs_that_match_nothing_or_under_a_taken_name_stores_nothing(cli, workflow, tmp_path, db_url):
    run_lines(cli, workflow, tmp_path, [{"q": "a", "$reference": "A"}])
    nothing = cli("dataset", "create", "misses", "--from-runs", "--outcome", "incorrect")
    assert nothing.exit_code == 2 and "no runs match" in nothing.stderr
    assert cli("dataset", "create", "all", "--from-runs").exit_code == 0
    taken = cli("dataset", "create", "all", "--from-runs")
    assert taken.exit_code == 2 and "dataset 'all' exists already" in taken.stderr
    no_source = cli("dataset", "create", "x")
    assert no_source.exit_code == 2 and "--from-runs" in no_source.stderr
    with open_store(db_url) as store:
        assert (store.count_rows()["datasets"], store.count_rows()["dataset_examples"]) == (1, 1)


def test_adding_a_file_makes_a_new_version_and_export_gives_it_back(cli, tmp_path):
    first = tmp_path / "first.jsonl"
    first.write_text('{"inputs": {"q": "a"}, "reference": "A", "label": "correct"}\n\n{"inputs": {"q": "b"}}\n')
    second = tmp_path / "second.jsonl"
    second.write_text('{"inputs": {"q": "c"}, "label": {"note": "tricky"}}\n')
    assert cli("dataset", "add", "hand", "--file", str(first), "--json").json()["version"] == 1
    added = cli("dataset", "add", "hand", "--file", str(second), "--json").json()
    assert (added["version"], added["size"]) == (2, 3)
    old = cli("dataset", "show", "hand", "--version", "1", "--json").json()
    assert [e["inputs"] for e in old["examples"]] == [{"q": "a"}, {"q": "b"}]
    exported = cli("dataset", "export", "hand")
    assert exported.exit_code == 0
    assert [json.loads(line) for line in exported.stdout.splitlines()] == [
        {"inputs": {"q": "a"}, "reference": "A", "label": "correct"},
        {"inputs": {"q": "b"}, "reference": None, "label": None},
        {"inputs": {"q": "c"}, "reference": None, "label": {"note": "tricky"}}]
    (tmp_path / "again.jsonl").write_text(exported.stdout)
    copied = cli("dataset", "add", "copy", "--file", str(tmp_path / "again.jsonl"), "--json").json()
    assert copied["size"] == 3
    text = cli("dataset", "show", "hand")
    assert text.exit_code == 0 and "version 2 of 2: 3 examples" in text.stdout


@pytest.mark.parametrize(("content", "line", "says"), [
    ('{"inputs": {"q": "a"}}\n{"inputs": {"q": \n', 2, "invalid JSON"),
    ('{"inputs": {"q": "a"}}\n[1, 2]\n', 2, "must be a JSON object"),
    ('{"reference": "A"}\n', 1, '"inputs" must be a JSON object'),
    ('{"inputs": "q=a"}\n', 1, '"inputs" must be a JSON object'),
    ('\n\n{"inputs": {}, "answer": 1}\n', 3, "unknown key(s) ['answer']"),
    ('{"inputs": {}, "source_run_id": 7}\n', 1, "source_run_id"),
])
def test_a_bad_line_is_named_by_file_and_line_and_nothing_is_stored(cli, tmp_path, db_url, content, line, says):
    path = tmp_path / "examples.jsonl"
    path.write_text(content)
    result = cli("dataset", "add", "hand", "--file", str(path))
    assert result.exit_code == 2
    assert f"{path}:{line}" in result.stderr and says in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path(db_url.split("///", 1)[1]).exists()  # refused before any database was opened


def test_an_empty_file_a_missing_file_and_an_unknown_dataset_are_refused(cli, tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    empty = cli("dataset", "add", "hand", "--file", str(tmp_path / "empty.jsonl"))
    assert empty.exit_code == 2 and "no examples" in empty.stderr
    missing = cli("dataset", "add", "hand", "--file", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2 and "nope.jsonl" in missing.stderr
    (tmp_path / "one.jsonl").write_text('{"inputs": {}}\n')
    assert cli("dataset", "add", "hand", "--file", str(tmp_path / "one.jsonl")).exit_code == 0
    unknown = cli("dataset", "show", "other")
    assert unknown.exit_code == 2 and "no dataset 'other'" in unknown.stderr
    baseline = cli("dataset", "add", "baseline", "--file", str(tmp_path / "one.jsonl"))
    assert baseline.exit_code == 2 and "baseline" in baseline.stderr
