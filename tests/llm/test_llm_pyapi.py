"""LLM steps defined in Python (``@wf.llm``, ``wf.llm_step``) are the same spec as their YAML twin.

``tests/llm/workflows/triage_py.py`` is the Python twin of ``triage.yaml``: both load into equal
specs with equal content hashes, and both run through the CLI against the fake OpenAI-compatible
server to the same output and the same records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from orchestrator import Workflow
from orchestrator.bind.binding import step_object_key
from orchestrator.bind.loader import load_workflow
from orchestrator.bind.resolve import import_module
from orchestrator.core.errors import SpecError
from orchestrator.spec.llm_config import LLMConfig
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

WORKFLOWS = Path(__file__).parent / "workflows"
YAML = WORKFLOWS / "triage.yaml"
PYTHON = WORKFLOWS / "triage_py.py"


class Verdict(BaseModel):
    label: str


def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order_id": order_id}


def test_the_python_twin_of_triage_yaml_gives_an_equal_spec():
    from_yaml = load_workflow(YAML)
    from_python = load_workflow(PYTHON)
    assert from_python.spec == from_yaml.spec
    assert from_python.definition == from_yaml.definition
    assert from_python.content_hash == from_yaml.content_hash


def test_objects_become_references_and_travel_beside_the_spec():
    wf = import_module("triage_py", WORKFLOWS).wf  # as the loader loads it: by file, nothing left behind
    triage_tools = import_module("triage_tools", WORKFLOWS)  # the sibling module triage_py imported

    spec = wf.spec
    assert spec.step("classify").output_schema == "triage_tools:Category"
    assert spec.step("reply").tools == ["triage_tools:lookup_order"]
    assert spec.step("reply").run == "triage_tools:sign"
    objects = wf.objects
    assert objects["triage_tools:Category"] is triage_tools.Category
    assert objects["triage_tools:lookup_order"] is triage_tools.lookup_order
    assert objects[step_object_key("reply", "run")] is triage_tools.sign
    json.dumps(spec.definition())  # plain data only


def _script(fake: FakeOpenAI) -> None:
    fake.respond(completion(json.dumps({"category": "billing", "confidence": 0.9}), prompt_tokens=40,
                            completion_tokens=9))
    fake.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                            finish_reason="tool_calls"))
    fake.respond(completion("We refunded the duplicate charge on order 42.", prompt_tokens=60, completion_tokens=12))


def _comparable(doc: dict[str, Any]) -> list[dict[str, Any]]:
    strip = ("started_at", "ended_at", "duration", "record_id", "consumed", "inputs")
    steps = []
    for step in doc["steps"]:
        row = {k: v for k, v in step.items() if k not in strip}
        if "llm" in row:
            row["llm"] = {k: v for k, v in row["llm"].items() if k != "latency"}
            row["llm"]["turns"] = [{k: v for k, v in t.items() if k not in ("latency", "duration")}
                                   for t in row["llm"]["turns"]]
        steps.append(row)
    return steps


def test_the_python_twin_runs_through_the_cli_with_the_same_output(cli, fake_openai, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    docs = []
    for path in (YAML, PYTHON):
        _script(fake_openai)
        result = cli("run", str(path), "--input", "ticket=I was charged twice for order 42", "--json")
        assert result.exit_code == 0, result.stderr
        docs.append(result.json())
    from_yaml, from_python = docs
    assert from_python["output"] == from_yaml["output"] == \
        "We refunded the duplicate charge on order 42. -- support (billing)"
    assert _comparable(from_python) == _comparable(from_yaml)
    assert len(fake_openai.requests) == 6
    assert fake_openai.requests[3]["messages"] == fake_openai.requests[0]["messages"]
    assert fake_openai.requests[3]["response_format"] == fake_openai.requests[0]["response_format"]


def test_decorated_llm_step_infers_inputs_without_reply_or_ctx():
    wf = Workflow("w", inputs={"ticket": "string"}, llm={"provider": "openai", "model": "m"})

    @wf.llm(prompt="Classify {{ ticket }}", output_schema=Verdict, tools=[lookup])
    def classify(ticket: str, reply: Verdict, ctx) -> str:
        return reply.label

    @wf.llm(prompt="Reply to {{ classify }} about {{ ticket }}", max_tokens=50, llm={"model": "other"})
    def answer(classify: str, ticket: str, reply: str) -> str:
        return reply

    spec = wf.spec
    assert spec.step("classify").inputs == {"ticket": "$inputs.ticket"}
    assert spec.step("classify").type == "llm"
    assert spec.step("answer").inputs == {"classify": "classify", "ticket": "$inputs.ticket"}
    assert spec.llm == LLMConfig(provider="openai", model="m")
    ref = f"{__name__}:Verdict"
    assert spec.step("classify").output_schema == ref and wf.objects[ref] is Verdict
    assert spec.step("classify").tools == [f"{__name__}:lookup"]
    bound = wf.bind()  # binding resolves the references through Workflow.objects
    llm_step = bound.step("classify").function.fn
    assert llm_step.output_schema is Verdict and llm_step.tools == (lookup,)
    answer_step = bound.step("answer").function.fn
    assert (answer_step.config.model, answer_step.config.provider, answer_step.config.max_tokens) == \
        ("other", "openai", 50)


def test_objects_defined_in_a_function_resolve_through_objects():
    def make() -> Workflow:
        class Local(BaseModel):
            x: int

        def tool(a: int) -> int:
            """Add one."""
            return a + 1

        wf = Workflow("local", inputs={"q": "string"})
        wf.llm_step(id="ask", prompt="{{ q }}", output_schema=Local, tools=[tool])
        return wf

    wf = make()
    step = wf.bind().step("ask").function.fn
    assert step.output_schema.__name__ == "Local" and step.tools[0](1) == 2


def test_llm_step_without_a_function_infers_inputs_from_its_template():
    wf = Workflow("w", inputs={"ticket": "string", "unused": "string"})
    wf.llm_step(id="first", prompt="Ticket: {{ ticket }}")
    wf.llm_step(id="second", system="Context: {{ first }}", prompt="{{ ticket }} {{ next_needs }} {{ first }}",
                output_schema={"type": "object", "properties": {"a": {"type": "string"}}})
    spec = wf.spec
    assert spec.step("first").inputs == {"ticket": "$inputs.ticket"}
    assert spec.step("second").inputs == {"first": "first", "ticket": "$inputs.ticket"}
    assert spec.step("second").output_schema == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert spec.step("second").run is None
    wf.bind()


def test_unknown_keywords_are_spec_errors_naming_the_key_and_the_valid_keys():
    wf = Workflow("w", inputs={"t": "string"})
    with pytest.raises(SpecError) as decorated:
        @wf.llm(prompt="{{ t }}", temprature=0)
        def step(t: str, reply: str) -> str:
            return reply
    message = str(decorated.value)
    assert "unknown key 'temprature' in @w.llm(...)" in message
    assert "valid keys:" in message and "output_schema" in message and "max_turns" in message
    with pytest.raises(SpecError) as plain:
        wf.llm_step(id="x", prompt="{{ t }}", schema=Verdict)
    assert "unknown key 'schema' in w.llm_step(...)" in str(plain.value)
    assert "test_llm_pyapi.py" in str(plain.value)  # names the line that declared it


def test_an_llm_step_needs_a_prompt_and_llm_step_an_id():
    wf = Workflow("w")
    with pytest.raises(SpecError, match="needs prompt="):
        wf.llm_step(id="x")
    with pytest.raises(SpecError, match="needs id="):
        wf.llm_step(prompt="hi")
    with pytest.raises(SpecError, match="needs prompt="):
        @wf.llm(system="s")
        def f(reply: str) -> str:
            return reply


def test_bad_values_are_spec_errors_with_the_key():
    wf = Workflow("w", llm={"provider": "openai", "modle": "x"})
    wf.llm_step(id="x", prompt="hi")
    with pytest.raises(SpecError, match="llm.modle"):
        _ = wf.spec
    wf = Workflow("w")
    wf.llm_step(id="x", prompt="hi", max_turns=0)
    with pytest.raises(SpecError, match="steps.x.max_turns"):
        _ = wf.spec


def test_a_post_processor_that_does_not_fit_its_inputs_is_a_bind_error():
    wf = Workflow("w", inputs={"t": "string"})

    @wf.llm(prompt="{{ t }}", inputs={"t": "$inputs.t", "extra": "$inputs.t"})
    def step(t: str, reply: str) -> str:
        return reply

    with pytest.raises(SpecError, match="input 'extra' does not match any parameter"):
        wf.bind()
