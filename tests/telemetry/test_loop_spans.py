"""A loop's iterations are step spans of their own in the run's trace, beside the loop's span, which
carries the `repeat` verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.flow.conftest import FLOW

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")

if TYPE_CHECKING:
    from tests.telemetry.conftest import Receiver


def test_each_iteration_is_a_step_span_and_the_loop_span_carries_its_verdict(cli, step_log, receiver: Receiver,
                                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    res = cli("run", str(FLOW / "loop.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    run = receiver.one("run loop")
    iterations = [receiver.one(f"step draft#{n}") for n in (1, 2, 3)]
    loop = receiver.one("step draft")
    assert all(s.parent_span_id == run.span_id for s in [*iterations, loop])
    assert [s.attributes["orchestrator.step_id"] for s in iterations] == ["draft#1", "draft#2", "draft#3"]
    assert iterations[0].end <= iterations[1].start and iterations[1].end <= iterations[2].start
    gates = [e[1] for e in loop.events if e[0] == "gate"]
    assert [(g["orchestrator.gate.name"], g["orchestrator.gate.passed"]) for g in gates] == [("repeat", True)]
