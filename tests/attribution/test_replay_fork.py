"""`replay --from STEP`: fork a new run from any step; the original is never modified."""

from __future__ import annotations

import json

import pytest

from orchestrator.attribution.methods import fork_run
from orchestrator.core.errors import NotFoundError
from tests.attribution.conftest import FIX, snapshot
from tests.conftest import calls


def _origins(store, run_id):
    return {r.step_id: r.origin for r in store.step_records(run_id)}


def test_fork_with_an_output_reuses_earlier_steps_and_reruns_later_ones(store, run_wf, step_log):
    run = run_wf("propagated", offset=1000)
    before = snapshot(store, run.run_id)
    fork = fork_run(store, run.run_id, "analyze", {"value": 7, "quality": 1.0})
    assert fork.status == "succeeded" and fork.value == 1.0
    assert _origins(store, fork.run_id) == {"fetch": "reused", "analyze": "replaced", "summarize": "executed",
                                            "respond": "executed"}
    forked = store.get_run(fork.run_id)
    assert (forked.kind, forked.parent_run_id, forked.parent_step) == ("replay", run.run_id, "analyze")
    assert forked.output == {"answer": 7, "expected": 7, "quality": 1.0}
    assert calls(step_log).count("fetch") == 1  # not executed again
    assert snapshot(store, run.run_id) == before


def test_fork_without_an_output_executes_the_step_again(store, run_wf, step_log):
    run = run_wf("propagated", offset=1000)
    fork = fork_run(store, run.run_id, "summarize")
    assert _origins(store, fork.run_id) == {"fetch": "reused", "analyze": "reused", "summarize": "executed",
                                            "respond": "executed"}
    assert calls(step_log).count("carry") == 2 and calls(step_log).count("add_offset") == 1


def test_forked_records_link_to_the_forks_own_upstream_records(store, run_wf):
    run = run_wf("propagated", offset=1000)
    fork = fork_run(store, run.run_id, "respond")
    records = {r.step_id: r for r in store.step_records(fork.run_id)}
    assert records["analyze"].inputs["data"] == {"$record": records["fetch"].id}
    assert records["respond"].consumed[0]["record_id"] == records["summarize"].id
    assert [g.gate for g in records["analyze"].gates] == ["range"]  # reused verdicts travel with the output


def test_fork_never_repeats_a_side_effect(store, run_wf, step_log):
    run = run_wf("side_effects")
    fork = fork_run(store, run.run_id, "analyze", {"value": 7, "quality": 1.0})
    # send's inputs changed and it has no simulate: the fork stops there rather than act or lie
    assert fork.status == "blocked" and fork.blocked_by == "send"
    assert _origins(store, fork.run_id)["send"] == "blocked"
    assert calls(step_log).count("notify") == 1
    assert fork.value is None


def test_fork_reuses_a_side_effect_whose_inputs_are_unchanged(store, run_wf, step_log):
    run = run_wf("side_effects")
    fork = fork_run(store, run.run_id, "finish")  # downstream of send: send's inputs are as recorded
    assert _origins(store, fork.run_id)["send"] == "reused"
    assert calls(step_log).count("notify") == 1
    assert fork.status == "succeeded"


def test_fork_from_an_unknown_step_is_refused(store, run_wf):
    run = run_wf("propagated", offset=1000)
    with pytest.raises(NotFoundError, match="has no step 'nope'"):
        fork_run(store, run.run_id, "nope")


class TestReplayCommand:
    def test_replay_prints_the_fork_and_exits_with_its_status(self, cli, tmp_path):
        run_id = cli("run", str(FIX / "propagated.yaml"), "-i", "offset=1000", "--json").json()["run_id"]
        output = tmp_path / "fixed.json"
        output.write_text(json.dumps({"value": 7, "quality": 1.0}))
        result = cli("replay", run_id, "--from", "analyze", "--output", str(output), "--json")
        assert result.exit_code == 0
        doc = result.json()
        assert doc["parent_run_id"] == run_id and doc["parent_step"] == "analyze" and doc["kind"] == "replay"
        assert doc["output"]["answer"] == 7

    def test_replay_of_an_unknown_step_or_run_exits_2(self, cli):
        run_id = cli("run", str(FIX / "propagated.yaml"), "--json").json()["run_id"]
        bad_step = cli("replay", run_id, "--from", "nope")
        assert bad_step.exit_code == 2 and "has no step 'nope'" in bad_step.stderr
        bad_run = cli("replay", "r000", "--from", "fetch")
        assert bad_run.exit_code == 2 and "no run 'r000'" in bad_run.stderr

    def test_replay_with_unreadable_output_exits_2_and_stores_nothing(self, cli, store, tmp_path):
        run_id = cli("run", str(FIX / "propagated.yaml"), "--json").json()["run_id"]
        before = store.count_rows()
        broken = tmp_path / "broken.json"
        broken.write_text("{not json")
        result = cli("replay", run_id, "--from", "analyze", "--output", str(broken))
        assert result.exit_code == 2 and "invalid JSON" in result.stderr
        assert store.count_rows() == before
