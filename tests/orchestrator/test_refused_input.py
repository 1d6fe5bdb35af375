"""Input that used to pass the first checks and then cost a run, or broke with an internal error, is
refused up front: exit 2, one line naming the file, line, step and key (or the flag), and nothing
stored."""

from __future__ import annotations

import re
import typing

import pytest
import typer
from typer.models import OptionInfo

from orchestrator import Workflow
from orchestrator.cli import app
from orchestrator.core.errors import SpecError
from tests.conftest import FIXTURES

HUGE = "100000000000000000000"


def _flag(option: OptionInfo) -> str:
    """An option's first flag (under ``Annotated`` typer keeps a lone flag where the default would go)."""
    return option.param_decls[0] if option.param_decls else str(option.default)


def _integer_flags() -> list[tuple[tuple[str, ...], str]]:
    """Every integer option of every command, as (command path, flag), read from the commands' annotations."""
    found: list[tuple[tuple[str, ...], str]] = []

    def commands(group: typer.Typer, path: tuple[str, ...]):
        for info in group.registered_commands:
            yield (*path, info.name or info.callback.__name__.replace("_", "-")), info.callback
        for sub in group.registered_groups:
            yield from commands(sub.typer_instance, (*path, sub.name))

    for path, callback in commands(app, ()):
        for hint in typing.get_type_hints(callback, include_extras=True).values():
            if typing.get_origin(hint) is not typing.Annotated:
                continue
            base, *extras = typing.get_args(hint)
            if int in (base, *typing.get_args(base)) and bool is not base:
                found += [(path, _flag(info)) for info in extras if isinstance(info, OptionInfo)]
    return found


INTEGER_FLAGS = _integer_flags()


def test_the_commands_have_integer_flags_to_check():
    assert {flag for _, flag in INTEGER_FLAGS} >= {"--limit", "--offset", "--samples", "--seed", "--min-runs",
                                                    "--parallel", "--max-runs", "--concurrency", "--max-concurrency"}


@pytest.mark.parametrize(("path", "flag"), INTEGER_FLAGS, ids=[f"{' '.join(p)} {f}" for p, f in INTEGER_FLAGS])
def test_a_huge_integer_flag_is_refused_naming_the_flag(cli, path, flag, tmp_path):
    workflow = tmp_path / "w.yaml"
    workflow.write_text("name: w\nsteps:\n  - {id: a, run: 'json:dumps', inputs: {obj: 1}}\n")
    cli("run", str(workflow))  # a database and a run, so a command that needs them reaches its flags
    arguments = {"run": [str(workflow)], "attribute": ["x", "--method", "trace"],
                 "dataset": ["x", "--from-runs"] if path[1:] == ("create",) else ["x"],
                 "experiment": [str(workflow), "--dataset", "x"] if path[1:] == ("run",) else ["x"]}
    command = path[0] if path else ""
    args = [*path, *arguments.get(command, ["x"] if command in ("show", "resume", "approve", "retry", "reject",
                                                               "trace", "label", "replay") else []),
            flag, HUGE]
    result = cli(*args)
    assert result.exit_code == 2, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    if path == ("runs",) and flag in ("--limit", "--offset"):  # bounded where the API's listing is, one line
        assert result.stderr.strip() == "error: --limit must be at most 1000000 and --offset at most 1000000000"
    else:
        refused = rf"Error: Invalid value for '{flag}': Input should be less than or equal to \d+"
        assert re.fullmatch(refused, last), last


def one_error_line(result) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


# -- workflow files that validate refuses, each at the file and line of the mistake -----------------

