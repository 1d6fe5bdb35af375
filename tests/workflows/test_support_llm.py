"""The support-triage example on the real embedded model (SmolLM2-135M via llama.cpp), offline.

Skipped with a reason where the ``local-llm`` extra is not installed; CI installs it. The model
is tiny and often wrong, which is the point of the example: its gates catch it.
"""

from __future__ import annotations

import pytest

from gates.llm_judge import LLMJudge
from orchestrator.spec.context import StepContext
from orchestrator.spec.llm_config import LLMConfig
from tests.conftest import REPO
from tests.documented import documented_input

pytest.importorskip("llama_cpp", reason="the embedded model needs the local-llm extra: pip install -e '.[local-llm]'")

SUPPORT = REPO / "workflows" / "support" / "support.yaml"
TICKET = documented_input(SUPPORT, "ticket")  # the command docs/llm.md (and the README) show


pytestmark = pytest.mark.xdist_group("support_example_run")
"""One worker runs the module: the paused run of the support example (module-scoped, on the embedded model) is
made once, where spread over several workers each would make it again."""


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory):
    from typer.testing import CliRunner

    from orchestrator.cli import app

    db = f"sqlite:///{tmp_path_factory.mktemp('support') / 'o.db'}"
    result = CliRunner().invoke(app, ["run", str(SUPPORT), "--input", f"ticket={TICKET}", "--json", "--db", db])
    return result, db


@pytest.mark.slow
def test_the_example_runs_offline_and_its_judge_pauses_the_weak_draft(paused_run):
    result, _ = paused_run
    assert result.exit_code == 3, result.output
    doc = __import__("json").loads(result.stdout)
    steps = {s["step_id"]: s for s in doc["steps"]}
    assert steps["classify"]["status"] == "succeeded"
    assert steps["classify"]["output"]["category"] in ("billing", "account", "shipping", "bug", "other")
    assert steps["draft"]["status"] == "gate_failed"
    judge = next(g for g in steps["draft"]["gates"] if g["gate"] == "llm_judge")
    assert judge["reason"].startswith("judge smollm2:")


def test_the_record_holds_the_rendered_prompt_with_inputs_and_the_consumers_needs(paused_run):
    result, _ = paused_run
    classify = {s["step_id"]: s for s in __import__("json").loads(result.stdout)["steps"]}["classify"]
    llm = classify["llm"]
    prompt = llm["messages"][-1]["content"]
    assert TICKET in prompt
    assert "a category and the knowledge-base articles that answer the ticket" in prompt  # draft's needs
    assert llm["usage"]["input_tokens"] > 0 and llm["usage"]["output_tokens"] > 0
    assert (llm["provider"], llm["model"], llm["cost"]) == ("local", "smollm2", 0.0)


def _ctx() -> StepContext:
    return StepContext(run_id="r", step_id="s", workflow="w", agent="a", step_type="llm",
                       llm_defaults=LLMConfig(provider="local", model="smollm2", max_tokens=60))


@pytest.mark.slow
def test_a_judge_gate_applies_its_threshold_to_the_model_score():
    lenient = LLMJudge(rubric="The text is a greeting.", threshold=0.0).check("Hello there!", _ctx())
    strict = LLMJudge(rubric="The text is a greeting.", threshold=1.0).check("zzz", _ctx())
    assert lenient.passed and 0.0 <= lenient.score <= 1.0
    assert lenient.details["judge"]["usage"]["input_tokens"] > 0
    assert strict.passed is (strict.score >= 1.0)
