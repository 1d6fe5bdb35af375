"""`workflow:` declares a step that runs another workflow as a child run; `validate` checks both.

The child file is resolved next to the parent's; its problems are reported with its own file and
line; the step's inputs must be the child's declared inputs (every required one given); a workflow
that includes itself, directly or through others, is refused naming the cycle. In Python, a step
runs a ``Workflow`` object or a file path (``wf.workflow_step``).
"""

from __future__ import annotations

import json

import pytest

from orchestrator import Workflow
from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import SpecError
from tests.flow.conftest import FLOW


def test_validate_names_the_child_workflow_a_step_runs(cli):
    res = cli("validate", str(FLOW / "tree_parent.yaml"), db=False)
    assert res.exit_code == 0, res.stderr
    assert ("step research runs workflow tree_research.yaml ('tree-research', 2 steps: retrieve -> summarize) "
            "as a child run") in res.stdout


def test_a_workflow_that_includes_itself_is_refused_naming_the_cycle(cli):
    res = cli("validate", str(FLOW / "tree_self.yaml"), db=False)
    assert res.exit_code == 2
    assert "tree_self.yaml:7: steps.again.workflow: step 'again': workflow includes itself: " in res.stderr
    assert res.stderr.count("tree_self.yaml") == 3  # the file, then the cycle: tree_self.yaml -> tree_self.yaml
    assert "Traceback" not in res.stderr


def test_a_cycle_through_another_workflow_is_refused_with_the_whole_chain(cli):
    res = cli("validate", str(FLOW / "tree_cycle_a.yaml"), db=False)
    assert res.exit_code == 2
    assert "tree_cycle_a.yaml:4: steps.into_b.workflow: step 'into_b' runs workflow tree_cycle_b.yaml" in res.stderr
    line = next(ln for ln in res.stderr.splitlines() if "includes itself" in ln)
    assert "tree_cycle_b.yaml:4: steps.back_to_a.workflow:" in line
    chain = line.split("workflow includes itself: ")[1].split(";")[0].split(" -> ")
    assert [c.rsplit("/", 1)[-1] for c in chain] == ["tree_cycle_a.yaml", "tree_cycle_b.yaml", "tree_cycle_a.yaml"]


def test_the_childs_own_problems_are_reported_with_its_file_and_line(cli):
    res = cli("validate", str(FLOW / "tree_bad_child.yaml"), db=False)
    assert res.exit_code == 2
    assert "tree_bad_child.yaml:4: steps.research.workflow: step 'research' runs workflow tree_broken_child.yaml, " \
           "which is invalid (1 problem below)" in res.stderr
    assert "tree_broken_child.yaml:8: steps.retrieve.gatez: unknown key 'gatez' in steps.retrieve" in res.stderr


def test_the_steps_inputs_are_checked_against_the_childs_declared_inputs(cli):
    res = cli("validate", str(FLOW / "tree_bad_inputs.yaml"), db=False)
    assert res.exit_code == 2
    assert ("tree_bad_inputs.yaml:7: steps.research.inputs.topc: step 'research' gives input 'topc' to workflow "
            "tree_research.yaml, which declares no such input; its inputs: ['count', 'topic']") in res.stderr
    assert "does not give workflow tree_research.yaml its required input 'topic' (string)" in res.stderr


def test_a_workflow_step_cannot_also_run_a_function(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text(f"name: both\nsteps:\n  - id: research\n    workflow: {FLOW / 'tree_research.yaml'}\n"
                    "    run: tree_steps:plan\n")
    with pytest.raises(SpecError) as caught:
        load_workflow(path)
    assert "runs workflow" in str(caught.value) and "cannot also have run" in str(caught.value)
    assert f"{path}:3:" in str(caught.value)


def test_the_json_schema_knows_the_workflow_key(cli):
    res = cli("schema", db=False)
    schema = json.loads(res.stdout)
    step = schema["$defs"]["StepSpec"]["properties"]
    assert "workflow" in step


def test_a_python_file_runs_the_workflow_no_other_includes_and_its_child_is_a_workflow_object():
    bound = load_workflow(FLOW / "tree_py.py")
    assert bound.name == "tree-parent"
    child = bound.step("research").child
    assert child is not None and child.name == "tree-research"
    assert bound.spec.step("research").workflow == "tree_py:research"
    assert child.spec == load_workflow(FLOW / "tree_research.yaml").spec


def test_a_python_workflow_step_may_name_a_file_next_to_its_own(tmp_path):
    wf = Workflow("by-path", inputs={"topic": "string"})
    wf.workflow_step(id="research", workflow=str(FLOW / "tree_research.yaml"), inputs={"topic": "$inputs.topic"})
    bound = wf.bind()
    child = bound.step("research").child
    assert child is not None and child.order == ("retrieve", "summarize")


def test_a_python_workflow_cannot_include_itself():
    wf = Workflow("selfish")
    with pytest.raises(SpecError, match="workflow includes itself: selfish -> selfish"):
        wf.workflow_step(id="again", workflow=wf)


def test_python_workflows_including_each_other_are_refused_naming_the_cycle():
    first, second = Workflow("first"), Workflow("second")
    first.workflow_step(id="to_second", workflow=second)
    second.workflow_step(id="to_first", workflow=first)
    with pytest.raises(SpecError, match="workflow includes itself") as caught:
        first.bind()
    assert "first" in str(caught.value) and "second" in str(caught.value)


def test_a_python_child_step_infers_its_inputs_from_the_childs_declared_inputs():
    child = Workflow("child", inputs={"topic": "string", "count": {"type": "integer", "default": 2}})
    child.step(id="echo", inputs={"topic": "$inputs.topic"})(lambda topic: topic)
    parent = Workflow("parent", inputs={"topic": "string"})
    parent.workflow_step(id="research", workflow=child)
    assert parent.spec.step("research").inputs == {"topic": "$inputs.topic"}
