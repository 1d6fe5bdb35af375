"""An approved tool call survives its process: SIGKILL after the approval, while the call runs, or after it
ran, loses nothing and never runs the tool twice unasked.

The step writes a checkpoint before an approved call runs and another, with its result, after: a resume
after the second answers the model with the stored result; a resume after the first (the call may have
taken effect) asks the person again instead of running it. Every process that is killed is a real one (an
``orchestrator`` subprocess, SIGKILLed); the run before it and the resume after go through the CLI in the
test's own process. The refund tool appends a line per real execution to a file, and the scripted
model server on 127.0.0.1 counts the requests it received, so a repeated turn would show.
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

from orchestrator.store import open_store
from tests.conftest import REPO, Result, _cli_on
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

FLOW = Path(__file__).parent.parent / "fixtures" / "approval" / "tool_approval.yaml"
TICKET = "ticket=Order 42 arrived broken, please refund it"


@pytest.fixture
def model(fake_openai: FakeOpenAI) -> FakeOpenAI:
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                                   finish_reason="tool_calls"))
    return fake_openai


@pytest.fixture
def env(tmp_path: Path, model: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the steps and the CLI read, set in this process (for the CLI invoked here) and returned whole for
    the processes a test starts."""
    (tmp_path / "refunds.log").touch()
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in {"REFUND_LOG": str(tmp_path / "refunds.log"), "ORCHESTRATOR_LLM_BASE_URL": model.base_url,
                            "ORCHESTRATOR_LEASE_SECONDS": "2"}.items():
        monkeypatch.setenv(variable, value)
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _cli(url: str, *args: str) -> Result:
    """``orchestrator ARGS --db URL`` in this process, with the test's environment (see ``env``): the runs
    before a kill and the resumes and decisions after it; the processes that are killed are real ones."""
    return _cli_on(url)(*args)


def _refunds(env: dict[str, str]) -> list[str]:
    return Path(env["REFUND_LOG"]).read_text().splitlines()


def _paused(url: str, env: dict[str, str]) -> str:
    res = _cli(url, "run", str(FLOW), "--input", TICKET, "--json")
    assert res.exit_code == 3, res.stderr
    return json.loads(res.stdout)["run_id"]


def _wait(condition, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.time() + 120
    while not condition():
        assert time.time() < deadline and proc.poll() is None, f"never {what}"
        time.sleep(0.02)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.slow
def test_sigkill_right_after_the_approval_was_stored_runs_the_call_once_on_resume(tmp_path, durable_url, model, env):
    run_id = _paused(durable_url, env)
    decide = ("import os, signal, sys\n"
              "from orchestrator.service import review\nfrom orchestrator.engine.executor import new_lease\n"
              "from orchestrator.store import open_store\n"
              "run_id = sys.argv[2]\n"
              "review.approve(open_store(sys.argv[1]), run_id, lease=new_lease(run_id))\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", decide, durable_url, run_id], env=env, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert [r.decision for r in open_store(durable_url).reviews(run_id)] == ["approve"]
    assert _refunds(env) == []  # approved, not executed
    store = open_store(durable_url)
    deadline = time.time() + 30
    while store.get_run(run_id).status != "interrupted":  # the decision's lease outlives its holder a moment
        assert time.time() < deadline, "the approved run never showed as interrupted"
        time.sleep(0.05)
    model.respond(completion("Refunded 40 on order 42."))
    res = _cli(durable_url, "resume", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["output"] == "Refunded 40 on order 42."
    assert _refunds(env) == ["42 40"]
    assert len(model.requests) == 3  # the two turns before the pause were not asked again


@pytest.mark.slow
def test_sigkill_after_the_call_ran_answers_the_model_with_the_stored_result(tmp_path, durable_url, model, env):
    run_id = _paused(durable_url, env)
    model.hold()  # the turn after the refund waits at the server: the process is killed meanwhile
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "approve", run_id, "--db", durable_url], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: len(model.requests) == 3, proc, "asked the model after the refund")
    _kill(proc)
    assert _refunds(env) == ["42 40"]
    model.release()
    while model.in_flight:  # the held request is answered (to nobody) before the next answer is scripted
        time.sleep(0.02)
    model.respond(completion("Refunded 40 on order 42."))
    res = _cli(durable_url, "resume", run_id, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["output"] == "Refunded 40 on order 42."
    assert _refunds(env) == ["42 40"]  # the resume used the recorded result
    first, second, killed, resumed = model.requests
    assert resumed["messages"] == killed["messages"]  # the turn whose answer never came, and nothing before it
    assert json.loads(resumed["messages"][-1]["content"]) == {"order_id": "42", "refunded": 40}
    assert len(model.requests) == 4


@pytest.mark.parametrize("hold", ["REFUND_HOLD_BEFORE", "REFUND_HOLD_AFTER"])
@pytest.mark.slow
def test_sigkill_while_the_call_runs_asks_the_person_again_instead_of_running_it(tmp_path, durable_url, model,
                                                                               env, hold):
    run_id = _paused(durable_url, env)
    holding = tmp_path / "holding"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "approve", run_id, "--db", durable_url],
                            env={**env, hold: str(holding)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(holding.exists, proc, "started the refund")
    _kill(proc)
    ran = ["42 40"] if hold == "REFUND_HOLD_AFTER" else []
    assert _refunds(env) == ran
    res = _cli(durable_url, "resume", run_id, "--json")
    assert res.exit_code == 3, res.stderr  # whether the refund took effect is unknown: a person decides
    step = json.loads(_cli(durable_url, "show", run_id, "--json").stdout)["steps"][0]
    assert step["output"]["tool"] == "refund" and step["output"]["arguments"] == {"order_id": "42", "amount": 40}
    assert "may have taken effect" in step["output"]["note"]
    assert _refunds(env) == ran and len(model.requests) == 2
    model.respond(completion("Your refund is on its way."))
    if ran:
        res = _cli(durable_url, "reject", run_id, "--reason", "it already went through")
    else:
        res = _cli(durable_url, "approve", run_id)
    assert res.exit_code == 0, res.stderr
    assert _refunds(env) == ["42 40"]  # once, either way
    assert len(model.requests) == 3
