"""What a command says matches what happened: Ctrl-C in a command that runs nothing says
"interrupted" (not that a run stays resumable), one that continues a run names that run, ``stats``
of a workflow with no runs names the ones it knows, and output that cannot be written (a full disk)
is one line and exit 1, not an "internal error"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO


def test_ctrl_c_while_validate_loads_a_file_says_interrupted_and_nothing_about_a_run(tmp_path):
    marker = tmp_path / "importing"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "validate", str(FIXTURES / "py_slow_import.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "IMPORT_MARKER": str(marker)})
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert stderr.strip().splitlines() == ["error: interrupted"]


@pytest.mark.parametrize("command", [["stats"], ["report"], ["trace", "RUN"], ["attribute", "RUN", "--method",
                                                                                "trace"], ["runs"]])
def test_ctrl_c_in_a_read_command_says_interrupted_and_nothing_about_resuming(cli, monkeypatch, command):
    run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
    import orchestrator.store

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrator.store, "open_store", interrupted)
    result = cli(*[run_id if part == "RUN" else part for part in command])
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == ["error: interrupted"]


def test_ctrl_c_while_a_decision_continues_the_run_names_that_run(cli, monkeypatch):
    run_id = cli("run", str(FIXTURES / "gated.yaml"), "--json").json()["run_id"]
    import orchestrator.service.runner

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrator.service.runner, "continue_run", interrupted)
    result = cli("approve", run_id)
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: interrupted; run {run_id} is resumable: `orchestrator resume {run_id}` finishes it without "
        "re-running its completed steps")


@pytest.mark.parametrize("command", ["stats", "report", "runs"])
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_read_command_filtered_by_a_workflow_without_runs_names_the_known_ones(cli, command, as_json):
    cli("run", str(FIXTURES / "ok.yaml"))
    json_flag = ["--json"] if as_json else []
    result = cli(command, "--workflow", "nosuchwf", *json_flag)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: no runs of workflow 'nosuchwf' are stored; workflows with runs: ['ok']"]
    assert cli(command, "--workflow", "ok", *json_flag).exit_code == 0


def test_runs_of_a_known_workflow_in_no_run_of_that_state_is_an_empty_list_not_an_error(cli):
    cli("run", str(FIXTURES / "ok.yaml"))
    result = cli("runs", "--workflow", "ok", "--status", "paused", "--json")
    assert (result.exit_code, result.json()) == (0, [])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_output_to_a_full_disk_is_one_line_and_exit_1(cli, db_url, as_json):
    run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "orchestrator", "show", run_id, "--db", db_url,
                               *(["--json"] if as_json else [])], stdout=full, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["error: cannot write the output: No space left on device"]
