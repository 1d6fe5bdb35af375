"""Replays are exported as traces of their own, each naming the run it replays, when telemetry is on.

A traced run is forked and attributed through the CLI against an OTLP receiver: every replay run is a new
trace with a run's span tree, its run span carries the original's run id and trace id, and the original's
trace gets no span from them. With telemetry off, replays export nothing and still work.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the 'otel' extra (opentelemetry-sdk) is not installed")

if TYPE_CHECKING:
    from tests.telemetry.conftest import ReceivedSpan, Receiver

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workflows"
FLOW = Path(__file__).parents[1] / "fixtures" / "flow"


def traced_run(cli, receiver: Receiver, workflow: str, *inputs: str) -> tuple[str, str]:
    """Run ``workflow`` exporting to the receiver; its run id and stored trace id."""
    run = cli("run", str(FIXTURES / workflow), *inputs, "--otel", receiver.url, "--json")
    assert run.exit_code == 0, run.stderr
    run_id = run.json()["run_id"]
    trace_ids = {s.trace_id for s in receiver.spans}
    assert len(trace_ids) == 1
    return run_id, trace_ids.pop()


def replay_roots(receiver: Receiver, run_id: str) -> list[ReceivedSpan]:
    return [s for s in receiver.spans if s.attributes.get("orchestrator.replay_of.run_id") == run_id]


def test_a_counterfactual_exports_each_replay_as_its_own_trace_naming_the_original(
        cli, receiver: Receiver, store, step_log, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    run_id, original_trace = traced_run(cli, receiver, "scored_chain.yaml", "--input", "x=1")
    original_spans = {s.span_id for s in receiver.spans}

    attributed = cli("attribute", run_id, "--method", "counterfactual", "--otel", receiver.url, "--json")
    assert attributed.exit_code == 0, attributed.stderr

    # the original's trace is what the run did, nothing more
    assert {s.span_id for s in receiver.spans if s.trace_id == original_trace} == original_spans
    roots = replay_roots(receiver, run_id)
    replays = {c["evidence"]["replay_run_id"] for c in attributed.json()["candidates"]}
    assert {s.attributes["orchestrator.run_id"] for s in roots} >= replays
    # one trace per replay run, none of them the original's
    assert len({s.trace_id for s in roots}) == len(roots) and original_trace not in {s.trace_id for s in roots}
    for root in roots:
        assert root.name == "run scored-chain" and root.parent_span_id == ""
        assert root.attributes["orchestrator.replay_of.trace_id"] == original_trace
        assert root.attributes["orchestrator.replay.kind"] == "counterfactual"
        assert store.get_run(root.attributes["orchestrator.run_id"]).trace_id == root.trace_id
    changed = {s.attributes.get("orchestrator.replay.changed") for s in roots}
    assert {"s1", "s2"} <= changed  # each candidate step's replay names the step it replaced
    s1_replay = next(s for s in roots if s.attributes.get("orchestrator.replay.changed") == "s1")
    steps = [s for s in receiver.spans if s.trace_id == s1_replay.trace_id and s.name.startswith("step ")]
    assert {s.name for s in steps} == {"step s1", "step s2"}  # s1 replaced, so s2 runs on its new input
    assert all(s.parent_span_id == s1_replay.span_id for s in steps)
    assert s1_replay.attributes["orchestrator.status"] == "succeeded"


def test_a_fork_is_a_trace_with_step_spans_and_gate_verdicts(cli, receiver: Receiver, step_log):
    run_id, original_trace = traced_run(cli, receiver, "gated.yaml", "--input", "x=7")
    original_spans = {s.span_id for s in receiver.spans}

    forked = cli("replay", run_id, "--from", "scored", "--otel", receiver.url, "--json")
    assert forked.exit_code == 0, forked.stderr

    assert {s.span_id for s in receiver.spans if s.trace_id == original_trace} == original_spans
    root, = replay_roots(receiver, run_id)
    assert root.attributes["orchestrator.run_id"] == forked.json()["run_id"]
    assert root.attributes["orchestrator.replay.kind"] == "replay"
    assert root.attributes["orchestrator.replay.changed"] == "scored"
    assert root.attributes["orchestrator.replay_of.trace_id"] == original_trace
    in_fork = [s for s in receiver.spans if s.trace_id == root.trace_id]
    # steps before the fork point are reused (no execution, no span); the rest run again
    assert {s.name for s in in_fork} == {"run gated", "step scored", "step after_scored", "step final"}
    scored = next(s for s in in_fork if s.name == "step scored")
    assert scored.parent_span_id == root.span_id
    assert [e[1]["orchestrator.gate.name"] for e in scored.events if e[0] == "gate"] == ["range"]


def test_with_telemetry_off_replays_export_nothing_and_still_work(cli, receiver: Receiver, store, step_log,
                                                                  monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    run = cli("run", str(FIXTURES / "scored_chain.yaml"), "--input", "x=1", "--json")
    assert run.exit_code == 0, run.stderr
    run_id = run.json()["run_id"]

    attributed = cli("attribute", run_id, "--method", "counterfactual", "--json")
    forked = cli("replay", run_id, "--from", "s2", "--json")

    assert attributed.exit_code == 0, attributed.stderr
    assert forked.exit_code == 0, forked.stderr
    assert receiver.spans == []
    assert store.get_run(forked.json()["run_id"]).trace_id is None


def test_a_bad_otel_url_stops_a_replay_before_it_runs(cli, store, step_log, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    run = cli("run", str(FIXTURES / "scored_chain.yaml"), "--input", "x=1", "--json")
    run_id = run.json()["run_id"]

    forked = cli("replay", run_id, "--from", "s2", "--otel", "localhost:4318")

    assert forked.exit_code != 0 and "--otel" in forked.stderr and "Traceback" not in forked.stderr
    assert [r.run_id for r in store.list_runs()] == [run_id]  # no replay run was made


def test_a_child_runs_replay_is_a_trace_of_its_own_linked_from_the_parents_replay_step(cli, receiver: Receiver,
                                                                                      store, step_log):
    run = cli("run", str(FLOW / "tree_attr_parent.yaml"), "--otel", receiver.url, "--json")
    assert run.exit_code == 0, run.stderr
    run_id, original_trace = run.json()["run_id"], receiver.spans[0].trace_id
    child_run = run.json()["children"][0]["run_id"]
    original_spans = {s.span_id for s in receiver.spans}

    forked = cli("replay", run_id, "--from", "research > retrieve", "--otel", receiver.url, "--json")
    assert forked.exit_code == 0, forked.stderr

    parent_replay, = replay_roots(receiver, run_id)
    child_replay, = replay_roots(receiver, child_run)
    assert parent_replay.attributes["orchestrator.replay.changed"] == "research > retrieve"
    assert child_replay.name == "run tree-attr-research" and child_replay.parent_span_id == ""
    # the original child run was traced in its parent's trace, and its replay names that trace
    assert child_replay.attributes["orchestrator.replay_of.trace_id"] == original_trace
    assert len({original_trace, parent_replay.trace_id, child_replay.trace_id}) == 3
    assert store.get_run(child_replay.attributes["orchestrator.run_id"]).parent_run_id == child_run
    # the child's replay links to the step of the parent's replay that ran it
    research = next(s for s in receiver.spans if s.trace_id == parent_replay.trace_id and s.name == "step research")
    assert [(t, s) for t, s, _ in child_replay.links] == [(research.trace_id, research.span_id)]
    replayed = {s.name for s in receiver.spans if s.trace_id == child_replay.trace_id}
    assert replayed == {"run tree-attr-research", "step retrieve", "step summarize"}
    assert {s.span_id for s in receiver.spans if s.trace_id == original_trace} == original_spans


def test_every_shapley_replay_is_exported_as_its_own_trace(cli, receiver: Receiver, store, step_log,
                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHAIN_SLEEP", "0")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)  # the setting, not the flag, turns it on
    run_id, original_trace = traced_run(cli, receiver, "scored_chain.yaml", "--input", "x=1")

    attributed = cli("attribute", run_id, "--method", "shapley", "--json")
    assert attributed.exit_code == 0, attributed.stderr

    replays = [r for r in store.list_runs(kind=None) if r.parent_run_id == run_id]
    roots = replay_roots(receiver, run_id)
    assert replays and sorted(s.attributes["orchestrator.run_id"] for s in roots) == sorted(r.run_id for r in replays)
    assert len({s.trace_id for s in roots} | {original_trace}) == len(roots) + 1
    assert {store.get_run(r.run_id).trace_id for r in replays} == {s.trace_id for s in roots}
