"""Bad input of every kind gets one line on stderr, a documented exit code, no traceback, and
nothing stored: binary files, alias bombs, unwritable paths, missing or corrupt databases,
contradictory flags, non-finite numbers. Code that misbehaves at run time (a step output
holding NaN, a step calling sys.exit, an evaluator returning nonsense) is a recorded failure,
never a database error or a crash."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.bind.loader import MAX_ALIAS_NODES
from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO


def one_error_line(result) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


def strict_json(text: str):
    """Parse JSON refusing the NaN/Infinity that Python's json would accept."""
    def refuse(constant: str):
        raise AssertionError(f"{constant} in --json output")

    return json.loads(text, parse_constant=refuse)


# -- workflow files ---------------------------------------------------------------------------

BAD_FILES = [
    ("not_utf8.yaml", r"not_utf8\.yaml:5: not a text file \(UTF-8\): byte 0xe9 at offset \d+ is not UTF-8"),
    ("alias_bomb.yaml", rf"alias_bomb\.yaml:\d+:\d+: e\[0\]: alias \*d .*YAML aliases expand to more than "
                        rf"{MAX_ALIAS_NODES} values"),
    ("evidence_unknown_source.yaml",
     r"evidence_unknown_source\.yaml:10: steps\.answer\.gates\[0\]: step 'answer' gate 'evidence' reads step "
     r"'retrieve', which is not defined\. Defined steps: \['src', 'answer'\]"),
    ("bad_default.yaml", r"bad_default\.yaml:3: inputs\.x\.default: input 'x' default 'three' is not an integer"),
    ("retry_unknown_exception.yaml",
     r"retry_unknown_exception\.yaml:5: steps\.src\.retry\.exceptions: step 'src' retry exception: "
     r"cannot import module 'no_such_module_here'"),
]


@pytest.mark.parametrize(("name", "message"), BAD_FILES, ids=[n for n, _ in BAD_FILES])
def test_validate_names_the_file_and_line_of_each_bad_file(cli, name, message):
    result = cli("validate", str(FIXTURES / name), db=False)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert re.search(message, line), line


@pytest.mark.parametrize(("name", "message"), BAD_FILES, ids=[n for n, _ in BAD_FILES])
def test_run_on_a_bad_file_stores_nothing(cli, db_url, name, message):
    result = cli("run", str(FIXTURES / name))
    assert result.exit_code == 2
    assert re.search(message, one_error_line(result))
    assert not Path(db_url.split("///", 1)[1]).exists()  # not even the database was created


def test_a_binary_file_is_not_a_text_file(cli, tmp_path):
    for name in ("random.yaml", "random.py"):
        (tmp_path / name).write_bytes(bytes(range(256)) * 4)
        result = cli("validate", str(tmp_path / name), db=False)
        assert result.exit_code == 2
        assert re.search(rf"{name}:2: not a text file \(UTF-8\): byte 0x80 at offset 128", one_error_line(result))


def test_a_file_with_nul_bytes_is_not_a_text_file(cli, tmp_path):
    (tmp_path / "nul.yaml").write_bytes(b"name: x\nsteps: []\x00\n")
    result = cli("validate", str(tmp_path / "nul.yaml"), db=False)
    assert result.exit_code == 2
    assert "nul.yaml:2: not a text file (UTF-8): a NUL byte at offset 17" in one_error_line(result)


def test_a_few_aliases_are_fine(cli, tmp_path):
    (tmp_path / "steps.py").write_text("def source(x=1):\n    return x\n")
    (tmp_path / "aliases.yaml").write_text(
        "name: aliases\nsteps:\n  - id: a\n    run: steps:source\n    retry: &r {attempts: 2}\n"
        "  - id: b\n    run: steps:source\n    retry: *r\n")
    result = cli("validate", str(tmp_path / "aliases.yaml"), db=False)
    assert result.exit_code == 0, result.stderr


def test_a_self_referencing_alias_is_refused_not_a_recursion_error(cli, tmp_path):
    (tmp_path / "loop.yaml").write_text("name: loop\nsteps: &s [*s]\n")
    result = cli("validate", str(tmp_path / "loop.yaml"), db=False)
    assert result.exit_code == 2
    assert "YAML nested too deeply (or an alias inside its own anchor)" in one_error_line(result)


