"""Spans as a collector receives them: the tree, names, GenAI attributes, events, trace continuation.

The tracer is driven the way the executor drives it, against a real OTLP/HTTP receiver on
127.0.0.1, and every assertion is on the decoded ``ExportTraceServiceRequest``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="the 'otel' extra (opentelemetry-exporter-otlp-proto-http) is not installed")

from orchestrator.telemetry import NoopRunTracer, RunSpan, RunTracer, TelemetryError, get_tracer  # noqa: E402

if TYPE_CHECKING:
    from tests.telemetry.conftest import Receiver

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2


@pytest.fixture
def tracer(receiver: Receiver) -> Iterator[RunTracer]:
    t = get_tracer(receiver.url)
    yield t
    t.shutdown()


def drive_run(tracer: RunTracer) -> str:
    """What the executor does for a run: two attempts of ``draft`` (the first with an LLM call,
    a tool call and a failing gate), then a pause for review on ``approve``."""
    with tracer.run("run-1", "essay", trace_id=None, resumed=False) as run:
        with run.step_attempt("draft", agent="writer", attempt=1, step_type="llm") as step:
            with step.llm_call(provider="openai", model="gpt-4o", temperature=0.2, max_tokens=512) as llm:
                llm.record(input_tokens=120, output_tokens=48, finish_reason="stop",
                           response_model="gpt-4o-2024-08-06")
            with step.tool_call("web_search", call_id="call_1") as tool:
                tool.set_result(results=3)
            step.gate("min_words", passed=False, score=0.4, reason="too short", severity="blocking")
            step.set_status("failed", "gate failed: min_words")
        with run.step_attempt("draft", agent="writer", attempt=2, step_type="llm") as step:
            step.gate("min_words", passed=True, score=1.0, reason="ok", severity="blocking")
            step.set_status("succeeded")
        run.event("paused", step_id="approve", reason="awaiting review")
        run.set_status("paused")
        assert run.trace_id is not None
        return run.trace_id


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_span_tree_names_and_attributes(receiver: Receiver, monkeypatch: pytest.MonkeyPatch,
                                        compression: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", compression)
    tracer = get_tracer(receiver.url)
    try:
        assert tracer.enabled and tracer.endpoint == receiver.url + "/v1/traces"
        trace_id = drive_run(tracer)
        assert tracer.force_flush()
    finally:
        tracer.shutdown()

    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.encodings) == ({"gzip"} if compression == "gzip" else {""})
    assert len(receiver.spans) == 5
    assert {s.trace_id for s in receiver.spans} == {trace_id}
    assert len(trace_id) == 32 and int(trace_id, 16)

    run = receiver.one("run essay")
    assert run.parent_span_id == ""  # a new run is a root span
    assert run.kind == SPAN_KIND_INTERNAL
    assert run.attributes["orchestrator.run_id"] == "run-1"
    assert run.attributes["orchestrator.workflow"] == "essay"
    assert run.attributes["orchestrator.resumed"] is False
    assert run.attributes["orchestrator.status"] == "paused"
    assert run.status_code == STATUS_UNSET  # a pause is not an error
    assert run.events == [("paused", {"orchestrator.step_id": "approve", "orchestrator.reason": "awaiting review"})]
    assert run.resource["service.name"] == "orchestrator"
    assert run.scope == "orchestrator"

    first, second = sorted(receiver.named("step draft"), key=lambda s: s.attributes["orchestrator.attempt"])
    for step in (first, second):
        assert step.parent_span_id == run.span_id
        assert step.attributes["orchestrator.step_id"] == "draft"
        assert step.attributes["orchestrator.agent"] == "writer"
        assert step.attributes["orchestrator.step_type"] == "llm"
    assert first.attributes["orchestrator.attempt"] == 1 and second.attributes["orchestrator.attempt"] == 2
    assert first.attributes["orchestrator.status"] == "failed"
    assert first.status_code == STATUS_ERROR and first.status_message == "gate failed: min_words"
    assert second.attributes["orchestrator.status"] == "succeeded" and second.status_code == STATUS_UNSET
    assert first.events == [("gate", {"orchestrator.gate.name": "min_words", "orchestrator.gate.passed": False,
                                      "orchestrator.gate.score": 0.4, "orchestrator.gate.reason": "too short",
                                      "orchestrator.gate.severity": "blocking"})]
    assert second.events[0][1]["orchestrator.gate.passed"] is True

    llm = receiver.one("chat gpt-4o")
    assert llm.parent_span_id == first.span_id
    assert llm.kind == SPAN_KIND_CLIENT
    assert llm.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 48,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "openinference.span.kind": "LLM",   # OpenInference's names beside the GenAI ones (Phoenix, Langfuse)
        "llm.model_name": "gpt-4o",
        "llm.provider": "openai",
    }

    tool = receiver.one("execute_tool web_search")
    assert tool.parent_span_id == first.span_id
    assert tool.kind == SPAN_KIND_INTERNAL
    assert tool.attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search",
                               "gen_ai.tool.call.id": "call_1", "orchestrator.results": 3,
                               "openinference.span.kind": "TOOL", "tool.name": "web_search"}


def test_resumed_run_and_decision_continue_the_trace(tracer: RunTracer, receiver: Receiver) -> None:
    trace_id = drive_run(tracer)
    returned = tracer.decision_event("run-1", trace_id, "approve", "approve", "alice", comment="looks good")
    assert returned == trace_id
    with tracer.run("run-1", "essay", trace_id=trace_id, resumed=True) as resumed:
        assert resumed.trace_id == trace_id
        with resumed.step_attempt("approve", agent=None, attempt=1, step_type="review") as step:
            step.set_status("succeeded")
        resumed.set_status("succeeded")
    tracer.force_flush()

    runs = receiver.named("run essay")
    assert len(runs) == 2
    assert {s.trace_id for s in receiver.spans} == {trace_id}  # one trace for the whole run
    first = next(s for s in runs if not s.attributes["orchestrator.resumed"])
    again = next(s for s in runs if s.attributes["orchestrator.resumed"])
    # each execution is a root of the same trace: no span points at a parent that was never sent
    assert first.parent_span_id == "" and again.parent_span_id == ""
    sent = {s.span_id for s in receiver.spans}
    assert all(s.parent_span_id in sent for s in receiver.spans if s.parent_span_id)
    assert receiver.one("step approve").parent_span_id == again.span_id
    assert "orchestrator.agent" not in receiver.one("step approve").attributes  # None is left out

    review = receiver.one("review approve")
    assert review.parent_span_id == "" and review.trace_id == trace_id
    assert review.attributes["orchestrator.run_id"] == "run-1"
    assert review.events == [("review", {"orchestrator.decision": "approve", "orchestrator.step_id": "approve",
                                         "orchestrator.reviewer": "alice", "orchestrator.comment": "looks good"})]


def test_decision_without_a_stored_trace_starts_one(tracer: RunTracer, receiver: Receiver) -> None:
    trace_id = tracer.decision_event("run-2", None, "reject", "draft", None)
    tracer.force_flush()
    assert trace_id is not None and len(trace_id) == 32
    review = receiver.one("review reject")
    assert review.trace_id == trace_id and review.parent_span_id == ""
    assert "orchestrator.reviewer" not in review.events[0][1]


def test_a_bad_stored_trace_id_starts_a_new_trace(tracer: RunTracer, receiver: Receiver) -> None:
    with tracer.run("run-3", "essay", trace_id="not-a-trace-id", resumed=True) as run:
        new_id = run.trace_id
    tracer.force_flush()
    span = receiver.one("run essay")
    assert span.trace_id == new_id and span.parent_span_id == ""
    assert span.attributes["orchestrator.invalid_trace_id"] == "not-a-trace-id"


def test_uppercase_trace_id_is_accepted(tracer: RunTracer, receiver: Receiver) -> None:
    stored = "0AF7651916CD43DD8448EB211C80319C"
    with tracer.run("run-4", "essay", trace_id=stored, resumed=True) as run:
        assert run.trace_id == stored.lower()
    tracer.force_flush()
    assert receiver.one("run essay").trace_id == stored.lower()


def test_errors_escaping_a_span_are_recorded(tracer: RunTracer, receiver: Receiver) -> None:
    with tracer.run("run-5", "essay") as run, run.step_attempt("draft", agent="writer", attempt=1) as step:
        with pytest.raises(TimeoutError), step.tool_call("fetch"):
            raise TimeoutError("upstream slow")
        with step.llm_call(provider="anthropic", model="claude-sonnet-4") as llm:
            llm.set_error("rate limited", error_type="RateLimitError")
    tracer.force_flush()

    tool = receiver.one("execute_tool fetch")
    assert tool.status_code == STATUS_ERROR and tool.status_message == "upstream slow"
    assert tool.attributes["error.type"] == "TimeoutError"
    assert tool.events[0][0] == "exception"
    assert tool.events[0][1]["exception.type"] == "TimeoutError"

    chat = receiver.one("chat claude-sonnet-4")
    assert chat.status_code == STATUS_ERROR and chat.attributes["error.type"] == "RateLimitError"
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.request.temperature" not in chat.attributes  # only what was given


def test_spans_ended_explicitly_and_twice(tracer: RunTracer, receiver: Receiver) -> None:
    """Code that cannot nest ``with`` blocks ends spans itself; ending twice exports once."""
    run = tracer.run("run-6", "essay")
    step = run.step_attempt("draft", attempt=1)
    step.end()
    step.end()
    with run:
        pass
    run.end()
    tracer.force_flush()
    assert [s.name for s in receiver.spans].count("step draft") == 1
    assert receiver.one("step draft").parent_span_id == receiver.one("run essay").span_id


def test_env_endpoint_and_service_name(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "essay-bot")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    tracer = get_tracer()
    try:
        assert not isinstance(tracer, NoopRunTracer)
        with tracer.run("run-7", "essay"):
            pass
    finally:
        tracer.shutdown()
    span = receiver.one("run essay")
    assert span.resource["service.name"] == "essay-bot"
    assert span.resource["deployment.environment"] == "test"


def test_tracers_are_shared_per_endpoint_until_shut_down(receiver: Receiver) -> None:
    a = get_tracer(receiver.url)
    assert get_tracer(receiver.url + "/v1/traces") is a  # the same endpoint, spelled fully
    a.shutdown()
    b = get_tracer(receiver.url)
    try:
        assert b is not a
    finally:
        b.shutdown()


def test_grpc_protocol_is_refused(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(TelemetryError, match="http/protobuf"):
        get_tracer(receiver.url)


def test_concurrent_steps_in_anyio_tasks(tracer: RunTracer, receiver: Receiver,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """As the executor runs them: sibling steps interleave in a task group, each span made current
    inside its own task; every span keeps its parent and no context is detached out of order."""
    import anyio

    async def step(run: RunSpan, step_id: str) -> None:
        with run.step_attempt(step_id, agent="a", attempt=1) as attempt:
            await anyio.sleep(0.01)
            with attempt.llm_call(provider="openai", model=f"m-{step_id}") as llm:
                await anyio.sleep(0.01)
                llm.record(input_tokens=1, output_tokens=1, finish_reason="stop")
            attempt.set_status("succeeded")

    async def main() -> None:
        with tracer.run("run-8", "fanout") as run:
            async with anyio.create_task_group() as tg:
                for sid in ("a", "b", "c"):
                    tg.start_soon(step, run, sid)

    with caplog.at_level("ERROR", logger="opentelemetry"):
        anyio.run(main)
    tracer.force_flush()
    assert not [r for r in caplog.records if "detach" in r.getMessage()]
    run_span = receiver.one("run fanout")
    for sid in ("a", "b", "c"):
        assert receiver.one(f"step {sid}").parent_span_id == run_span.span_id
        assert receiver.one(f"chat m-{sid}").parent_span_id == receiver.one(f"step {sid}").span_id