BAD_FILES = [
    ("merge_keys_bad.yaml", "merge_keys_bad.yaml:5: steps.b.timeout: Input should be greater than 0 (got -1)"),
    ("merge_not_mapping.yaml", "merge_not_mapping.yaml:4:10: steps[0]: a merge key (<<) takes a mapping, or a list "
                               "of mappings, such as *base"),
    ("for_each_string_input.yaml", "for_each_string_input.yaml:7: steps.each.for_each: step 'each' for_each reads "
                                   "workflow input 'q', declared type: string; a step runs once per item of a list, "
                                   "so declare it type: array"),
    ("for_each_malformed.yaml", "for_each_malformed.yaml:6: steps.each.for_each: step 'each' for_each: 'a.' must be "
                                "STEP, STEP.field or $inputs.KEY (a list known at run time)"),
    ("input_malformed.yaml", "input_malformed.yaml:6: steps.b.inputs.obj: step 'b' input 'obj': 'a..items' is not a "
                             "reference: write STEP, STEP.field, $inputs.KEY, $item.field or $previous.field (a name "
                             "after each dot), or put a literal string under params:"),
    ("llm_bad_base_url.yaml", "llm_bad_base_url.yaml:6: steps.ask.llm.base_url: base_url 'notaurl' is not an "
                              "http(s) URL such as http://127.0.0.1:8000/v1"),
    ("llm_empty_model.yaml", "llm_empty_model.yaml:2: llm.model: model is empty; name a model (smollm2 for the "
                             "embedded one)"),
    ("llm_unknown_local_model.yaml", "llm_unknown_local_model.yaml:7: steps.ask.llm.model: step 'ask': unknown local "
                                     "model 'no-such-local-model': use 'smollm2' or the path of a .gguf file"),
    ("retry_unknown_builtin.yaml", "retry_unknown_builtin.yaml:6: steps.src.retry.exceptions: step 'src' retry "
                                   "exception 'NoSuchError' is not a built-in exception; name any other class as "
                                   "module:Class"),
    ("side_effects_yes.yaml", "side_effects_yes.yaml:6: steps.pay.side_effects: 'yes' is not a boolean; write "
                              "true or false"),
    ("repeat_max_true.yaml", "repeat_max_true.yaml:6: steps.draft.repeat.max: true is not a whole number"),
    ("approve_yes.yaml", "approve_yes.yaml:8: steps.ask.tools[0].approve: 'yes' is not a boolean; write true or "
                         "false"),
    ("attempts_float.yaml", "attempts_float.yaml:6: steps.src.retry.attempts: 2.0 is not a whole number"),
    ("timeout_true.yaml", "timeout_true.yaml:3: steps.a.timeout: true is not a number"),
    ("critic_verifies_unknown.yaml", "critic_verifies_unknown.yaml:8: steps.check.verifies: step 'check' verifies "
                                     "names 'nosuch', which is not a step. Defined steps: ['src', 'check']"),
    ("critic_verifies_params.yaml", "critic_verifies_params.yaml:8: steps.check.verifies: step 'check' verifies "
                                    "'src', and a critic without inputs: is given each verified step's output under "
                                    "that step's id, but steps:agree(a, b) has no parameter 'src'; add inputs: "
                                    "(inputs: {a: src}) or name the parameters after the steps"),
    ("when_incomplete.yaml", "when_incomplete.yaml:9: steps.b.when: step 'b' when: condition 'a.text ==' does not "
                             "parse: unexpected end of the condition"),
    ("tools_twice.yaml", "tools_twice.yaml:7: steps.ask.tools: tools lists 'json:dumps' once with approve: false, "
                         "once with approve: true; list each tool once"),
]


@pytest.mark.parametrize(("name", "message"), BAD_FILES, ids=[n for n, _ in BAD_FILES])
def test_validate_refuses_each_bad_file_at_its_line(cli, name, message):
    result = cli("validate", str(FIXTURES / name), db=False)
    assert result.exit_code == 2
    assert one_error_line(result) == f"error: {FIXTURES / name}:{message.split(':', 1)[1]}"