# -- command arguments ------------------------------------------------------------------------

def test_schema_into_a_missing_directory_names_the_path(cli, tmp_path):
    target = tmp_path / "missing_dir" / "x.json"
    result = cli("schema", "-o", str(target), db=False)
    assert result.exit_code == 2
    assert f"-o {target}: cannot write the schema: No such file or directory" in one_error_line(result)
    assert not target.parent.exists()


@pytest.mark.parametrize("command", [["runs"], ["show", "r123"], ["trace", "r123"], ["stats"], ["report"],
                                     ["resume", "r123"], ["label", "r123", "--correct"],
                                     ["run", str(FIXTURES / "ok.yaml")]])
def test_an_empty_db_option_is_refused_on_every_command(cli, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli(*command, "--db", "", db=False)
    assert result.exit_code == 2
    assert "--db is empty" in one_error_line(result)
    assert list(tmp_path.iterdir()) == []  # the default database was not used instead


def test_correct_and_incorrect_together_name_the_conflict(cli, store):
    run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
    result = cli("label", run_id, "--correct", "--incorrect")
    assert result.exit_code == 2
    assert "--correct and --incorrect contradict each other" in one_error_line(result)
    assert store.count_rows()["outcomes"] == 0


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_a_number_input_must_be_finite(cli, db_url, value):
    result = cli("run", str(FIXTURES / "types.yaml"), "--input", "n=1", "--input", f"ratio={value}")
    assert result.exit_code == 2  # 'ratio' is declared {type: number}
    assert f"input 'ratio' must be a finite number; got '{value}'" in one_error_line(result)
    assert not Path(db_url.split("///", 1)[1]).exists()


def test_an_input_file_holding_nan_is_not_json(cli, tmp_path):
    (tmp_path / "inputs.json").write_text('{"n": 1, "ratio": NaN}')
    result = cli("run", str(FIXTURES / "types.yaml"), "--input-file", str(tmp_path / "inputs.json"))
    assert result.exit_code == 2
    assert "--input-file" in one_error_line(result) and "NaN is not JSON" in result.stderr


# -- the database -----------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["runs"], ["show", "r123"], ["trace", "r123"], ["stats"], ["report"]])
def test_a_read_command_on_a_missing_database_creates_nothing(cli, tmp_path, command):
    path = tmp_path / "sub" / "dir" / "orchestrator.db"
    result = cli(*command, "--db", f"sqlite:///{path}", db=False)
    assert result.exit_code == 2
    assert f"no database at {path}" in one_error_line(result)
    assert not (tmp_path / "sub").exists()


def test_run_still_creates_the_database_and_its_directories(cli, tmp_path):
    path = tmp_path / "sub" / "orchestrator.db"
    result = cli("run", str(FIXTURES / "ok.yaml"), "--db", f"sqlite:///{path}", db=False)
    assert result.exit_code == 0
    assert path.exists()


def _healthy(tmp_path: Path) -> bytes:
    """The bytes of a healthy database with its schema (closed, so all of it is in the main file)."""
    good = tmp_path / "healthy" / "good.db"
    open_store(f"sqlite:///{good}").close()
    return good.read_bytes()


def _truncated(tmp_path: Path) -> Path:
    data = _healthy(tmp_path)
    path = tmp_path / "truncated.db"
    path.write_bytes(data[: len(data) // 2])
    return path


def _overwritten_pages(tmp_path: Path) -> Path:
    data = bytearray(_healthy(tmp_path))
    data[4096:] = os.urandom(len(data) - 4096)  # every page but the first (the header and the schema)
    path = tmp_path / "overwritten.db"
    path.write_bytes(bytes(data))
    return path


def _random(tmp_path: Path) -> Path:
    path = tmp_path / "random.db"
    path.write_bytes(os.urandom(5000))
    return path


@pytest.mark.parametrize("make", [_random, _truncated, _overwritten_pages], ids=["random", "truncated", "overwritten"])
@pytest.mark.parametrize("command", [["runs"], ["show", "r123"], ["run", str(FIXTURES / "ok.yaml")]],
                         ids=["runs", "show", "run"])
def test_a_corrupt_database_is_named_and_never_written(cli, tmp_path, make, command):
    path = make(tmp_path)
    before = path.read_bytes()
    siblings = sorted(p.name for p in tmp_path.iterdir())
    result = cli(*command, "--db", f"sqlite:///{path}", db=False)
    assert result.exit_code == 2
    assert f"the database {path} is corrupt (or not a SQLite database)" in one_error_line(result)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings


# -- what runs --------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "message"), [
    ("nan_output.yaml", "step 's' output field 'scores.2' is NaN; JSON has no NaN"),
    ("inf_output.yaml", "step 's' output is Infinity; JSON has no Infinity"),
])
def test_an_output_holding_nan_fails_the_step_naming_the_field(cli, store, name, message):
    result = cli("run", str(FIXTURES / name), "--json")
    assert result.exit_code == 1
    doc = strict_json(result.stdout)
    step = {s["step_id"]: s for s in doc["steps"]}["s"]
    assert step["status"] == "failed"
    assert step["error"] == f"NonFiniteError: {message}"
    assert step["output"] is None
    shown = strict_json(cli("show", doc["run_id"], "--json").stdout)
    assert shown["status"] == "failed"


@pytest.mark.parametrize(("name", "error"), [
    ("step_exits.yaml", "SystemExit: step 's' called exit(3)"),
    ("step_interrupts.yaml", "KeyboardInterrupt: step 's' raised KeyboardInterrupt"),
])
def test_a_step_raising_systemexit_or_keyboardinterrupt_is_a_step_failure(cli, store, name, error):
    result = cli("run", str(FIXTURES / name), "--json")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr  # the CLI did not crash; the step's own traceback is data:
    doc = result.json()
    assert doc["status"] == "failed"
    step = {s["step_id"]: s for s in doc["steps"]}["s"]
    assert step["traceback"].startswith("Traceback")
    assert "Traceback" not in repr([{k: v for k, v in s.items() if k != "traceback"} for s in doc["steps"]])
    assert (step["status"], step["error"]) == ("failed", error)


@pytest.mark.parametrize(("name", "error"), [
    ("evaluator_raises.yaml", "evaluator error: steps:judge_offline raised RuntimeError: the judge is offline"),
    ("evaluator_nan.yaml", "evaluator error: steps:judge_nan returned nan; a score is a number in [0, 1]"),
    ("evaluator_out_of_range.yaml",
     "evaluator error: steps:judge_out_of_range returned 7.0; a score is a number in [0, 1]"),
])
def test_an_evaluator_that_breaks_is_recorded_on_the_succeeded_run(cli, store, name, error):
    result = cli("run", str(FIXTURES / name))
    assert result.exit_code == 0
    assert error in result.stdout
    run_id = store.list_runs()[0].run_id
    doc = strict_json(cli("show", run_id, "--json").stdout)
    assert doc["status"] == "succeeded"
    assert doc["error"].startswith(error)
    assert doc["outcomes"] == []
    assert store.count_rows()["outcomes"] == 0
    assert error in cli("show", run_id).stdout


def test_an_evaluator_score_in_range_is_still_stored():
    from orchestrator.engine.outcomes import EvaluatorScoreError, evaluator_score

    assert evaluator_score(True) == 1.0 and evaluator_score(0) == 0.0 and evaluator_score(0.25) == 0.25
    for bad in (math.nan, -0.1, 1.5, "0.5", None, math.inf):
        with pytest.raises(EvaluatorScoreError):
            evaluator_score(bad)


# -- the terminal -----------------------------------------------------------------------------

@pytest.mark.parametrize("workflow", ["ok.yaml", "big_output.yaml"])
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_a_reader_that_leaves_early_ends_show_quietly(cli, db_url, workflow, as_json):
    """`orchestrator show RUN --json | head -1`: no BrokenPipeError, no traceback."""
    run_id = cli("run", str(FIXTURES / workflow), "--json").json()["run_id"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        proc = subprocess.run([sys.executable, "-m", "orchestrator", "show", run_id, "--db", db_url,
                               *(["--json"] if as_json else [])],
                              stdout=write_end, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)},
                              timeout=60)
    finally:
        os.close(write_end)
    assert proc.stderr == b""
    assert proc.returncode == 1
