"""A worker with ``--otel`` pushes its metrics over OTLP/HTTP: what a collector receives after a small backlog.

The worker is the CLI's (in-process), the collector a receiver on 127.0.0.1 that decodes each
``ExportMetricsServiceRequest``; the assertions are on the data points that went over the wire.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from orchestrator.store.transient import TALLY

pytest.importorskip("opentelemetry.sdk.metrics", reason="the 'otel' extra (opentelemetry-sdk) is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http.metric_exporter",
                    reason="the 'otel' extra (opentelemetry-exporter-otlp-proto-http) is not installed")

from orchestrator.llm.registry import reset_providers  # noqa: E402
from orchestrator.telemetry.metrics import STEP_SECONDS_BUCKETS  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402
from tests.llm.fake_openai_server import completion  # noqa: E402

if TYPE_CHECKING:
    from tests.telemetry.conftest import Receiver

CUMULATIVE = 2


@pytest.fixture
def model_endpoint(fake_openai, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ORCHESTRATOR_LLM_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    reset_providers()
    yield fake_openai
    reset_providers()


def queue(cli, workflow: str, *inputs: str) -> str:
    res = cli("run", str(FIXTURES / workflow), "--queue", *inputs, "--json")
    assert res.exit_code == 0, res.stderr
    return str(res.json()["run_id"])


@pytest.mark.slow
def test_a_worker_with_otel_exports_runs_steps_queue_and_model_use_as_otlp_metrics(cli, model_endpoint,
                                                                                    receiver: Receiver):
    model_endpoint.respond(completion(json.dumps({"category": "refund"}), prompt_tokens=30, completion_tokens=5))
    for x in (9, 9, 1):  # x=1 pauses at its gate, x=9 succeeds
        queue(cli, "gated.yaml", "--input", f"x={x}")
    llm_run = queue(cli, "llm_step.yaml")

    # the store's retry tallies count for the whole process (earlier tests in it included): none is added here
    tallied = (TALLY.retries, TALLY.transient_errors)
    worker = cli("worker", "--once", "--concurrency", "4", "--otel", receiver.url)

    assert worker.exit_code == 0, worker.stderr
    assert f"metrics exported to {receiver.url}/v1/metrics" in worker.stderr
    assert "/v1/metrics" in receiver.paths  # the last counts were sent as the worker stopped
    assert receiver.value("orchestrator.runs.started", workflow="gated") == 3
    assert receiver.value("orchestrator.runs.finished", workflow="gated", status="succeeded") == 2
    assert receiver.value("orchestrator.runs.finished", workflow="gated", status="paused") == 1
    assert receiver.value("orchestrator.runs.finished", workflow="llm-step", status="succeeded") == 1
    assert receiver.value("orchestrator.steps", workflow="gated", status="gate_failed") == 1
    assert receiver.value("orchestrator.steps", workflow="gated", status="succeeded") >= 2 * 5 + 1
    started = receiver.latest("orchestrator.runs.started")[frozenset({("workflow", "gated")})]
    assert (started.kind, started.monotonic, started.temporality, started.unit) == ("sum", True, CUMULATIVE, "{run}")

    durations = receiver.latest("orchestrator.step.duration")
    scored = durations[frozenset({("workflow", "gated"), ("step", "scored")})]
    assert (scored.kind, scored.unit, scored.value) == ("histogram", "s", 3)
    assert scored.bounds == tuple(STEP_SECONDS_BUCKETS) and sum(scored.bucket_counts) == 3
    steps_counted = sum(p.value for p in receiver.latest("orchestrator.steps").values())
    assert sum(p.value for p in durations.values()) == steps_counted

    assert receiver.value("orchestrator.queue.depth") == 0
    assert receiver.value("orchestrator.runs.awaiting_review") == 1
    age = receiver.latest("orchestrator.oldest_paused_run.age")[frozenset()]
    assert age.kind == "gauge" and age.unit == "s" and age.value >= 0
    assert receiver.value("orchestrator.lease.takeovers") == 0
    assert (receiver.value("orchestrator.store.retries"), receiver.value("orchestrator.store.transient_errors")) \
        == tallied

    stored = cli("show", llm_run, "--json").json()["model_calls"]
    assert len(stored) == 1
    model = {"provider": stored[0]["provider"], "model": stored[0]["model"]}
    assert receiver.value("orchestrator.model.calls", **model) == 1
    assert receiver.value("orchestrator.model.tokens", **model, direction="input") == 30
    assert receiver.value("orchestrator.model.tokens", **model, direction="output") == 5
    assert stored[0]["cost"] and receiver.value("orchestrator.model.cost", **model) == pytest.approx(stored[0]["cost"])
    assert {p.resource["service.name"] for p in receiver.points} == {"orchestrator"}

    assert len(receiver.named("run gated")) == 3  # the runs' spans went to the same endpoint


def test_otel_metrics_follow_the_standard_variables_and_can_be_turned_off(cli, receiver: Receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "workers-eu")
    queue(cli, "gated.yaml", "--input", "x=9")
    assert cli("worker", "--once").exit_code == 0
    assert receiver.value("orchestrator.runs.finished", workflow="gated", status="succeeded") == 1
    assert {p.resource["service.name"] for p in receiver.points} == {"workers-eu"}

    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    received = len(receiver.points)
    queue(cli, "gated.yaml", "--input", "x=9")
    worker = cli("worker", "--once")
    assert worker.exit_code == 0 and "metrics exported" not in worker.stderr
    assert len(receiver.points) == received


def test_a_metrics_protocol_other_than_http_protobuf_is_refused_before_any_claim(cli, receiver: Receiver,
                                                                                 monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
    queued = queue(cli, "gated.yaml", "--input", "x=9")
    res = cli("worker", "--once", "--otel", receiver.url)
    assert res.exit_code == 2
    assert "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL='grpc' is not supported" in res.stderr
    assert "Traceback" not in res.stderr
    assert cli("show", queued, "--json").json()["status"] == "queued"


@pytest.mark.parametrize(("otel", "variables", "expected"), [
    ("http://collector:4318", {}, "http://collector:4318/v1/metrics"),
    ("http://phoenix:6006/v1/traces", {}, "http://phoenix:6006/v1/metrics"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/metrics"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics:9090/otlp"}, "http://metrics:9090/otlp"),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://phoenix:6006/v1/traces"}, None),
    ("http://collector:4318", {"OTEL_METRICS_EXPORTER": "none"}, None),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, None),
], ids=["otel", "otel-traces-url", "endpoint", "metrics-endpoint", "traces-only", "exporter-none", "sdk-disabled"])
def test_where_metrics_are_exported(monkeypatch, otel, variables, expected):
    from orchestrator.telemetry import resolve_metrics_endpoint

    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert resolve_metrics_endpoint(otel) == expected
