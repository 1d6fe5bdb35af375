"""The example workflows' step functions, called directly in dependency order.

A tiny walker reads each YAML file, resolves step inputs (``$inputs.KEY``, ``STEP_ID``,
``STEP_ID.field``, constants) and calls the step functions, without the executor or a store.
It tells the story of the procurement example: the correct path recommends the ground-truth
vendor; an injected fault at step 4 fails the relevance threshold, propagates faithfully to a
confident wrong recommendation, and is caught by the critic; the reviewer's edit fixes it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gates.base import evaluate, normalize
from gates.factory import build_gate
from orchestrator.bind.loader import load_spec as load_any_spec
from orchestrator.bind.loader import load_workflow
from orchestrator.bind.resolve import resolve_callable
from orchestrator.engine.run_state import RunResult
from orchestrator.service.runner import start_run
from orchestrator.spec.context import NextNeed, StepContext
from orchestrator.spec.model import GateResult, WorkflowSpec, parse_reference
from orchestrator.store import Store

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
PROCUREMENT = WORKFLOWS / "procurement" / "procurement.yaml"
EDIT_JSON = WORKFLOWS / "procurement" / "procurement_edit_correct.json"
HELLO = WORKFLOWS / "hello" / "hello.yaml"
RESEARCH = WORKFLOWS / "research" / "research.yaml"
ALL_YAML = sorted(WORKFLOWS.rglob("*.yaml"))


def load_spec(path: Path) -> WorkflowSpec:
    return WorkflowSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def make_ctx(spec: WorkflowSpec, step_id: str, upstream: dict[str, Any],
             feedback: list[GateResult] | None = None) -> StepContext:
    """A StepContext like the executor's: next_needs from the consumers' needs/description."""
    step = spec.step(step_id)
    needs = [NextNeed(s.id, s.agent_name, s.needs, s.description) for s in spec.steps
             if step_id in s.step_dependencies() and (s.needs or s.description)]
    return StepContext(run_id="test-run", step_id=step_id, workflow=spec.name, agent=step.agent_name,
                       step_type=step.type, idempotency_key=f"key-{step_id}", next_needs=needs,
                       gate_feedback=list(feedback or []), upstream=dict(upstream))


def walk(path: Path, inputs: dict[str, Any] | None = None,
         replace: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run every step in listed order; ``replace`` gives outputs to use instead of calling a step.

    Outputs are stored the way the executor stores them: as plain JSON, a critic's verdict as
    ``GateResult.to_json()``.
    """
    spec = load_spec(path)
    given = inputs or {}
    workflow_inputs = {k: given.get(k, v.default) for k, v in spec.inputs.items()}
    outputs: dict[str, Any] = {}
    for step in spec.steps:
        missing = [d for d in step.step_dependencies() if d not in outputs]
        assert not missing, f"{path.name}: step {step.id!r} is listed before its dependencies {missing}"
        if replace and step.id in replace:
            outputs[step.id] = replace[step.id]
            continue
        kwargs: dict[str, Any] = {}
        for param, ref in step.inputs.items():
            parsed = parse_reference(ref)
            if parsed is None:
                kwargs[param] = ref
            elif parsed[0] == "input":
                kwargs[param] = workflow_inputs[parsed[1]]
            else:
                value = outputs[parsed[1]]
                for part in parsed[2].split(".") if parsed[2] else []:
                    value = value[int(part)] if isinstance(value, list) else value[part]
                kwargs[param] = value
        fn = resolve_callable(step.run, path.parent)
        if "ctx" in inspect.signature(fn).parameters:
            kwargs["ctx"] = make_ctx(spec, step.id, outputs)
        out = fn(**kwargs)
        if isinstance(out, GateResult):
            out = out.to_json()
        outputs[step.id] = json.loads(json.dumps(out))
    return outputs


def procurement_module() -> Any:
    return resolve_callable("procurement:score", PROCUREMENT.parent).__globals__


def gate_params(spec: WorkflowSpec, step_id: str, gate: str) -> dict[str, Any]:
    return next(g.params for g in spec.step(step_id).gates if g.gate == gate)


def qualifying(items: list[dict[str, Any]], score_field: str, threshold: float) -> int:
    return sum(1 for item in items if item[score_field] >= threshold)


