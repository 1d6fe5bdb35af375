from __future__ import annotations

import itertools

import pytest

from gates import BUILTIN_GATES, FunctionGate, GateConfigError, GateResult, MaxWords, evaluate

_counter = itertools.count()


def _module(tmp_path, source: str) -> str:
    """Write a uniquely named module next to a 'workflow' in tmp_path and return its name."""
    name = f"custom_gates_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(source)
    return name


def test_importing_gates_registers_every_builtin():
    assert set(BUILTIN_GATES) == {"schema", "required_fields", "not_empty", "range", "regex", "min_items", "llm_judge",
                                  "evidence", "similarity", "max_words", "one_of"}


def test_a_gate_object_given_from_python_is_bound_unchanged():
    from orchestrator.bind.python_workflow import Workflow

    wf = Workflow("g")
    gate = MaxWords(limit=5)

    @wf.step(gates=[gate])
    def s() -> str:
        return "a few words"

    assert wf.bind().step("s").gates[0].check is gate


def test_build_gate_accepts_the_bare_name_short_form(build, ctx):
    assert build("not_empty").check("x", ctx).passed


def test_build_gate_lists_builtin_names_for_an_unknown_gate(build):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "min_itmes", "count": 3})
    message = str(err.value)
    assert message.startswith("step 'retrieve' gate 'min_itmes': unknown gate (did you mean 'min_items'?)")
    assert "built-in gates: evidence, llm_judge, max_words, min_items, not_empty, one_of, range, regex, " \
           "required_fields, schema, similarity" in message


def test_build_gate_names_a_labelled_gate_and_its_kind_in_errors(build):
    with pytest.raises(GateConfigError, match=r"^step 'retrieve' gate 'relevance' \(min_items\): unknown"):
        build({"gate": "min_items", "name": "relevance", "cout": 3})


def test_build_gate_reports_an_unresolvable_reference_as_config_error(build, tmp_path):
    with pytest.raises(GateConfigError,
                       match=r"^step 'retrieve' gate 'nowhere_mod:check': cannot import module"):
        build({"gate": "nowhere_mod:check"}, base_dir=str(tmp_path))
    name = _module(tmp_path, "def other(output):\n    return True\n")
    with pytest.raises(GateConfigError, match="has no attribute 'missing'"):
        build({"gate": f"{name}:missing"}, base_dir=str(tmp_path))


def test_custom_function_gate_gets_output_ctx_and_params(build, make_ctx, tmp_path):
    name = _module(tmp_path, (
        "def cheap(output, ctx, limit):\n"
        "    ok = output['price'] <= limit\n"
        "    return ok, f\"{ctx.step_id}: price {output['price']} vs limit {limit}\"\n"
    ))
    gate = build({"gate": f"{name}:cheap", "limit": 10}, base_dir=str(tmp_path))
    assert isinstance(gate, FunctionGate)
    result = gate.check({"price": 12}, make_ctx())
    assert result == GateResult(passed=False, score=0.0, reason="s: price 12 vs limit 10")


def test_custom_function_gate_without_ctx_is_called_with_output_only(build, ctx, tmp_path):
    name = _module(tmp_path, "def short(output, max_len=3):\n    return len(output) <= max_len\n")
    gate = build({"gate": f"{name}:short", "max_len": 5}, base_dir=str(tmp_path))
    assert gate.check("abcde", ctx).passed
    assert gate.check("abcdef", ctx).reason == f"{name}:short failed"


def test_custom_function_gate_rejects_unknown_and_missing_params(build, tmp_path):
    name = _module(tmp_path, "def cheap(output, *, limit):\n    return output <= limit\n")
    with pytest.raises(GateConfigError, match=rf"^step 'retrieve' gate '{name}:cheap': unknown parameter "
                                              r"'limt'; valid: limit \(did you mean 'limit'\?\)"):
        build({"gate": f"{name}:cheap", "limt": 3}, base_dir=str(tmp_path))
    with pytest.raises(GateConfigError, match="missing required parameter 'limit'"):
        build({"gate": f"{name}:cheap"}, base_dir=str(tmp_path))


def test_custom_gate_class_is_instantiated_with_params(build, ctx, tmp_path):
    name = _module(tmp_path, (
        "from dataclasses import dataclass\n"
        "from orchestrator.spec.model import GateResult\n"
        "@dataclass(frozen=True)\n"
        "class HasWord:\n"
        "    name = 'has_word'\n"
        "    word: str\n"
        "    def check(self, output, ctx):\n"
        "        return GateResult(self.word in output, reason=f'looked for {self.word!r}')\n"
    ))
    gate = build({"gate": f"{name}:HasWord", "word": "acme"}, base_dir=str(tmp_path))
    assert gate.check("acme wins", ctx).passed
    with pytest.raises(GateConfigError, match="unknown parameter 'wrd'; valid: word"):
        build({"gate": f"{name}:HasWord", "wrd": "acme"}, base_dir=str(tmp_path))


def test_custom_gate_class_without_check_is_a_config_error(build, tmp_path):
    name = _module(tmp_path, "class NotAGate:\n    pass\n")
    with pytest.raises(GateConfigError, match=r"NotAGate has no check\(output, ctx\) method"):
        build({"gate": f"{name}:NotAGate"}, base_dir=str(tmp_path))


def test_custom_gate_class_rejecting_its_params_is_a_config_error(build, tmp_path):
    name = _module(tmp_path, (
        "class Picky:\n"
        "    def __init__(self, level=1):\n"
        "        if level > 3:\n"
        "            raise ValueError('level must be at most 3')\n"
        "    def check(self, output, ctx):\n"
        "        return True\n"
    ))
    with pytest.raises(GateConfigError, match=r"Picky\(\.\.\.\) raised ValueError: level must be at most 3"):
        build({"gate": f"{name}:Picky", "level": 9}, base_dir=str(tmp_path))


def test_evaluate_reports_a_gate_that_raises_as_a_failed_verdict(build, ctx, tmp_path):
    name = _module(tmp_path, "def broken(output):\n    raise RuntimeError('service down')\n")
    gate = build({"gate": f"{name}:broken"}, base_dir=str(tmp_path))
    evaluation = evaluate(gate, "broken", "x", ctx)
    assert not evaluation.result.passed
    assert evaluation.result.reason == "gate 'broken' raised RuntimeError: service down"


def test_evaluate_reports_a_function_gate_returning_garbage_as_a_failed_verdict(build, ctx, tmp_path):
    name = _module(tmp_path, "def vague(output):\n    return 'looks fine'\n")
    evaluation = evaluate(build({"gate": f"{name}:vague"}, base_dir=str(tmp_path)), "vague", "x", ctx)
    assert not evaluation.result.passed
    assert "returned str; expected GateResult or bool" in evaluation.result.reason


def test_builtin_gates_satisfy_the_gate_protocol_and_stay_immutable():
    from dataclasses import FrozenInstanceError

    from gates import Gate

    gate = MaxWords(limit=3)
    assert isinstance(gate, Gate)
    with pytest.raises(FrozenInstanceError):
        gate.limit = 4  # type: ignore[misc]
