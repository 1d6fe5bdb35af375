"""A child run's spans sit in its parent's trace: its run span is a child of the parent's step span.

The tree runs through the CLI against a real OTLP/HTTP receiver; assertions are on the spans it got.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from orchestrator.store import open_store
from tests.flow.conftest import FLOW
from tests.telemetry.conftest import otlp_receiver

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.telemetry.conftest import Receiver


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """An OTLP/HTTP receiver the runs export to (no OTEL_* setting of the shell leaks in)."""
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    with otlp_receiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.url)
        yield rec


def test_the_child_run_span_is_a_child_of_the_parents_step_span(cli, receiver: Receiver, step_log, db_url):
    res = cli("run", str(FLOW / "tree_parent.yaml"), "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    parent_run, child_run = receiver.one("run tree-parent"), receiver.one("run tree-research")
    research = receiver.one("step research")
    assert research.parent_span_id == parent_run.span_id
    assert child_run.parent_span_id == research.span_id
    assert child_run.attributes["orchestrator.run_id"] == doc["children"][0]["run_id"]
    assert receiver.one("step retrieve").parent_span_id == child_run.span_id
    assert len({s.trace_id for s in receiver.spans}) == 1
    store = open_store(db_url)
    assert store.get_run(doc["children"][0]["run_id"]).trace_id == parent_run.trace_id


def test_a_map_of_children_puts_each_child_under_its_instance(cli, receiver: Receiver, step_log):
    res = cli("run", str(FLOW / "tree_map.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    instances = {s.attributes["orchestrator.step_id"]: s for s in receiver.spans
                 if s.name.startswith("step per_ticket[")}
    children = receiver.named("run tree-triage")
    assert len(children) == 5
    assert {c.parent_span_id for c in children} == {s.span_id for s in instances.values()}
    paused = instances["per_ticket[3]"]
    assert paused.attributes["orchestrator.status"] == "gate_failed"
