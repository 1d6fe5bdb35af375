"""An ``isolation: process`` step whose process dies says how: a signal by name (the OOM killer's SIGKILL
with a hint), an exit without an answer by its code, and a MemoryError under a real memory limit by its
type with a message a person can act on, never ``exit code None`` or an empty message; a MemoryError in the
orchestrator's own process (a step without isolation) says so too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import REPO

STEPS = '''
import os, resource, signal

def _address_space() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))

def hog(x: int) -> int:
    """Limits its own address space to what it uses plus 64 MiB, then asks for 1 GiB."""
    limit = _address_space() + 64 * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    block = bytearray(2**30)
    return len(block)

def killed(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return x

def segfault(x: int) -> int:
    os.kill(os.getpid(), signal.SIGSEGV)
    return x

def vanishes(x: int) -> int:
    os._exit(3)
'''


def _run_step(tmp_path: Path, function: str) -> tuple[dict, list]:
    (tmp_path / "dying_steps.py").write_text(STEPS)
    workflow = tmp_path / f"{function}.yaml"
    workflow.write_text(f"name: {function}\ninputs: {{x: {{type: integer, default: 1}}}}\nsteps:\n"
                        f"  - {{id: s, run: 'dying_steps:{function}', inputs: {{x: $inputs.x}}, isolation: process}}\n")
    db = f"sqlite:///{tmp_path / 'o.db'}"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(workflow), "--db", db, "--json"],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    store = open_store(db)
    return doc, store.step_records(doc["run_id"])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the step reads its address space from /proc")
def test_a_memory_error_under_a_real_memory_limit_is_stored_with_its_type_and_the_limit(tmp_path):
    doc, [record] = _run_step(tmp_path, "hog")
    assert record.error_type == "MemoryError"
    assert record.error_message.startswith("out of memory: the process's address space is limited to ")
    assert record.error_message.endswith(" MiB (RLIMIT_AS)")
    assert "bytearray(2**30)" in (record.traceback or "")  # where it ran out, from the child
    assert doc["steps"][0]["error"] == f"MemoryError: {record.error_message}"


@pytest.mark.parametrize(("function", "death"), [
    ("killed", "was killed by SIGKILL (out of memory?)"),
    ("segfault", "was killed by SIGSEGV"),
    ("vanishes", "exited with code 3"),
])
def test_a_step_process_that_dies_is_recorded_with_its_signal_or_exit_code(tmp_path, function, death):
    doc, [record] = _run_step(tmp_path, function)
    assert (record.status, record.error_type) == ("failed", "ChildDied")
    assert record.error_message == f"the step's process {death} before it answered"
    assert doc["steps"][0]["error"] == f"ChildDied: {record.error_message}"


def test_a_memory_error_in_the_orchestrators_own_process_says_what_ran_out_where(tmp_path):
    """A step without ``isolation: process`` runs in the orchestrator's process: a MemoryError() with no message
    there is stored saying that memory ran out, in that process, and how to give the step one of its own."""
    (tmp_path / "hungry_steps.py").write_text("def hungry(x: int) -> int:\n    raise MemoryError()\n")
    workflow = tmp_path / "hungry.yaml"
    workflow.write_text("name: hungry\ninputs: {x: {type: integer, default: 1}}\nsteps:\n"
                        "  - {id: s, run: 'hungry_steps:hungry', inputs: {x: $inputs.x}}\n")
    db = f"sqlite:///{tmp_path / 'o.db'}"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(workflow), "--db", db, "--json"],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    [record] = open_store(db).step_records(doc["run_id"])
    assert record.error_type == "MemoryError"
    assert record.error_message.startswith("out of memory in the orchestrator's process (`isolation: process` "
                                           "gives a step a process of its own)")
    assert doc["steps"][0]["error"] == f"MemoryError: {record.error_message}"
