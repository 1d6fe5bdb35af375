"""Control flow from Python: ``@wf.step(when=..., join=..., for_each=..., max_parallel=...)``.

An expression stays the string YAML holds, so twins compare equal; a function is stored as its reference
and the names it reads, travels beside the spec like a step function, and is found again by a process
that resumes the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import Workflow
from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import SpecError
from orchestrator.service.runner import start_run
from orchestrator.spec.model import ConditionCall
from orchestrator.store import Store
from tests.conftest import REPO
from tests.flow.conftest import FLOW


@pytest.mark.parametrize(("yaml_name", "python_name"), [("route_call.yaml", "route_py.py"), ("map.yaml", "map_py.py")])
def test_python_twins_give_equal_specs_and_content_hashes(yaml_name: str, python_name: str) -> None:
    from_yaml, from_python = load_workflow(FLOW / yaml_name), load_workflow(FLOW / python_name)
    assert from_python.spec == from_yaml.spec
    assert from_python.definition == from_yaml.definition
    assert from_python.content_hash == from_yaml.content_hash


def test_a_function_condition_is_stored_as_its_reference_and_the_names_it_reads() -> None:
    spec = load_workflow(FLOW / "route_py.py").spec
    assert spec.step("refund").when == ConditionCall(call="flow_steps:is_refund", reads=["classify"])
    assert spec.step("refund").step_dependencies() == ["classify"]
    assert spec.step("technical").when == "classify.category == 'technical' and inputs.tier != 'free'"
    assert spec.definition()["steps"][1]["when"] == {"call": "flow_steps:is_refund", "reads": ["classify"]}


@pytest.mark.parametrize("name", ["route_call.yaml", "route_py.py"])
def test_a_function_condition_routes_and_its_false_reason_shows_what_it_read(store: Store, name: str) -> None:
    result = start_run(store, load_workflow(FLOW / name), {"ticket": "the app shows an error"})
    assert result.status == "succeeded"
    records = {r.unit: r for r in store.step_records(result.run_id, latest_only=True)}
    assert records["refund"].status == "skipped"
    assert records["refund"].skip_reason == ("when flow_steps:is_refund(classify) was false "
                                             "(classify = {'category': 'technical'})")
    assert records["technical"].status == "succeeded"
    assert result.output == {"policy": None, "fix": records["technical"].output}


CALLED = '''
from orchestrator import Workflow

wf = Workflow("called", inputs={"n": "integer"}, output="report")
wf.step(id="a", gates=[{"gate": "range", "max": 5}])(lambda n: n)


def above(limit):
    def check(a, inputs):
        return a > limit and inputs["n"] > 0
    return check


wf.step(id="big", when=above(5), inputs={"a": "a"})(lambda a: f"big {a}")
wf.step(id="small", when=lambda a: a <= 5, inputs={"a": "a"})(lambda a: f"small {a}")
wf.step(id="report", join="any", inputs={"big": "big", "small": "small"})(lambda big, small: big or small)
'''


def orchestrator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_closure_and_lambda_conditions_survive_a_resume_in_another_process(tmp_path: Path) -> None:
    """The run pauses before either condition is evaluated; `approve` in a new process imports the file
    again and each step gets its own condition back (a closure over 5 and a lambda, both `<lambda>`-like
    names that no import could find)."""
    source = tmp_path / "called_flow.py"
    source.write_text(CALLED)
    db = str(tmp_path / "o.db")
    paused = orchestrator("run", str(source), "--input", "n=7", "--json", "--db", db)
    assert paused.returncode == 3, paused.stderr
    run_id = json.loads(paused.stdout)["run_id"]
    approved = orchestrator("approve", run_id, "--json", "--db", db)
    assert approved.returncode == 0, approved.stderr
    doc = json.loads(approved.stdout)
    steps = {s["unit"]: s for s in doc["steps"]}
    assert doc["output"] == "big 7"
    assert steps["big"]["status"] == "succeeded"
    assert steps["small"]["status"] == "skipped"
    assert steps["small"]["skip_reason"] == "when called_flow:<lambda>(a) was false (a = 7)"


def test_a_mapped_step_reads_item_and_index_from_its_parameters(store: Store) -> None:
    wf = Workflow("py-map", inputs={"words": "array"}, output="shout")

    @wf.step
    def split(words: list[str]) -> dict[str, list[str]]:
        return {"docs": words}

    @wf.step(for_each="split.docs", max_parallel=2, when="item != 'skip'")
    def shout(item: str, index: int) -> str:
        return f"{index}:{item.upper()}"

    step = wf.spec.step("shout")
    assert (step.inputs, step.for_each, step.max_parallel) == ({"item": "$item", "index": "$index"}, "split.docs", 2)
    result = start_run(store, wf.bind(), {"words": ["a", "skip", "c"]})
    assert result.status == "succeeded"
    assert result.output == ["0:A", None, "2:C"]


def test_a_condition_reading_a_name_that_is_no_step_is_refused_naming_it() -> None:
    wf = Workflow("bad-when")
    wf.step(id="a")(lambda: 1)
    wf.step(id="b", when=lambda a, nope: True)(lambda: 2)
    with pytest.raises(SpecError) as raised:
        wf.bind()
    assert "reads 'nope', which is no step of this workflow" in str(raised.value)


def test_an_async_condition_is_refused() -> None:
    async def later(a: int) -> bool:
        return True

    wf = Workflow("async-when")
    wf.step(id="a")(lambda: 1)
    wf.step(id="b", when=later)(lambda: 2)
    with pytest.raises(SpecError) as raised:
        wf.bind()
    assert "is async; a condition is a plain function" in str(raised.value)


def test_a_condition_that_raises_fails_its_step_with_the_error(store: Store) -> None:
    wf = Workflow("raising-when", output="b")
    wf.step(id="a")(lambda: {"x": 1})
    wf.step(id="b", when=lambda a: a["missing"], inputs={"v": "a"})(lambda v: v)
    result = start_run(store, wf.bind(), {})
    assert result.status == "failed"
    failed = {r.unit: r for r in store.step_records(result.run_id, latest_only=True)}["b"]
    assert failed.status == "failed"
    assert "raised KeyError: 'missing'" in (failed.error or "")