def test_merge_keys_are_resolved_and_x_keys_ignored(cli):
    result = cli("run", str(FIXTURES / "merge_keys.yaml"), "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    steps = {s["step_id"]: s for s in doc["steps"]}
    assert (steps["a"]["type"], steps["b"]["type"]) == ("reasoning", "action")  # an explicit key wins
    assert steps["a"]["output"] == '{"a": 2, "b": 1}'  # the merged params reached the step
    assert doc["output"] == '"{\\"a\\": 2, \\"b\\": 1}"'


def test_a_file_of_another_suffix_is_told_every_suffix_that_works(cli, tmp_path):
    path = tmp_path / "flow.txt"
    path.write_text("name: x\nsteps: []\n")
    result = cli("validate", str(path), db=False)
    assert result.exit_code == 2
    assert one_error_line(result) == f"error: {path}: a workflow file ends in .yaml, .yml, .json or .py"


# -- names a person gives: one line of printable text -------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (("approve", "RUN", "--reviewer", "ann\nlee"),
     "error: reviewer 'ann\\nlee' holds the control character '\\n'; a name is one line of printable text"),
    (("reject", "RUN", "--reviewer", "ann\tlee"),
     "error: reviewer 'ann\\tlee' holds the control character '\\t'; a name is one line of printable text"),
    (("retry", "RUN", "--step", "score\x1b[2J"),
     "error: step 'score\\x1b[2J' holds the control character '\\x1b'; a name is one line of printable text"),
    (("label", "RUN", "--correct", "--reviewer", "ann\rlee"),
     "error: reviewer 'ann\\rlee' holds the control character '\\r'; a name is one line of printable text"),
])
def test_a_name_holding_a_control_character_is_refused_and_nothing_is_stored(cli, args, message):
    paused = cli("run", str(FIXTURES / "gated.yaml"), "--json")
    assert paused.exit_code == 3, paused.stderr
    run_id = paused.json()["run_id"]
    before = cli("show", run_id, "--json").json()
    result = cli(*[run_id if a == "RUN" else a for a in args])
    assert result.exit_code == 2
    assert one_error_line(result) == message
    after = cli("show", run_id, "--json").json()
    assert (after["status"], after["reviews"], after["outcomes"]) == ("paused", before["reviews"], before["outcomes"])


@pytest.mark.parametrize("option", ["--workflow", "--blamed"])
def test_a_listing_filter_holding_a_newline_is_refused(cli, option):
    result = cli("runs", option, "a\nb")
    assert result.exit_code == 2
    what = "workflow" if option == "--workflow" else "blamed step"
    assert one_error_line(result) == (f"error: {what} 'a\\nb' holds the control character '\\n'; a name is one line "
                                      "of printable text")


# -- the Python API: a bad step is a SpecError naming the step and the key, as in YAML -------------

def _echo(x):
    return x


PYTHON_STEPS = [
    (lambda wf: wf.step(_echo, gates=[{"gate": "range", "timeout": -1}]),
     "steps._echo.gates[0].timeout", "Input should be greater than 0 (got -1)"),
    (lambda wf: wf.step(_echo, side_effects="yes"),
     "steps._echo.side_effects", "'yes' is not a boolean; write true or false"),
    (lambda wf: wf.step(_echo, baseline=3),
     "steps._echo.baseline", "step '_echo': 3 is not a function, a class or a 'module:name' reference"),
    (lambda wf: wf.llm(_echo, prompt="hi", tools=[{"approve": True}]), "steps._echo.tools[0].ref",
     "missing required key 'ref'"),
    (lambda wf: wf.approval_step(id="ok", inputs={"x": "$inputs.x"}, output_schema=3),
     "steps.ok.output_schema", "step 'ok': 3 is not a function, a class or a 'module:name' reference"),
    (lambda wf: wf.approval_step(id="ok", inputs={"x": "$inputs.x"}, review_timeout=True),
     "steps.ok.review_timeout", "true is not a number"),
]


@pytest.mark.parametrize(("register", "key", "message"), PYTHON_STEPS,
                         ids=[key for _, key, _ in PYTHON_STEPS])
def test_the_python_api_refuses_a_bad_step_naming_the_step_and_the_key(register, key, message):
    wf = Workflow("python-steps", inputs={"x": "string"})
    register(wf)
    with pytest.raises(SpecError) as caught:
        wf.bind()
    assert [(p.key, p.message) for p in caught.value.problems] == [(key, message)]
    assert "errors.pydantic.dev" not in str(caught.value)