@pytest.fixture(scope="module")
def correct() -> dict[str, Any]:
    return walk(PROCUREMENT)


@pytest.fixture(scope="module")
def faulty() -> dict[str, Any]:
    return walk(PROCUREMENT, {"inject_fault": True})


# -- every workflow file ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: p.name)
def test_yaml_has_only_keys_the_spec_model_accepts(path: Path) -> None:
    spec = WorkflowSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert spec.steps


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: p.name)
def test_every_step_has_a_gate(path: Path) -> None:
    spec = load_spec(path)  # (a person is an approval step's check: it has no gates)
    assert [s.id for s in spec.steps if not s.gates and s.type != "approval"] == []


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: p.name)
def test_yaml_loads_binds_and_builds_its_gates(path: Path) -> None:
    workflow = load_workflow(path)
    assert all(callable(step.function.fn) for step in workflow.steps.values())
    assert [len(step.gates) for step in workflow.steps.values()] == [len(s.gates) for s in workflow.spec.steps]


def test_all_example_workflows_are_present() -> None:
    assert {p.name for p in ALL_YAML} >= {"procurement.yaml", "hello.yaml", "research.yaml"}


# -- procurement: the correct path --------------------------------------------------------------

def test_procurement_has_the_seed_shape() -> None:
    spec = load_spec(PROCUREMENT)
    assert len(spec.steps) >= 20
    assert spec.steps[3].id == "retrieve_candidates" and spec.steps[3].type == "retrieval"
    assert {s.type for s in spec.steps} >= {"retrieval", "reasoning", "action", "verification", "critic"}
    assert spec.step("retrieve_candidates").baseline == "procurement:baseline_retrieve"
    assert any(s.side_effects for s in spec.steps if s.type == "action")
    critic = spec.step("verify_recommendation")
    assert critic.type == "critic" and critic.verifies == ["retrieve_candidates", "draft_recommendation"]
    assert "verify_recommendation" in spec.step("recommend").after
    assert spec.output_step == "recommend" and spec.outcome == "procurement:score"


def test_default_path_recommends_the_ground_truth_vendor(correct: dict[str, Any]) -> None:
    mod = procurement_module()
    truth = mod["GROUND_TRUTH"]
    rec = correct["recommend"]
    assert (rec["vendor_id"], rec["vendor_name"]) == (truth["vendor_id"], truth["vendor_name"]) == \
        ("V-007", "Nordwind Safety GmbH")
    assert rec["unit_price"] == truth["unit_price"] and rec["delivery_days"] == truth["delivery_days"]
    assert rec["cited_ids"] == ["V-007"]
    assert mod["score"](rec) == 1.0


def test_default_retrieval_passes_the_relevance_threshold(correct: dict[str, Any]) -> None:
    params = gate_params(load_spec(PROCUREMENT), "retrieve_candidates", "min_items")
    items = correct["retrieve_candidates"][params["field"]]
    assert qualifying(items, params["score_field"], params["threshold"]) >= params["count"]


def test_steps_are_deterministic(correct: dict[str, Any]) -> None:
    assert walk(PROCUREMENT) == correct


# -- procurement: the injected fault ------------------------------------------------------------

def test_fault_fails_the_relevance_threshold_at_step_4(faulty: dict[str, Any]) -> None:
    params = gate_params(load_spec(PROCUREMENT), "retrieve_candidates", "min_items")
    items = faulty["retrieve_candidates"][params["field"]]
    assert qualifying(items, params["score_field"], params["threshold"]) < params["count"]
    # subtle: the same-looking vendor family and SKU, but other regions
    assert {i["name"].split()[0] for i in items} == {"Nordwind"}
    assert {i["region"] for i in items} - {"EU"}


def test_fault_propagates_to_a_confident_wrong_recommendation(correct: dict[str, Any],
                                                               faulty: dict[str, Any]) -> None:
    mod = procurement_module()
    rec = faulty["recommend"]
    assert rec["vendor_id"] != mod["GROUND_TRUTH"]["vendor_id"]
    assert rec["vendor_name"].startswith("Nordwind Safety")
    assert rec["confidence"] >= 0.9 and rec["confidence"] >= correct["recommend"]["confidence"]
    assert mod["score"](rec) < 0.5


