"""Each tool call has an idempotency key: a tool that declares ``idempotency_key`` (or ``ctx``) receives it.

The key names the call, so it is the same every time that call runs, and only then: after a process was
SIGKILLed while an approved call ran, the person approves it again (whether it took effect is unknown) and
the tool, seeing the same key, does not refund twice; the next call gets another key. The process that is
killed is a real one (an ``orchestrator`` subprocess); the run before it and the resume and decisions after go
through the CLI in the test's own process. The refund tool writes each execution's key to one file and its
refunds to a ledger, and the scripted model server on 127.0.0.1 counts the requests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Result, _cli_on
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "tool_keys.yaml"
TICKET = "ticket=Order 42 arrived broken, please refund it"


def _refund(model: FakeOpenAI, call_id: str, tool: str, amount: int) -> None:
    model.respond(completion(None, tool_calls=[tool_call(call_id, tool, {"order_id": "42", "amount": amount})],
                             finish_reason="tool_calls"))


@pytest.fixture
def env(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the steps and the CLI read, set in this process (for the CLI invoked here) and returned whole for
    the processes a test starts."""
    for name in ("refunds.log", "calls.log"):
        (tmp_path / name).touch()
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in {"REFUND_LOG": str(tmp_path / "refunds.log"), "REFUND_CALLS": str(tmp_path / "calls.log"),
                            "ORCHESTRATOR_LLM_BASE_URL": fake_openai.base_url,
                            "ORCHESTRATOR_LEASE_SECONDS": "2"}.items():
        monkeypatch.setenv(variable, value)
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _cli(url: str, *args: str) -> Result:
    """``orchestrator ARGS --db URL`` in this process, with the test's environment (see ``env``): the runs
    before a kill and the resumes and decisions after it; the processes that are killed are real ones."""
    return _cli_on(url)(*args)


def _lines(env: dict[str, str], name: str) -> list[str]:
    return Path(env[name]).read_text().splitlines()


@pytest.mark.slow
def test_an_approved_call_run_again_after_sigkill_gets_the_same_key_and_the_next_call_another(
        tmp_path, durable_url, fake_openai, env):
    _refund(fake_openai, "c1", "refund_once", 40)
    res = _cli(durable_url, "run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in fake_openai.requests[0]["tools"]}
    assert set(offered["refund_once"]["properties"]) == {"order_id", "amount"}  # the key is no argument

    holding = tmp_path / "holding"  # the refund took effect, then the process is killed before it returns
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "approve", run_id, "--db", durable_url],
                            env={**env, "REFUND_HOLD_AFTER": str(holding)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not holding.exists():
        assert time.time() < deadline and proc.poll() is None, "the refund never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    [key] = _lines(env, "REFUND_CALLS")
    assert _lines(env, "REFUND_LOG") == [f"42 40 {key}"]

    res = _cli(durable_url, "resume", run_id, "--json")
    assert res.exit_code == 3, res.stderr  # it may have taken effect: the person decides again
    _refund(fake_openai, "c2", "refund_once", 5)
    res = _cli(durable_url, "approve", run_id, "--json")  # runs c1 again, then the model proposes c2
    assert res.exit_code == 3, res.stderr
    assert _lines(env, "REFUND_CALLS") == [key, key]  # the same call: the same key
    assert _lines(env, "REFUND_LOG") == [f"42 40 {key}"]  # so the tool refunded once

    fake_openai.respond(completion("Refunded 40, then 5 more."))
    res = _cli(durable_url, "approve", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    first, again, other = _lines(env, "REFUND_CALLS")
    assert first == again != other and len(other) == 24
    assert _lines(env, "REFUND_LOG") == [f"42 40 {key}", f"42 5 {other}"]
    assert len(fake_openai.requests) == 3  # the proposal of c1, of c2, the answer: none asked twice


@pytest.mark.slow
def test_a_tool_that_declares_ctx_receives_its_call_its_step_and_its_key(tmp_path, fake_openai, env):
    url = f"sqlite:///{tmp_path / 'orchestrator.db'}"
    _refund(fake_openai, "c7", "refund_traced", 40)
    res = _cli(url, "run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in fake_openai.requests[0]["tools"]}
    assert set(offered["refund_traced"]["properties"]) == {"order_id", "amount"}
    fake_openai.respond(completion("Refunded 40 on order 42."))
    assert _cli(url, "approve", run_id).exit_code == 0
    [seen] = [json.loads(line) for line in _lines(env, "REFUND_CALLS")]
    assert {k: v for k, v in seen.items() if k != "idempotency_key"} == {
        "run_id": run_id, "step_id": "resolve", "unit": "resolve", "tool": "refund_traced", "call_id": "c7"}
    assert len(seen["idempotency_key"]) == 24
    assert _lines(env, "REFUND_LOG") == ["42 40"]
