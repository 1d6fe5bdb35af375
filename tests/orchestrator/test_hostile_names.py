"""Names, reasons and outputs that look like Rich markup print exactly as written, in every command,
and every run status (``interrupted`` included) renders: a workflow named ``report[/]v2 etl [daily]``,
an agent ``ops[/]team [bold]``, a gate ``range [daily][/]``, a reviewer ``[bold]ann[/]``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import FIXTURES, REPO, listed_row

HOSTILE = str(FIXTURES / "hostile_names.yaml")
NAME = "report[/]v2 etl [daily]"


def run_id_of(cli, *args: str) -> str:
    result = cli("run", HOSTILE, *args, "--json")
    assert result.exit_code in (0, 1, 3), result.stderr
    return result.json()["run_id"]


def interrupted_run(db_url: str, tmp_path: Path) -> str:
    """A run stopped by Ctrl-C (SIGINT) while its first step runs: its lease is handed back."""
    started = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", HOSTILE, "--input", "nap=60",
                                "--db", db_url, "--json"], env={**os.environ, "HOSTILE_STARTED": str(started)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    store = open_store(db_url)
    try:
        (run,) = [r for r in store.list_runs() if r.inputs.get("nap") == 60]
        assert run.status == "interrupted"
        return run.run_id
    finally:
        store.close()


@pytest.fixture
def runs(cli, db_url: str, tmp_path: Path) -> dict[str, str]:
    made = {"succeeded": run_id_of(cli, "--input", "x=9"), "paused": run_id_of(cli, "--input", "x=1"),
            "failed": run_id_of(cli, "--input", "x=0"), "rejected": run_id_of(cli, "--input", "x=1")}
    rejected = cli("reject", made["rejected"], "--reviewer", "[bold]ann[/]", "--comment", "[/]no [x]")
    assert rejected.exit_code == 1, rejected.stderr
    queued = cli("run", HOSTILE, "--queue")
    assert queued.exit_code == 0, queued.stderr
    made["queued"] = queued.stdout.split()[1]
    made["interrupted"] = interrupted_run(db_url, tmp_path)
    assert cli("label", made["succeeded"], "--incorrect").exit_code == 0
    return made


def clean(result, *codes: int) -> str:
    """The command's stdout, once it is known to have ended as it should, with no markup error."""
    assert result.exit_code in codes, result.stdout + result.stderr
    assert "internal error" not in result.stderr and "MarkupError" not in result.stderr
    return result.stdout


def test_validate_and_run_print_the_workflow_name_as_written(cli):
    assert NAME in clean(cli("validate", HOSTILE, db=False), 0)
    result = cli("run", HOSTILE, "--input", "x=1")
    out = clean(result, 3)
    assert "paused at src" in out and "range [daily][/]" not in out.split("paused at src")[0]
    assert "field '[/]score' = 0.1 is below min 0.5" in out
    failed = cli("run", HOSTILE, "--input", "x=0")
    assert "ValueError: [/]bad input [daily]" in clean(failed, 1)
    succeeded = cli("run", HOSTILE, "--input", "x=9")
    assert '"[/]out [bold]put"' in clean(succeeded, 0)


def test_runs_lists_every_status_and_the_name_as_written(cli, runs):
    out = clean(cli("runs"), 0)
    for status, run_id in runs.items():
        line = listed_row(out, run_id)
        assert status in line and NAME in line, line
    assert "src" in listed_row(out, runs["paused"])


@pytest.mark.parametrize("status", ["succeeded", "paused", "failed", "rejected", "queued", "interrupted"])
def test_show_renders_every_status_with_hostile_names(cli, runs, status):
    out = clean(cli("show", runs[status], "--traceback"), 0)
    assert f"workflow {NAME}  {status}" in out
    if status in ("succeeded", "paused", "rejected", "failed"):
        assert "ops[/]team [bold]" in out
    if status == "paused":
        assert "✗ src / range [daily][/]: field '[/]score' = 0.1 is below min 0.5" in out
    if status == "rejected":
        assert "by [bold]ann[/]" in out and ": [/]no [x]" in out
    if status == "failed":
        assert "[/]bad input [daily]" in out
    if status == "succeeded":
        assert "why: [/]fine [red]reason" in out and '"[/]out [bold]put"' in out


def test_stats_trace_and_report_print_names_as_written(cli, runs):
    stats = clean(cli("stats"), 0) + clean(cli("stats", "--workflow", NAME), 0)
    assert f"workflow {NAME}:" in stats and "ops[/]team [bold]" in stats
    trace = clean(cli("trace", runs["succeeded"]), 0)
    assert "blamed" in trace
    report = clean(cli("report", "--workflow", NAME), 0) + clean(cli("report"), 0)
    assert f"({NAME}, " in report


def test_every_status_has_a_colour():
    from orchestrator.cli.common import STATUS_STYLE
    from orchestrator.spec.model import RunStatus, StepStatus

    for literal in (RunStatus, StepStatus):
        missing = set(typing.get_args(literal)) - set(STATUS_STYLE)
        assert not missing
