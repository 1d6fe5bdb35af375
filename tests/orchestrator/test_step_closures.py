"""Each Python step keeps its own function, even when several share one ``module:qualname`` (lambdas,
closures made by one factory): in the process that defined them, and when another process resumes the
run from the workflow file. A reference that must be found again by name (``isolation: process``) and
has none is refused at definition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import Workflow
from orchestrator.core.errors import SpecError
from orchestrator.service.runner import start_run
from orchestrator.store import Store
from tests.conftest import REPO

CLOSURES = '''
from orchestrator import Workflow

wf = Workflow("closures", output="total")
wf.step(id="a")(lambda: 1)
wf.step(id="b", inputs={"x": "a"}, gates=[{"gate": "range", "max": 5}])(lambda x: x + 10)  # 11: pauses


def make(k):
    def add(x):
        return x + k
    return add


for i in range(3):
    wf.step(id=f"c{i}", inputs={"x": "b"})(make(i * 100))
wf.step(id="total", inputs={"c0": "c0", "c1": "c1", "c2": "c2"})(lambda c0, c1, c2: [c0, c1, c2])
'''


def outputs(store: Store, run_id: str) -> dict[str, object]:
    return {r.step_id: r.output for r in store.step_records(run_id, latest_only=True)}


def test_lambdas_and_closures_each_run_their_own_function_in_process(store: Store):
    wf = Workflow("closures", output="s2")
    wf.step(id="a")(lambda: "from a")
    wf.step(id="b")(lambda: "from b")

    def make(i: int):
        def constant() -> int:
            return i
        return constant

    for i in range(3):
        wf.step(id=f"s{i}")(make(i))
    result = start_run(store, wf.bind(), {})
    assert result.status == "succeeded"
    assert outputs(store, result.run_id) == {"a": "from a", "b": "from b", "s0": 0, "s1": 1, "s2": 2}


def orchestrator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_a_run_of_lambdas_and_closures_resumed_by_another_process_runs_each_step_s_own(tmp_path: Path):
    source = tmp_path / "closures_flow.py"
    source.write_text(CLOSURES)
    db = str(tmp_path / "o.db")
    paused = orchestrator("run", str(source), "--json", "--db", db)
    assert paused.returncode == 3, paused.stderr
    first = json.loads(paused.stdout)
    assert {s["step_id"]: s["output"] for s in first["steps"]} == {"a": 1, "b": 11}
    approved = orchestrator("approve", first["run_id"], "--json", "--db", db)  # another process, same file
    assert approved.returncode == 0, approved.stderr
    doc = json.loads(approved.stdout)
    assert {s["step_id"]: s["output"] for s in doc["steps"]} == {
        "a": 1, "b": 11, "c0": 11, "c1": 111, "c2": 211, "total": [11, 111, 211]}


def test_a_lambda_cannot_run_in_a_child_process(tmp_path: Path):
    wf = Workflow("isolated")
    wf.step(id="a", isolation="process")(lambda: 1)
    with pytest.raises(SpecError) as raised:
        wf.bind()
    assert ("step 'a': isolation: process calls tests.orchestrator.test_step_closures:"
            "test_a_lambda_cannot_run_in_a_child_process.<locals>.<lambda> in a child process, which finds it "
            "by name; a lambda or a function made inside another function has none: define it at module level") \
        in str(raised.value)


def test_two_tools_that_share_a_reference_are_refused():
    wf = Workflow("tools")
    wf.llm_step(id="ask", prompt="hi", tools=[lambda q: 1, lambda q: 2])
    with pytest.raises(SpecError) as raised:
        _ = wf.spec
    assert ("two different objects share the reference 'tests.orchestrator.test_step_closures:"
            "test_two_tools_that_share_a_reference_are_refused.<locals>.<lambda>' (lambdas, or functions made "
            "inside another function); give each a module-level name") in str(raised.value)
