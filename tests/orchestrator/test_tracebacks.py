"""A failed step keeps its full traceback next to its one-line error: stored, shown, isolated too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIX = Path(__file__).parent.parent / "attribution" / "fixtures"

WORKFLOW = """name: lookup-fails
inputs: {{x: {{type: integer, default: 7}}}}
steps:
  - id: fetch
    run: attr_steps:fetch
    inputs: {{x: $inputs.x}}
  - id: lookup
    run: attr_steps:fails_with_key_error
    inputs: {{data: fetch}}
    isolation: {isolation}
"""


@pytest.fixture
def failed_run(cli, tmp_path, step_log):
    def run(isolation: str) -> str:
        wf = tmp_path / f"lookup_{isolation}.yaml"
        wf.write_text(WORKFLOW.format(isolation=isolation))
        shutil.copy(FIX / "attr_steps.py", tmp_path / "attr_steps.py")
        result = cli("run", str(wf), "--json")
        assert result.exit_code == 1, result.stdout + result.stderr
        return str(result.json()["run_id"])
    return run


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_a_failed_step_stores_its_traceback_and_keeps_its_one_line_error(cli, store, failed_run, isolation):
    run_id = failed_run(isolation)
    lookup = next(r for r in store.step_records(run_id) if r.step_id == "lookup")
    assert lookup.error == "KeyError: 'T-99'"
    assert lookup.traceback is not None
    assert "Traceback (most recent call last)" in lookup.traceback
    # the frames of the step's own code, formatted where it ran (the child process when isolated)
    assert "in fails_with_key_error" in lookup.traceback and "in _lookup" in lookup.traceback
    assert lookup.traceback.rstrip().endswith("KeyError: 'T-99'")


def test_show_json_has_the_traceback_on_the_step_entry(cli, failed_run):
    run_id = failed_run("thread")
    doc = cli("show", run_id, "--json").json()
    steps = {s["step_id"]: s for s in doc["steps"]}
    assert "in _lookup" in steps["lookup"]["traceback"]
    assert steps["fetch"]["traceback"] is None
    assert steps["lookup"]["error"] == "KeyError: 'T-99'"


def test_show_prints_tracebacks_only_when_asked(cli, failed_run):
    run_id = failed_run("thread")
    plain = cli("show", run_id)
    assert "Traceback (most recent call last)" not in plain.stdout
    shown = cli("show", run_id, "--traceback")
    assert shown.exit_code == 0
    after_table = shown.stdout.split("traceback of lookup attempt 1", 1)[1]
    assert "Traceback (most recent call last)" in after_table and "in _lookup" in after_table


def test_show_traceback_on_a_run_without_failures_says_so(cli, tmp_path, step_log):
    wf = tmp_path / "ok.yaml"
    wf.write_text("name: ok\ninputs: {x: {type: integer, default: 1}}\nsteps:\n"
                  "  - id: fetch\n    run: attr_steps:fetch\n    inputs: {x: $inputs.x}\n")
    shutil.copy(FIX / "attr_steps.py", tmp_path / "attr_steps.py")
    run_id = cli("run", str(wf), "--json").json()["run_id"]
    assert "no failed attempts" in cli("show", run_id, "--traceback").stdout
