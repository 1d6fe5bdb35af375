"""Telemetry off: a no-op tracer, no opentelemetry import, and a clear error when the extra is missing.

These run whether or not the ``otel`` extra is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import OrchestratorError
from orchestrator.telemetry import (
    NoopRunTracer,
    RunTracer,
    TelemetryError,
    get_tracer,
    resolve_endpoint,
    service_name,
)
from orchestrator.telemetry.spans import attribute_value

REPO = Path(__file__).resolve().parents[2]


def python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with no OTEL_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_no_endpoint_means_a_noop_tracer() -> None:
    tracer = get_tracer()
    assert isinstance(tracer, NoopRunTracer) and isinstance(tracer, RunTracer)
    assert not tracer.enabled and tracer.endpoint is None
    with tracer.run("run-1", "essay", trace_id=None, resumed=False) as run:
        assert run.trace_id is None
        with run.step_attempt("draft", agent="writer", attempt=1, step_type="llm") as step:
            assert not step.recording
            with step.llm_call(provider="openai", model="gpt-4o") as llm:
                llm.record(input_tokens=1, output_tokens=2, finish_reason="stop")
            with step.tool_call("search") as tool:
                tool.set_error(ValueError("x"))
            step.gate("g", passed=True, score=1.0, reason="ok", severity="blocking")
            step.set_status("failed", "boom")
        run.event("paused", step_id="draft")
    assert tracer.decision_event("run-1", None, "approve", "draft", "alice") is None
    assert tracer.force_flush()
    tracer.shutdown()


def test_noop_run_hands_back_the_stored_trace_id() -> None:
    """Writing ``run.trace_id`` back to the store never erases an id stored while tracing was on."""
    stored = "0af7651916cd43dd8448eb211c80319c"
    with get_tracer().run("run-1", "essay", trace_id=stored, resumed=True) as run:
        assert run.trace_id == stored
    assert get_tracer().decision_event("run-1", stored, "approve", None, None) == stored


def test_noop_span_does_not_swallow_exceptions() -> None:
    with pytest.raises(KeyError), get_tracer().run("r", "w"):
        raise KeyError("x")


def test_importing_telemetry_does_not_import_opentelemetry() -> None:
    proc = python(
        "import sys\n"
        "import orchestrator.telemetry as t\n"
        "tracer = t.get_tracer()\n"
        "with tracer.run('r', 'w') as run:\n"
        "    run.step_attempt('s').end()\n"
        "assert type(tracer).__name__ == 'NoopRunTracer', tracer\n"
        "loaded = sorted(m for m in sys.modules if m == 'opentelemetry' or m.startswith('opentelemetry.'))\n"
        "assert not loaded, loaded\n"
        "print('ok')\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_missing_extra_is_a_telemetry_error() -> None:
    """With OpenTelemetry unimportable, asking for telemetry names the extra to install."""
    proc = python(
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if the extra were not installed\n"
        "from orchestrator.telemetry import TelemetryError, get_tracer\n"
        "try:\n"
        "    get_tracer('http://127.0.0.1:4318')\n"
        "except TelemetryError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('no TelemetryError')\n")
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'orchestrator[otel]'" in proc.stdout
    assert "http://127.0.0.1:4318/v1/traces" in proc.stdout
    assert issubclass(TelemetryError, OrchestratorError)


@pytest.mark.parametrize(("explicit", "env", "expected"), [
    (None, {}, None),
    ("http://localhost:4318", {}, "http://localhost:4318/v1/traces"),
    ("http://localhost:4318/", {}, "http://localhost:4318/v1/traces"),
    ("http://localhost:6006/v1/traces", {}, "http://localhost:6006/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://cloud.langfuse.com/api/public/otel"},
     "https://cloud.langfuse.com/api/public/otel/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom"}, "http://collector:4318/custom"),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://a:1/t", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:2"},
     "http://a:1/t"),
    ("http://flag:4318", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}, "http://flag:4318/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, None),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SDK_DISABLED": "true"}, None),
    ("", {}, None),
], ids=["none", "flag-base", "flag-slash", "flag-full", "env-base", "env-traces", "traces-wins", "flag-wins",
        "blank-env", "sdk-disabled", "blank-flag"])
def test_resolve_endpoint(monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: dict[str, str],
                          expected: str | None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert resolve_endpoint(explicit) == expected


@pytest.mark.parametrize("bad", ["localhost:4318", "grpc://collector:4317"])
def test_endpoint_must_be_http(bad: str) -> None:
    with pytest.raises(TelemetryError, match="not an http"):
        get_tracer(bad)


def test_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert service_name() == "orchestrator"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "essay-bot")
    assert service_name() == "essay-bot"


def test_attribute_values_are_made_exportable() -> None:
    assert attribute_value(None) is None
    assert attribute_value("a") == "a" and attribute_value(3) == 3 and attribute_value(True) is True
    assert attribute_value(("a", "b")) == ["a", "b"]
    assert attribute_value([1, 2.5]) == [1.0, 2.5]
    assert attribute_value([1, "a"]) == ["1", "a"]
    assert attribute_value({"k": 1}) == "{'k': 1}"
