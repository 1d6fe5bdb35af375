"""Names print on one line and inputs can be referenced, and a custom gate is held to its own
signature and to scores in [0, 1]: each is a ``validate`` error (exit 2, one line per problem,
nothing stored) or a failed verdict, never a surprise at run time."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.api import Orchestrator
from orchestrator.bind.python_workflow import Workflow
from orchestrator.core.errors import SpecError
from tests.conftest import FIXTURES


def test_empty_and_multi_line_names_and_unreferable_inputs_are_validate_errors(cli, db_url):
    path = FIXTURES / "names_bad.yaml"
    expected = [
        f"error: {path}:1: name: workflow name is empty",
        f"error: {path}:2: inputs: input name 'bad key!' cannot be referenced as $inputs.NAME: it must start with a "
        "letter or _ and hold only letters, digits, _ and -",
        f"error: {path}:6: steps.s.agent: agent 'retriever\\nsecond line' holds the control character '\\n'; a name "
        "is one line of printable text",
        f"error: {path}:9: steps.s.gates[0].name: gate name 'tab\\there' holds the control character '\\t'; a name "
        "is one line of printable text",
    ]
    for command in ("validate", "run"):
        result = cli(command, str(path), db=command == "run")
        assert result.exit_code == 2
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines() == expected
    assert not Path(db_url.split("///", 1)[1]).exists()


@pytest.mark.parametrize("name", ["", "   ", "daily\nreport", "etl\x1b[31m"])
def test_a_python_workflow_name_is_held_to_the_same_rule(name):
    wf = Workflow(name)

    @wf.step
    def s() -> int:
        return 1

    with pytest.raises(SpecError, match=r"workflow name .*(is empty|holds the control character)"):
        wf.bind()


def test_a_custom_gate_missing_a_required_parameter_fails_validate(cli, db_url):
    path = FIXTURES / "gate_missing_param.yaml"
    for command in ("validate", "run"):
        result = cli(command, str(path), db=command == "run")
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"error: {path}:6: steps.s.gates[0]: step 's' gate 'steps:under_limit': missing required parameter "
            "'limit' of steps:under_limit; give it as a key of the gate (the step context goes only to a parameter "
            "named ctx)"]
    assert not Path(db_url.split("///", 1)[1]).exists()


def test_a_custom_gate_score_outside_0_1_is_a_failed_verdict(cli):
    result = cli("run", str(FIXTURES / "gate_score_out_of_range.yaml"), "--json")
    assert result.exit_code == 3  # the step pauses on the failed verdict, as for a gate that raised
    [step] = result.json()["steps"]
    [gate] = step["gates"]
    assert (gate["passed"], gate["reason"]) == (
        False, "gate 'steps:overconfident' returned score 7.0; a score is a number in [0, 1]")


def test_a_context_parameter_is_recognised_by_name_or_annotation():
    from gates.factory import FunctionGate
    from orchestrator.spec.context import StepContext

    def named(output, ctx):
        return True

    def annotated(output, context: StepContext):
        return True

    def defaulted(output, limit=3):
        return output <= limit

    assert FunctionGate.wrap(named, {}).ctx_mode == "keyword"
    assert FunctionGate.wrap(annotated, {}).ctx_mode == "positional"
    assert FunctionGate.wrap(defaulted, {}).ctx_mode is None


# A plain function as a gate follows one rule, given from YAML (`gate: module:fn`) or from Python
# (`gates=[fn]`, `gates=[{"gate": fn, "limit": 2}]`): the output first, the step context only to a
# parameter named ctx (or a second one annotated StepContext), every other parameter from the gate's
# keys or its default; a required one left out is refused when the workflow is defined.

def under_limit(output, limit):
    return output <= limit


def at_most_three(output, limit=3):
    return (output <= limit, f"{output} against {limit}")


def names_its_step(output, ctx):
    return (ctx.step_id == "s", f"ctx is a {type(ctx).__name__} of step {ctx.step_id}")


async def awaited(output, limit=3):
    return (output <= limit, f"awaited {output} against {limit}")


def _one_gated_step(gate, output: int = 2) -> Workflow:
    wf = Workflow("gated")

    @wf.step(id="s", gates=[gate])
    def s() -> int:
        return output

    return wf


@pytest.fixture
def orch(db_url: str) -> Iterator[Orchestrator]:
    with Orchestrator(db_url) as o:
        yield o


def _verdict(orch: Orchestrator, wf: Workflow) -> tuple[str, bool, str]:
    run = orch.run(wf)
    [gate] = run.step("s").gates
    return run.status, gate.passed, gate.reason


def test_a_python_gate_function_missing_a_required_parameter_is_refused_at_definition():
    wf = _one_gated_step(under_limit)
    with pytest.raises(SpecError) as caught:
        wf.bind()
    [problem] = caught.value.problems
    assert (problem.path, problem.key) == (f"{__file__}:{_one_gated_step.__code__.co_firstlineno + 3}",
                                           "steps.s.gates[0]")
    assert problem.message == (
        "step 's' gate 'under_limit': missing required parameter 'limit' of under_limit; give it as a key of the "
        "gate (the step context goes only to a parameter named ctx)")


@pytest.mark.parametrize(("gate", "expected"), [
    (at_most_three, ("succeeded", True, "2 against 3")),  # the default, never the step context
    ({"gate": under_limit, "limit": 1}, ("paused", False, "under_limit failed")),
    ({"gate": at_most_three, "limit": 5, "name": "five"}, ("succeeded", True, "2 against 5")),
    (functools.partial(under_limit, limit=2), ("succeeded", True, "under_limit passed")),
    (names_its_step, ("succeeded", True, "ctx is a StepContext of step s")),
    ({"gate": awaited, "limit": 1}, ("paused", False, "awaited 2 against 1")),
], ids=["default", "dict-keys", "dict-name", "partial", "ctx", "async"])
def test_a_python_gate_function_gets_its_parameters_by_the_documented_rule(orch, gate, expected):
    assert _verdict(orch, _one_gated_step(gate)) == expected


def test_an_async_function_gate_from_yaml_is_awaited(cli, tmp_path):
    (tmp_path / "agates.py").write_text("async def short(output, limit: int = 3):\n"
                                        "    return (output <= limit, f'awaited {output} against {limit}')\n"
                                        "def two() -> int:\n    return 2\n")
    (tmp_path / "agated.yaml").write_text("name: agated\nsteps:\n  - id: s\n    run: 'agates:two'\n"
                                          "    gates: [{gate: 'agates:short', limit: 1}]\n")
    doc = cli("run", str(tmp_path / "agated.yaml"), "--json").json()
    [gate] = doc["steps"][0]["gates"]
    assert (doc["status"], gate["passed"], gate["reason"]) == ("paused", False, "awaited 2 against 1")
