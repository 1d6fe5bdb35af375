"""A model answer is always bounded: a step without ``max_tokens`` asks for its provider's default (512 tokens
for the embedded model, whose context holds 2 048; 4 096 for an OpenAI-compatible endpoint), and a
``max_tokens`` of the step or of the workflow's ``llm:`` block wins over it."""

from __future__ import annotations

from orchestrator.spec.llm_config import DEFAULT_MAX_TOKENS, LLMConfig
from tests.llm.fake_openai_server import completion

WORKFLOW = """\
name: bounded
llm: {provider: openai, model: gpt-4o-mini, temperature: 0}
steps:
  - id: free
    type: llm
    prompt: "One word."
  - id: short
    type: llm
    prompt: "One word after {{ free }}."
    inputs: {free: free}
    max_tokens: 50
"""


def test_a_step_without_max_tokens_asks_for_the_providers_default_and_a_given_one_wins(
        cli, fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    path = tmp_path / "bounded.yaml"
    path.write_text(WORKFLOW)
    fake_openai.respond(completion("alpha"))
    fake_openai.respond(completion("beta"))
    result = cli("run", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert [request["max_tokens"] for request in fake_openai.requests] == [4096, 50]


def test_the_defaults_bound_the_embedded_model_below_its_context():
    assert DEFAULT_MAX_TOKENS == {"local": 512, "openai": 4096}
    assert LLMConfig(provider="local").resolved_max_tokens() == 512
    assert LLMConfig(provider="local", max_tokens=64).resolved_max_tokens() == 64
