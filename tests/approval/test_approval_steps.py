"""``type: approval``: a step that always pauses for a person, with its inputs as the proposal.

Approve as is and the proposal is its output; edit and the edited value is, checked only by the step's
``output_schema``; reject and the run is rejected. The pause is no gate failure: ``stats`` counts no gate
failure for it and attribution does not blame it. ``validate`` refuses keys that would compute or check its
output, naming file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import side_effect_file

FIXTURES = Path(__file__).parent.parent / "fixtures" / "approval"
FLOW = FIXTURES / "refund_approval.yaml"


@pytest.fixture
def pay_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return side_effect_file(tmp_path, monkeypatch, "pay.log", "PAY_LOG")


def _paused(cli) -> str:
    res = cli("run", str(FLOW), "--input", "ticket=refund order 42", "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["status"] == "paused" and doc["paused_steps"] == ["confirm"]
    return doc["run_id"]


def _step(doc: dict, step_id: str) -> dict:
    return next(s for s in doc["steps"] if s["step_id"] == step_id)


def test_an_approval_step_pauses_with_its_inputs_as_the_proposal_and_says_it_waits_for_approval(cli, pay_log):
    run_id = _paused(cli)
    doc = cli("show", run_id, "--json").json()
    confirm = _step(doc, "confirm")
    assert confirm["type"] == "approval"
    assert confirm["status"] == "gate_failed" and confirm["gates"] == []
    assert confirm["error"] == "AwaitingApproval: waiting for approval"
    assert confirm["output"] == {"refund": {"order": "42", "amount": 20}}
    shown = cli("show", run_id).stdout
    assert 'waiting for approval: {"refund": {"order": "42", "amount": 20}}' in shown
    [listed] = cli("runs", "--json").json()
    assert (listed["waiting_steps"], listed["gate_reason"]) == (["confirm"], "waiting for approval")
    assert pay_log.read_text() == ""


def test_approve_as_is_makes_the_proposal_the_output(cli, pay_log):
    run_id = _paused(cli)
    res = cli("approve", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["output"] == "refunded 20 on order 42"
    assert _step(doc, "confirm")["output"] == {"refund": {"order": "42", "amount": 20}}
    assert _step(doc, "confirm")["origin"] == "approved"
    assert pay_log.read_text() == "42 20\n"


def test_an_edit_is_the_output_once_it_fits_the_output_schema(cli, pay_log, tmp_path):
    run_id = _paused(cli)
    too_much = tmp_path / "too_much.json"
    too_much.write_text(json.dumps({"refund": {"order": "42", "amount": 99}}))
    refused = cli("edit", run_id, "--output", str(too_much))
    assert refused.exit_code == 2
    assert "does not fit its output_schema ($.refund.amount: 99 is greater than the maximum of 50)" in refused.stderr
    assert cli("show", run_id, "--json").json()["status"] == "paused"  # nothing was stored
    smaller = tmp_path / "smaller.json"
    smaller.write_text(json.dumps({"refund": {"order": "42", "amount": 15}}))
    res = cli("edit", run_id, "--output", str(smaller), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "refunded 15 on order 42"
    assert pay_log.read_text() == "42 15\n"


def test_reject_with_a_reason_rejects_the_run(cli, pay_log):
    run_id = _paused(cli)
    res = cli("reject", run_id, "--reason", "not our order")
    assert res.exit_code == 1
    doc = cli("show", run_id, "--json").json()
    assert doc["status"] == "rejected"
    assert doc["reviews"][0]["decision"] == "reject" and doc["reviews"][0]["comment"] == "not our order"
    assert _step(doc, "pay")["status"] == "skipped"
    assert pay_log.read_text() == ""


def test_an_approval_is_no_gate_failure_in_stats_nor_blamed_by_a_trace(cli, pay_log):
    run_id = _paused(cli)
    assert cli("approve", run_id).exit_code == 0
    assert cli("label", run_id, "--incorrect", "--reason", "paid the wrong order").exit_code == 0
    trace = cli("trace", run_id, "--json").json()
    assert trace["blamed_step"] != "confirm"
    confirm = next(c for c in trace["candidates"] if c["step_id"] == "confirm")
    assert not confirm["evidence"].get("signals")
    stats = cli("stats", "--workflow", "refund-approval", "--json").json()
    row = next(s for s in stats["steps"] if s["step_id"] == "confirm")
    assert row["gate_failures"] == 0 and row["gated_runs"] == 0 and row["gate_pass_rate"] is None
    assert row["blamed"] == 0


@pytest.mark.parametrize(("name", "problems"), [
    ("bad_approval_run", [":9: steps.confirm.run: step 'confirm' has type 'approval', so it cannot have run"]),
    ("bad_approval_prompt", [":10: steps.confirm.prompt: step 'confirm' has type 'approval', so it cannot have "
                             "prompt", ":9: steps.confirm.gates: step 'confirm' has type 'approval', so it "
                                       "cannot have gates"]),
    ("bad_approval_inputs", [":3: steps.confirm: step 'confirm' has type 'approval' but no inputs"]),
])
def test_validate_names_the_file_and_line_of_what_an_approval_step_cannot_have(cli, name, problems):
    res = cli("validate", str(FIXTURES / f"{name}.yaml"), db=False)
    assert res.exit_code == 2
    for problem in problems:
        assert f"{name}.yaml{problem}" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_python_twin_declares_the_same_workflow_and_pauses_the_same_way(cli, pay_log):
    from orchestrator.bind.loader import load_workflow

    twin = FIXTURES / "refund_approval_py.py"
    assert load_workflow(twin).content_hash == load_workflow(FLOW).content_hash
    res = cli("run", str(twin), "--input", "ticket=refund order 7", "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["confirm"]
    assert cli("approve", res.json()["run_id"]).exit_code == 0
    assert pay_log.read_text() == "7 20\n"


def test_the_progress_line_says_an_approval_step_waits_rather_than_that_its_gates_failed(cli, pay_log):
    res = cli("run", str(FLOW), "--input", "ticket=refund order 42")
    assert res.exit_code == 3, res.stderr
    [line] = [line for line in res.stderr.splitlines() if line.strip().startswith("confirm ")]
    assert line.split()[:2] == ["confirm", "waiting"] and "waiting for approval" in line
    assert "gate_failed" not in res.stderr
