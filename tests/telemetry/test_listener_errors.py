"""A listener that raises beside the OpenTelemetry listener: the run succeeds and every span is exported."""

from __future__ import annotations

import logging

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.spec.events import RunFinished, StepFinished
from orchestrator.store import Store
from tests.orchestrator.test_listener_errors import CHAIN, Breaks, warnings_of

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")


def test_a_raising_listener_beside_opentelemetry_keeps_every_span(store: Store, receiver,
                                                                  caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    listener = Breaks(StepFinished, RunFinished)
    with caplog.at_level(logging.WARNING, logger="orchestrator.events"):
        result = start_run(store, load_workflow(CHAIN), {}, on_event=listener, otel=receiver.url)
    assert result.status == "succeeded"
    steps = load_workflow(CHAIN).order
    assert sorted(s.name for s in receiver.spans) == sorted([f"run {load_workflow(CHAIN).name}",
                                                            *(f"step {sid}" for sid in steps)])
    assert len(warnings_of(caplog)) == 1
