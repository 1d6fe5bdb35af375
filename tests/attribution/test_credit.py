"""Shapley and difference credit over the steps or agents of stored runs, valued by interventions."""

from __future__ import annotations

import pytest

from orchestrator.attribution.credit import difference_attribution, shapley_attribution
from orchestrator.attribution.methods import attribute
from orchestrator.core.errors import InputError
from tests.attribution.conftest import snapshot
from tests.conftest import calls


def _credits(result):
    return {c.step_id: c.credit for c in result.candidates}


class TestShapleyOnRuns:
    def test_credits_add_up_to_v_all_minus_v_none(self, store, run_wf):
        run = run_wf("compensated")
        result = shapley_attribution(store, run.run_id)
        assert result.evidence["v_all"] == pytest.approx(0.7) and result.evidence["v_none"] == pytest.approx(1.0)
        assert sum(_credits(result).values()) == pytest.approx(0.7 - 1.0)
        assert result.params["exact"] is True

    def test_compensated_error_splits_blame_and_help(self, store, run_wf):
        run = run_wf("compensated")
        credits = _credits(shapley_attribution(store, run.run_id))
        assert credits["analyze"] == pytest.approx(-0.65)  # -1 without the patch, -0.3 with it: on average
        assert credits["patch"] == pytest.approx(0.35)

    def test_symmetric_steps_get_equal_credit_and_the_null_step_gets_none(self, store, run_wf):
        run = run_wf("two_faults")  # left and right are both wrong; merge needs both right
        result = shapley_attribution(store, run.run_id)
        credits = _credits(result)
        assert credits["left"] == pytest.approx(credits["right"]) == pytest.approx(-0.5)
        assert credits["fine"] == 0.0 and credits["fetch"] == 0.0 and credits["join"] == 0.0
        assert result.blamed_step == "left"  # tie broken by workflow order

    def test_by_agent_credits_each_agent_for_all_its_steps(self, store, run_wf):
        run = run_wf("propagated", offset=1000)
        result = shapley_attribution(store, run.run_id, by="agent")
        assert result.agent_credits == pytest.approx({"analyst": -1.0, "retriever": 0.0, "writer": 0.0})
        writer = next(c for c in result.candidates if c.agent == "writer")
        assert writer.evidence["steps"] == ["summarize", "respond"]
        assert result.evidence["blamed_agent"] == "analyst" and result.blamed_step == "analyze"

    def test_sampling_reports_a_confidence_interval_and_stays_efficient(self, store, run_wf):
        run = run_wf("two_faults")
        result = shapley_attribution(store, run.run_id, samples=16, seed=7)
        assert result.params["exact"] is False and result.params["samples"] == 16
        assert sum(_credits(result).values()) == pytest.approx(-1.0)
        for c in result.candidates:
            lo, hi = c.evidence["ci95"]
            assert lo <= c.credit <= hi
        fine = next(c for c in result.candidates if c.step_id == "fine")
        assert fine.evidence["ci95"] == [0.0, 0.0]

    def test_identical_sub_executions_run_once(self, store, run_wf, step_log):
        run = run_wf("propagated", offset=1000)
        result = shapley_attribution(store, run.run_id)  # 16 coalitions
        # carry sees two distinct inputs (wrong, corrected), as itself and as its resample reference
        assert calls(step_log).count("carry") == 1 + 3
        assert result.cost == len(calls(step_log)) - 4  # the original run made 4 calls
        assert result.evidence["coalitions_evaluated"] == 16

    def test_replays_never_modify_the_original(self, store, run_wf):
        run = run_wf("two_faults")
        before = snapshot(store, run.run_id)
        attribute(store, run.run_id, "shapley", by="agent")
        assert snapshot(store, run.run_id) == before
        assert all(c.kind == "counterfactual" for c in store.child_runs(run.run_id))


class TestDifference:
    def test_difference_credits_what_replacing_one_player_changes(self, store, run_wf):
        run = run_wf("compensated")
        credits = _credits(difference_attribution(store, run.run_id))
        assert credits["analyze"] == pytest.approx(-0.3) and credits["patch"] == pytest.approx(0.7)

    def test_difference_cannot_see_a_failure_that_needs_two_fixes_where_shapley_can(self, store, run_wf):
        run = run_wf("two_faults")
        result = difference_attribution(store, run.run_id)
        assert result.blamed_step is None  # fixing left alone (or right alone) changes nothing
        assert all(c.credit == 0 for c in result.candidates)
        assert shapley_attribution(store, run.run_id).blamed_step == "left"


def test_unknown_method_or_granularity_is_an_input_error(store, run_wf):
    run = run_wf("propagated", offset=1000)
    with pytest.raises(InputError, match="--method must be one of"):
        attribute(store, run.run_id, "magic")
    with pytest.raises(InputError, match="--by agent applies to shapley and difference"):
        attribute(store, run.run_id, "counterfactual", by="agent")
    with pytest.raises(InputError, match="--by must be one of"):
        attribute(store, run.run_id, "shapley", by="team")
