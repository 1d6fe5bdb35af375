"""The routed support agent, map-reduce and reflection examples on the real embedded model (SmolLM2-135M),
offline, and the ticket queue (a map of child runs, no model).

Each is run once per module through the CLI, with the inputs docs/llm.md shows; the tests read what its pause
shows and decide it as that page says. Their Python twins load into equal specs and content hashes. Skipped
with a reason where the ``local-llm`` extra is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.bind.loader import load_workflow
from tests.conftest import REPO
from tests.documented import documented_input

ROUTING = REPO / "workflows" / "routing" / "routing.yaml"
MAPREDUCE = REPO / "workflows" / "mapreduce" / "mapreduce.yaml"
REFLECTION = REPO / "workflows" / "reflection" / "reflection.yaml"
TICKETS = REPO / "workflows" / "tickets" / "tickets.yaml"
TICKET = documented_input(ROUTING, "ticket")
QUESTION = documented_input(MAPREDUCE, "question")


@pytest.mark.parametrize(("yaml_path", "twin"), [(ROUTING, "routing_py.py"), (MAPREDUCE, "mapreduce_py.py"),
                                                (REFLECTION, "reflection_py.py"), (TICKETS, "tickets_py.py")],
                         ids=["routing", "mapreduce", "reflection", "tickets"])
def test_the_python_twins_give_equal_specs_and_content_hashes(yaml_path: Path, twin: str) -> None:
    from_yaml, from_python = load_workflow(yaml_path), load_workflow(yaml_path.with_name(twin))
    assert from_python.spec == from_yaml.spec
    assert from_python.content_hash == from_yaml.content_hash


def test_retrieval_returns_as_many_documents_as_match() -> None:
    from orchestrator.bind.resolve import resolve_callable

    retrieve = resolve_callable("mapreduce:retrieve", MAPREDUCE.parent)
    assert [d["id"] for d in retrieve(QUESTION)["docs"]] == ["gloves", "goggles", "earplugs"]
    assert [d["id"] for d in retrieve("when does the canteen open")["docs"]] == ["canteen"]
    assert retrieve("quantum chromodynamics")["docs"] == []


def cli(*args: str, db: str) -> tuple[int, Any, str]:
    from typer.testing import CliRunner

    from orchestrator.cli import app

    result = CliRunner().invoke(app, [*args, "--json", "--db", db])
    text = result.stdout
    return result.exit_code, json.loads(text[text.index("{"):]) if "{" in text else None, result.output


def units(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["unit"]: s for s in doc["steps"]}


pytestmark = pytest.mark.xdist_group("flow_example_runs")
"""One worker runs the module: the example runs (module-scoped, several on the embedded model) are made once,
where spread over several workers each would make them again."""


@pytest.fixture(scope="module")
def local_model() -> None:
    pytest.importorskip("llama_cpp", reason="the embedded model needs the local-llm extra: pip install -e "
                                            "'.[local-llm]'")


@pytest.fixture(scope="module")
def routed(local_model: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('routing') / 'o.db'}"
    code, doc, output = cli("run", str(ROUTING), "--input", f"ticket={TICKET}", db=db)
    assert code == 3, output
    return db, doc


class TestRoutedSupportAgent:
    @pytest.mark.slow
    def test_exactly_one_handler_runs_and_the_others_say_why_they_were_skipped(self, routed) -> None:
        _, doc = routed
        steps = units(doc)
        category = steps["classify"]["output"]["category"]
        assert category in ("refund", "technical", "other")
        ran = [h for h in ("refund", "technical", "other") if steps[h]["status"] == "succeeded"]
        assert ran == [category]
        for handler in {"refund", "technical", "other"} - {category}:
            assert steps[handler]["status"] == "skipped"
            assert steps[handler]["skip_reason"].startswith("when ") and repr(category) in steps[handler]["skip_reason"]

    @pytest.mark.slow
    def test_the_judge_on_the_reply_pauses_the_run_before_it_is_sent(self, routed) -> None:
        _, doc = routed
        assert doc["paused_steps"] == ["reply"]
        judge = next(g for g in units(doc)["reply"]["gates"] if g["gate"] == "llm_judge")
        assert not judge["passed"] and judge["reason"].startswith("judge smollm2:")
        prompt = units(doc)["reply"]["llm"]["messages"][-1]["content"]
        handler = next(h for h in ("refund", "technical", "other") if units(doc)[h]["status"] == "succeeded")
        assert units(doc)[handler]["output"]["advice"] in prompt  # join: any gave it the handler that ran

    @pytest.mark.slow
    def test_fixing_the_route_at_its_cause_runs_the_other_handler(self, routed, tmp_path: Path) -> None:
        """The tiny model may misroute "charged twice"; an edit of classify takes the refund route: the
        handlers are superseded and decided again, and only refund runs."""
        db, doc = routed
        fixed = tmp_path / "refund.json"
        fixed.write_text('{"category": "refund"}')
        code, after, output = cli("edit", doc["run_id"], "--step", "classify", "--output", str(fixed), db=db)
        assert code in (0, 3), output
        steps = units(after)
        assert steps["refund"]["status"] == "succeeded" and steps["refund"]["output"]["policy"] == "P-REF"
        assert steps["technical"]["status"] == steps["other"]["status"] == "skipped"
        assert steps["technical"]["skip_reason"] == ("when classify.category == 'technical' was false "
                                                     "(classify.category = 'refund')")


@pytest.fixture(scope="module")
def digested(local_model: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('mapreduce') / 'o.db'}"
    code, doc, output = cli("run", str(MAPREDUCE), "--input", f"question={QUESTION}", db=db)
    assert code in (0, 3), output
    return db, doc


class TestMapReduce:
    @pytest.mark.slow
    def test_one_summary_instance_per_retrieved_document_each_judged_on_its_own(self, digested) -> None:
        _, doc = digested
        steps = units(doc)
        assert [steps[f"summarize[{i}]"]["index"] for i in range(3)] == [0, 1, 2]
        assert "summarize[3]" not in steps
        for i in range(3):
            verdict = steps[f"summarize[{i}]"]["gates"][0]
            assert verdict["gate"] == "mapreduce:grounded"
            assert verdict["reason"].endswith(f"come from {('gloves', 'goggles', 'earplugs')[i]}")
            assert steps[f"summarize[{i}]"]["status"] == ("succeeded" if verdict["passed"] else "gate_failed")
        failing = [f"summarize[{i}]" for i in range(3) if not steps[f"summarize[{i}]"]["gates"][0]["passed"]]
        assert doc["paused_steps"] == failing
        assert ("combine" in steps) is (not failing)  # the consumer waits for every instance

    @pytest.mark.slow
    def test_approving_each_waiting_instance_finishes_with_the_digest_in_document_order(self, digested) -> None:
        db, doc = digested
        code, after = 3, doc
        for unit in doc["paused_steps"]:
            code, after, output = cli("approve", doc["run_id"], "--step", unit, db=db)
            assert code in (0, 3), output
        assert code == 0 and after["status"] == "succeeded"
        steps = units(after)
        assert steps["summarize"]["output"] == [steps[f"summarize[{i}]"]["output"] for i in range(3)]
        assert [line.split(":")[0] for line in after["output"].splitlines()] == [
            "- Cut-resistant gloves", "- Safety goggles", "- Ear defenders"]
        assert steps["check"]["gates"][0]["passed"] is True


@pytest.fixture(scope="module")
def reflected(local_model: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('reflection') / 'o.db'}"
    code, doc, output = cli("run", str(REFLECTION), "--input", "brief=a reusable steel water bottle", db=db)
    assert code in (0, 3), output
    return db, doc


class TestReflection:
    @pytest.mark.slow
    def test_each_round_is_a_child_run_that_sees_the_previous_rounds_draft_and_critique(self, reflected) -> None:
        db, doc = reflected
        rounds = [u for u in units(doc) if u.startswith("improve#")]
        assert 1 <= len(rounds) <= 3
        assert [c["step"] for c in doc["children"]] == rounds
        assert {c["workflow"] for c in doc["children"]} == {"draft-and-critique"}
        for n, unit in enumerate(rounds, start=1):
            output = units(doc)[unit]["output"]
            assert output["round"] == n and output["critique"]["score"] in (1, 2, 3, 4, 5)
            assert output["critique"]["passed"] is (output["critique"]["score"] == 5)
        if len(rounds) > 1:  # the second round's writer was shown the first round's draft and critique
            _, child, _ = cli("show", doc["children"][1]["run_id"], db=db)
            prompt = units(child)["draft"]["llm"]["messages"][-1]["content"]
            assert units(doc)["improve#1"]["output"]["draft"] in prompt
            assert child["inputs"]["previous"] == units(doc)["improve#1"]["output"]

    def test_the_loop_ends_when_the_critic_passes_or_pauses_after_three_rounds(self, reflected) -> None:
        db, doc = reflected
        last = units(doc)["improve"]
        if last["output"]["critique"]["passed"]:
            assert doc["status"] == "succeeded" and doc["output"]["passed"] is True
            return
        assert len([u for u in units(doc) if u.startswith("improve#")]) == 3
        assert doc["paused_steps"] == ["improve"]
        assert last["gates"][-1]["reason"] == "until output.critique.passed still false after 3 iterations"
        code, after, output = cli("approve", doc["run_id"], db=db)
        assert code == 0, output
        assert after["output"] == {"text": last["output"]["draft"], "passed": False, "rounds": 3}


class TestTicketQueue:
    def test_each_ticket_is_triaged_in_a_child_run_and_the_unclear_one_waits_alone(self, tmp_path: Path) -> None:
        db = f"sqlite:///{tmp_path / 'o.db'}"
        code, doc, output = cli("run", str(TICKETS), db=db)
        assert code == 3, output
        assert doc["paused_steps"] == ["per_ticket[3] > classify"]
        assert [(c["step"], c["status"]) for c in doc["children"]] == [
            ("per_ticket[0]", "succeeded"), ("per_ticket[1]", "succeeded"), ("per_ticket[2]", "succeeded"),
            ("per_ticket[3]", "paused"), ("per_ticket[4]", "succeeded")]
        assert [units(doc)[f"per_ticket[{i}]"]["output"]["policy"] for i in (0, 1, 2, 4)] == [
            "P-REF", "P-TEC", "P-REF", "P-TEC"]
        assert "report" not in units(doc)  # it waits for every ticket

    def test_approving_the_unclear_ticket_by_its_path_sends_it_to_the_general_desk(self, tmp_path: Path) -> None:
        db = f"sqlite:///{tmp_path / 'o.db'}"
        _, doc, _ = cli("run", str(TICKETS), db=db)
        code, after, output = cli("approve", doc["run_id"], "--step", "per_ticket[3] > classify", db=db)
        assert code == 0, output
        assert after["output"] == {"tickets": 5, "by_route": {"other": 1, "refund": 2, "technical": 2},
                                   "policies": ["P-REF", "P-TEC", "P-REF", "P-GEN", "P-TEC"]}
        assert [c["status"] for c in after["children"]] == ["succeeded"] * 5
