"""A listener that raises never changes what happened: the run ends as its steps decided, every record
is kept, and the error is logged once (tests/telemetry/test_listener_errors.py: the spans beside it)."""

from __future__ import annotations

import logging

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.spec.events import Event, StepFinished
from orchestrator.store import Store
from tests.conftest import FIXTURES

CHAIN = FIXTURES / "chain.yaml"


class Breaks:
    """A listener that raises on every event of the given kinds and remembers what it saw."""

    def __init__(self, *kinds: type) -> None:
        self.kinds = kinds
        self.seen: list[str] = []

    def __call__(self, event: Event) -> None:
        self.seen.append(type(event).__name__)
        if isinstance(event, self.kinds):
            raise RuntimeError(f"listener broke on {type(event).__name__}")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "orchestrator.events"]


@pytest.mark.parametrize("kinds", [(StepFinished,), (object,)], ids=["on-step-finished", "on-every-event"])
def test_a_raising_listener_leaves_a_successful_run_succeeded(store: Store, caplog: pytest.LogCaptureFixture,
                                                              kinds: tuple[type, ...],
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    listener = Breaks(*kinds)
    with caplog.at_level(logging.WARNING, logger="orchestrator.events"):
        result = start_run(store, load_workflow(CHAIN), {}, on_event=listener)
    assert result.status == "succeeded" and result.error is None
    records = store.step_records(result.run_id, latest_only=True)
    assert {r.status for r in records} == {"succeeded"} and len(records) == len(load_workflow(CHAIN).order)
    assert listener.seen.count("StepFinished") == len(records) and listener.seen[-1] == "RunFinished"
    (warning,) = warnings_of(caplog)  # once, however many events it broke on
    assert "raised RuntimeError: listener broke on" in warning
    assert f"of run {result.run_id}); the run goes on unchanged" in warning