def test_critic_fails_on_the_faulty_path_and_passes_on_the_correct_one(correct: dict[str, Any],
                                                                     faulty: dict[str, Any]) -> None:
    assert correct["verify_recommendation"]["passed"] is True
    verdict = faulty["verify_recommendation"]
    assert verdict["passed"] is False
    assert verdict["details"]["checks"]["region"] is False
    assert "V-017" in verdict["reason"]


def test_edit_json_in_place_of_retrieval_leads_to_the_correct_vendor() -> None:
    edited = json.loads(EDIT_JSON.read_text(encoding="utf-8"))
    outputs = walk(PROCUREMENT, {"inject_fault": True}, replace={"retrieve_candidates": edited})
    assert outputs["recommend"]["vendor_id"] == "V-007"
    assert outputs["verify_recommendation"]["passed"] is True
    assert procurement_module()["score"](outputs["recommend"]) == 1.0


def test_baseline_retrieve_returns_the_reviewers_correction(faulty: dict[str, Any]) -> None:
    baseline = resolve_callable("procurement:baseline_retrieve", PROCUREMENT.parent)
    out = baseline(plan=faulty["plan_search"], inject_fault=True)
    assert out == json.loads(EDIT_JSON.read_text(encoding="utf-8"))


def test_retrieval_requeries_strictly_after_gate_feedback(faulty: dict[str, Any]) -> None:
    spec = load_spec(PROCUREMENT)
    retrieve = resolve_callable("procurement:retrieve_candidates", PROCUREMENT.parent)
    ctx = make_ctx(spec, "retrieve_candidates", {}, feedback=[GateResult(False, 0.33, "1 of 4 items")])
    out = retrieve(plan=faulty["plan_search"], inject_fault=True, ctx=ctx)
    assert out["requeried_after_feedback"] is True
    assert {i["region"] for i in out["items"]} == {"EU"}


def test_procurement_score_rewards_only_the_right_vendor_and_price(correct: dict[str, Any]) -> None:
    score = procurement_module()["score"]
    rec = correct["recommend"]
    assert score({**rec, "unit_price": 2.71}) == 0.5
    assert score({**rec, "vendor_id": "V-003", "vendor_name": "Lumen Optics Safety BV"}) == 0.0
    assert score(None) == 0.0


# -- procurement: context injection and side effects --------------------------------------------

def test_steps_echo_what_their_consumers_need(correct: dict[str, Any]) -> None:
    told = {n["step_id"]: n["needs"] for n in correct["normalize_requirements"]["for_next"]}
    assert told["plan_search"] == load_spec(PROCUREMENT).step("plan_search").needs
    consumers = {n["step_id"] for n in correct["retrieve_candidates"]["for_next"]}
    assert {"extract_prices", "score_delivery", "verify_recommendation"} <= consumers


def test_side_effect_steps_carry_the_idempotency_key(correct: dict[str, Any]) -> None:
    spec = load_spec(PROCUREMENT)
    for step in (s for s in spec.steps if s.side_effects):
        assert correct[step.id]["idempotency_key"] == f"key-{step.id}"


# -- procurement: the real built-in gates -------------------------------------------------------

def evaluate_gates(path: Path, outputs: dict[str, Any]) -> list[tuple[str, str, GateResult]]:
    """Every verdict (step, gate, result) in step order; a critic's own verdict comes first."""
    spec = load_spec(path)
    verdicts: list[tuple[str, str, GateResult]] = []
    upstream: dict[str, Any] = {}
    for step in spec.steps:
        output = outputs[step.id]
        if step.type == "critic":
            verdicts.append((step.id, "critic", normalize(output, "critic")))
        ctx = make_ctx(spec, step.id, upstream)
        for gate_spec in step.gates:
            gate = build_gate(gate_spec, step_id=step.id, base_dir=path.parent)
            result = evaluate(gate, gate_spec.label, output, ctx).result
            verdicts.append((step.id, gate_spec.label, result))
        upstream[step.id] = output
    return verdicts


