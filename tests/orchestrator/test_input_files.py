"""A file a user names is read only if it is a regular file of bounded size, and JSON only if it
nests at most 200 levels: a FIFO, a device, a directory, a file past the cap or JSON nested 10 000
deep is one line naming the file and exit 2, at once, with nothing stored. (Before: a FIFO hung
the command, ``/dev/zero`` grew it by gigabytes ignoring Ctrl-C, deep JSON was an internal error.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.files import MAX_JSON_BYTES, MAX_WORKFLOW_BYTES
from tests.conftest import FIXTURES, REPO

INPUTS = FIXTURES.parent / "inputs"
OK = str(FIXTURES / "ok.yaml")


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, with a deadline: a command that blocks on a FIFO fails the test
    instead of hanging the suite."""
    return subprocess.run([sys.executable, "-m", "orchestrator", *args, *(["--db", str(db)] if args[0] != "validate"
                                                                          else [])],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


SPECIAL = [("fifo", "a FIFO (named pipe)"), ("dev_zero", "a character device"), ("directory", "a directory")]


def _special(kind: str, tmp_path: Path, name: str) -> Path:
    if kind == "fifo":
        return _fifo(tmp_path, name)
    if kind == "directory":
        (tmp_path / name).mkdir()
        return tmp_path / name
    return Path("/dev/zero")


COMMANDS = {
    "workflow": lambda f: ["run", str(f)],
    "validate": lambda f: ["validate", str(f)],
    "--input-file": lambda f: ["run", OK, "--input-file", str(f)],
    "--reference": lambda f: ["run", OK, "--reference", str(f)],
    "edit --output": lambda f: ["edit", "r123", "--output", str(f)],
    "label --reference": lambda f: ["label", "r123", "--reference", str(f)],
}


def _expected_prefix(command: str, path: Path) -> str:
    if command in ("workflow", "validate"):
        return f"error: {path}: cannot read workflow file: "
    option = command.split()[-1]
    return f"error: {option} {path}: "


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("kind", "what"), SPECIAL, ids=[k for k, _ in SPECIAL])
def test_a_special_file_is_refused_at_once_naming_it(tmp_path, command, kind, what):
    path = _special(kind, tmp_path, "special.yaml" if command in ("workflow", "validate") else "special.json")
    db = tmp_path / "runs.db"
    result = run_cli(*COMMANDS[command](path), db=db)
    assert result.returncode == 2
    assert one_line(result) == f"{_expected_prefix(command, path)}not a regular file: it is {what}"
    assert not db.exists()


@pytest.mark.parametrize(("command", "limit"), [("validate", MAX_WORKFLOW_BYTES), ("--input-file", MAX_JSON_BYTES),
                                                ("edit --output", MAX_JSON_BYTES)])
def test_a_file_past_the_size_cap_is_refused_without_reading_it(cli, db_url, tmp_path, command, limit):
    path = tmp_path / ("huge.yaml" if command == "validate" else "huge.json")
    with open(path, "wb") as fh:
        fh.truncate(limit + 1)  # sparse: nothing is written to disk
    result = cli(*COMMANDS[command](path), db=command != "validate")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith(_expected_prefix(command, path) + f"larger than {limit // (1024 * 1024)} MB")
    assert "\n" not in line
    assert not Path(db_url.split("///", 1)[1]).exists()


@pytest.mark.parametrize("command", ["--input-file", "--reference", "edit --output", "label --reference"])
def test_json_nested_10000_deep_is_refused_naming_the_file(cli, db_url, command):
    path = INPUTS / "deep.json"
    result = cli(*COMMANDS[command](path))
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == f"{_expected_prefix(command, path)}JSON nested deeper than 200 levels"
    assert not Path(db_url.split("///", 1)[1]).exists()


def test_a_jsonl_line_nested_10000_deep_names_its_line(cli, db_url):
    path = INPUTS / "deep_line.jsonl"
    result = cli("run", OK, "--input-file", str(path))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --input-file {path}:2: JSON nested deeper than 200 levels"
    assert not Path(db_url.split("///", 1)[1]).exists()


def test_json_nested_200_deep_is_still_read(cli, tmp_path):
    (tmp_path / "inputs.json").write_text('{"n": 1, "tags": ' + "[" * 199 + "]" * 199 + "}")
    result = cli("run", str(FIXTURES / "types.yaml"), "--input-file", str(tmp_path / "inputs.json"), "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["status"] == "succeeded"
