"""A real run exports its span tree: the LLM triage workflow through the CLI, against an OTLP receiver.

The run pauses at a failing gate, a reviewer sends it back, and the resumed execution lands in
the same trace as the first, with the decision as an event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.llm.fake_openai_server import completion, tool_call

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")

if TYPE_CHECKING:
    from tests.telemetry.conftest import Receiver

WORKFLOWS = Path(__file__).parents[1] / "llm" / "workflows"


def test_a_paused_and_resumed_run_is_one_trace_with_genai_spans(cli, fake_openai, receiver: Receiver,
                                                                monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.removesuffix("/v1/traces"))
    fake_openai.respond(completion(json.dumps({"category": "refund", "confidence": 0.5}), prompt_tokens=30,
                                   completion_tokens=8))
    first = cli("run", str(WORKFLOWS / "triage.yaml"), "--input", "ticket=charged twice", "--json")
    assert first.exit_code == 3
    run_id = first.json()["run_id"]
    fake_openai.respond(completion(json.dumps({"category": "billing", "confidence": 0.9})))
    fake_openai.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "7"})],
                                   finish_reason="tool_calls"))
    fake_openai.respond(completion("Refunded."))
    assert cli("retry", run_id, "--json").exit_code == 0

    runs = receiver.named("run llm-triage")
    assert len(runs) == 2 and len({s.trace_id for s in receiver.spans}) == 1
    sent = {s.span_id for s in receiver.spans}   # the pause, the decision and the resume: no dangling parent
    assert all(s.parent_span_id in sent for s in receiver.spans if s.parent_span_id)
    first_run = next(s for s in runs if not s.attributes.get("orchestrator.resumed"))
    assert ("paused", {"orchestrator.steps": "classify"}) in first_run.events
    attempts = receiver.named("step classify")
    assert len(attempts) == 2 and attempts[0].parent_span_id == first_run.span_id
    gate_events = [e for e in attempts[0].events if e[0] == "gate"]
    assert gate_events and gate_events[0][1]["orchestrator.gate.passed"] is False
    chats = [s for s in receiver.named("chat gpt-4o-mini") if s.parent_span_id == attempts[0].span_id]
    assert chats[0].attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 30
    assert chats[0].attributes["gen_ai.usage.output_tokens"] == 8
    assert chats[0].attributes["gen_ai.system"] == "openai"
    reply = receiver.one("step reply")
    assert receiver.one("execute_tool lookup_order").parent_span_id == reply.span_id
    review = receiver.one("review retry")
    assert review.events[0][1]["orchestrator.decision"] == "retry"


def test_outcomes_and_the_attribution_they_trigger_are_exported_in_the_runs_trace(
        cli, receiver: Receiver, step_log, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    fixtures = Path(__file__).parents[1] / "fixtures" / "workflows"
    run = cli("run", str(fixtures / "scored_chain.yaml"), "--input", "x=1", "--json")
    assert run.exit_code == 0, run.stderr
    run_id = run.json()["run_id"]
    labelled = cli("label", run_id, "--incorrect", "--reason", "off by one", "--reviewer", "ann")
    assert labelled.exit_code == 0, labelled.stderr

    assert len({s.trace_id for s in receiver.spans}) == 1
    root = receiver.one("run scored-chain")
    assert ("outcome", {"orchestrator.source": "evaluator", "orchestrator.value": 1.0,
                        "orchestrator.correct": True}) in root.events
    label = receiver.one("review label")
    assert label.parent_span_id == ""   # a root of the run's trace, like every decision
    (name, values), = label.events
    assert name == "review" and values["orchestrator.source"] == "human"
    assert (values["orchestrator.value"], values["orchestrator.correct"]) == (0.0, False)
    assert values["orchestrator.reviewer"] == "ann" and values["orchestrator.reason"] == "off by one"
    # the backward trace the label triggered is stored and named (this ungated chain gives it no suspect)
    assert isinstance(values["orchestrator.attribution_id"], int) and "orchestrator.blamed_step" not in values


@pytest.mark.slow
def test_ctrl_c_then_resume_stays_one_trace_and_keeps_the_first_segment(tmp_path: Path, step_log: Path,
                                                                       receiver: Receiver):
    """The interrupted execution's spans are exported (its run span says so) and its trace id is
    stored, so the resume continues the same trace."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    db = f"sqlite:///{tmp_path / 'o.db'}"
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "CHAIN_SLEEP": "30"}
    chain = str(Path(__file__).parents[1] / "fixtures" / "workflows" / "scored_chain.yaml")
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", chain, "--db", db], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while "s1" not in step_log.read_text():   # the first step is running
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    interrupted = receiver.one("run scored-chain")
    assert interrupted.attributes["orchestrator.status"] == "interrupted"
    assert receiver.one("step s1").attributes["orchestrator.status"] == "interrupted"

    resumed = subprocess.run([sys.executable, "-m", "orchestrator", "runs", "--json", "--db", db], env=env,
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    run_id = json.loads(resumed.stdout)[0]["run_id"]
    done = subprocess.run([sys.executable, "-m", "orchestrator", "resume", run_id, "--db", db],
                          env={**env, "CHAIN_SLEEP": "0"}, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(receiver.named("run scored-chain")) == 2
    assert len({s.trace_id for s in receiver.spans}) == 1
    sent = {s.span_id for s in receiver.spans}
    assert all(s.parent_span_id in sent for s in receiver.spans if s.parent_span_id)