def test_every_gate_passes_on_the_correct_path(correct: dict[str, Any]) -> None:
    failed = [(s, g, r.reason) for s, g, r in evaluate_gates(PROCUREMENT, correct) if not r.passed]
    assert failed == []


def test_first_failing_gate_on_the_faulty_path_is_the_step_4_relevance_gate(faulty: dict[str, Any]) -> None:
    failed = [(s, g) for s, g, r in evaluate_gates(PROCUREMENT, faulty) if not r.passed]
    assert failed[0] == ("retrieve_candidates", "relevant_results")
    # every later step processes the mismatch faithfully: only the critic notices
    assert failed == [("retrieve_candidates", "relevant_results"), ("verify_recommendation", "critic")]


def test_edit_json_passes_the_retrieval_gates() -> None:
    edited = json.loads(EDIT_JSON.read_text(encoding="utf-8"))
    outputs = walk(PROCUREMENT, {"inject_fault": True}, replace={"retrieve_candidates": edited})
    assert [(s, g) for s, g, r in evaluate_gates(PROCUREMENT, outputs) if not r.passed] == []


# -- hello --------------------------------------------------------------------------------------

def test_hello_steps_shout_and_sign_off() -> None:
    outputs = walk(HELLO, {"name": "Ada"})
    assert outputs["shout"] == "HELLO, ADA!"
    assert outputs["sign_off"]["message"].startswith("HELLO, ADA!")
    assert [(s, g) for s, g, r in evaluate_gates(HELLO, outputs) if not r.passed] == []


def test_hello_python_and_yaml_define_the_same_workflow() -> None:
    assert load_any_spec(HELLO.parent / "hello.py").definition() == load_spec(HELLO).definition()


# -- research ---------------------------------------------------------------------------------
# One mapped step (for_each) answers the sub-questions, so these run the workflow itself: instances
# and their collected list are the executor's, which the walker above does not reproduce.

def run_research(store: Store, inputs: dict[str, Any] | None = None) -> tuple[RunResult, dict[str, Any]]:
    result = start_run(store, load_workflow(RESEARCH), inputs or {})
    return result, {r.unit: r.output for r in store.step_records(result.run_id, latest_only=True)}


def test_research_maps_one_researcher_step_over_the_sub_questions() -> None:
    spec = load_spec(RESEARCH)
    researchers = [s for s in spec.steps if s.agent == "researcher"]
    assert [(s.id, s.for_each) for s in researchers] == [("research", "plan_questions.sub_questions")]
    assert "research" in spec.step("write_draft").step_dependencies()
    assert {s.agent for s in spec.steps} == {"planner", "researcher", "writer", "editor"}


def test_research_python_twin_gives_an_equal_spec_and_content_hash() -> None:
    twin, from_yaml = load_workflow(RESEARCH.with_name("research_py.py")), load_workflow(RESEARCH)
    assert twin.spec == from_yaml.spec and twin.content_hash == from_yaml.content_hash


def test_research_publishes_a_cited_brief_the_editor_approves(store: Store) -> None:
    result, outputs = run_research(store)
    assert result.status == "succeeded"
    assert [outputs[f"research[{i}]"]["question_id"] for i in range(3)] == ["definition", "methods", "pitfalls"]
    assert outputs["research"] == [outputs[f"research[{i}]"] for i in range(3)]
    assert outputs["edit_review"]["passed"] is True
    researched = {i for part in outputs["research"] for i in part["note_ids"]}
    assert {s["id"] for s in outputs["publish"]["sources"]} == researched


def test_research_editor_rejects_a_fabricated_citation(store: Store) -> None:
    _, outputs = run_research(store)
    review = resolve_callable("research:edit_review", RESEARCH.parent)
    draft = outputs["write_draft"] + "- Everyone agrees. [N-13]\n"
    verdict = review(draft=draft, plan=outputs["plan_questions"], parts=outputs["research"])
    assert verdict.passed is False and "N-13" in verdict.reason


def test_research_off_topic_pauses_every_instance_at_its_relevance_gate(store: Store) -> None:
    result, outputs = run_research(store, {"topic": "tomato gardening"})
    assert result.status == "paused"
    assert result.paused_steps == ["research[0]", "research[1]", "research[2]"]
    assert outputs["research[0]"]["findings"] == []
