"""The step-level dashboard (`stats`) and the reporting checklist (`report`) over stored runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.attribution.methods import attribute
from orchestrator.attribution.report import build_report
from orchestrator.attribution.stats import compute_stats, parse_since
from orchestrator.core.errors import InputError
from orchestrator.store import GateRow, NewAttribution, NewOutcome, NewRun, NewStepRecord
from tests.attribution.conftest import FIX

DAY = 86400.0
MONDAY = datetime(2026, 11, 2, 12, tzinfo=UTC).timestamp()  # ISO week 2026-W45
STEPS = ["retrieve", "summarize", "recommend"]


def _gate(ok: bool) -> GateRow:
    return GateRow(gate="min_items", passed=ok, score=1.0 if ok else 0.0, reason="", details=None)


def add_run(store, wid: int, t: float, *, retrieve_ok: bool, incorrect: bool = False,
            blamed: str | None = None, attributed: bool = True) -> str:
    """A synthetic production run whose steps started at ``t``; retrieve and summarize are gated."""
    run_id = store.create_run(NewRun(wid, "procure", {}, status="succeeded"))
    for i, sid in enumerate(STEPS):
        gates = {"retrieve": [_gate(retrieve_ok)], "summarize": [_gate(True)]}.get(sid, [])
        store.insert_step_record(NewStepRecord(run_id=run_id, workflow_id=wid, step_id=sid, step_type="reasoning",
                                               agent=f"{sid}er", attempt=1, status="succeeded", started_at=t + i,
                                               ended_at=t + i + 0.5, output="1", gates=gates))
    if incorrect:
        oid = store.add_outcome(NewOutcome(run_id, value=0.0, correct=False, source="human",
                                           termination="goal_achieved"))
        if attributed:
            store.add_attribution(NewAttribution(run_id, method="trace", params={}, step_credits=[],
                                                 agent_credits={}, blamed_step=blamed, confidence=0.9, evidence={},
                                                 outcome_id=oid))
    return run_id


@pytest.fixture
def two_weeks(store):
    """Week 45: retrieve passes 96% of 50 runs. Week 46: 89% of 100 runs, and 10 incorrect outcomes."""
    wid = store.register_workflow("procure", "1", {"name": "procure", "steps": [
        {"id": sid, "agent": f"{sid}er"} for sid in STEPS]}, None, "procure-v1")
    for i in range(50):
        add_run(store, wid, MONDAY + i * 60, retrieve_ok=i >= 2)
    blame = ["retrieve"] * 6 + ["summarize"] * 3 + [None]
    for i in range(100):
        add_run(store, wid, MONDAY + 7 * DAY + i * 60, retrieve_ok=i >= 11, incorrect=i < 10,
                blamed=blame[i] if i < 10 else None, attributed=i < 9)
    return wid


class TestStats:
    def test_pass_rate_trend_per_week_and_the_drop_alert(self, store, two_weeks):
        report = compute_stats(store, "procure", now=MONDAY + 14 * DAY)
        retrieve = report.steps[0]
        assert (retrieve.step_id, retrieve.agent, retrieve.runs) == ("retrieve", "retrieveer", 150)
        assert retrieve.gate_pass_rate == round(137 / 150, 4)
        assert [(p.period, p.runs, p.gate_pass_rate) for p in retrieve.trend] == [("2026-W45", 50, 0.96),
                                                                                    ("2026-W46", 100, 0.89)]
        (alert,) = report.alerts
        assert (alert.step_id, alert.previous, alert.current, alert.drop_points) == ("retrieve", 0.96, 0.89, 7.0)
        assert "from 96% (2026-W45) to 89% (2026-W46)" in alert.message

    def test_failure_attribution_distribution(self, store, two_weeks):
        report = compute_stats(store, "procure")
        shares = {s.step_id: s.blamed_share for s in report.steps}
        assert shares == {"retrieve": 0.6, "summarize": 0.3, "recommend": 0.0}
        assert report.incorrect_outcomes == 10 and report.unattributed == 1
        assert report.blamed_distribution == {"retrieve": 0.6, "summarize": 0.3, "(unattributed)": 0.1}
        week46 = report.steps[0].trend[-1]
        assert (week46.incorrect, week46.blamed, week46.blamed_share) == (10, 6, 0.6)

    def test_blame_comes_from_each_runs_explaining_record_and_says_which_method(self, cli, store, two_weeks):
        """A counterfactual stored after the automatic trace outranks it, as on the review screen."""
        blamed_run = next(r for r in store.list_runs(workflow="procure", kind="run")
                          if [a.blamed_step for a in store.attributions(r.run_id)] == ["retrieve"])
        store.add_attribution(NewAttribution(blamed_run.run_id, method="counterfactual", params={}, step_credits=[],
                                             agent_credits={}, blamed_step="summarize", confidence=0.8, evidence={}))
        report = compute_stats(store, "procure")
        assert report.blame_methods == {"trace": 8, "counterfactual": 1}
        assert {s.step_id: s.blamed for s in report.steps if s.blamed} == {"retrieve": 5, "summarize": 4}
        shown = cli("stats", "--workflow", "procure")
        assert "blame from each run's explaining attribution record: trace 8, counterfactual 1 run(s)" in shown.stdout

    def test_ungated_step_has_no_pass_rate_and_steady_step_no_alert(self, store, two_weeks):
        report = compute_stats(store, "procure")
        steps = {s.step_id: s for s in report.steps}
        assert steps["recommend"].gate_pass_rate is None and steps["recommend"].runs == 150
        assert steps["summarize"].gate_pass_rate == 1.0
        assert [a.step_id for a in report.alerts] == ["retrieve"]

    def test_since_keeps_only_later_runs(self, store, two_weeks):
        report = compute_stats(store, "procure", since=MONDAY + 7 * DAY)
        assert report.runs == 100 and report.steps[0].runs == 100
        assert report.alerts == []  # one week: nothing to compare with

    def test_daily_periods(self, store, two_weeks):
        report = compute_stats(store, "procure", period="day")
        assert [p.period for p in report.steps[0].trend] == ["2026-11-02", "2026-11-09"]

    def test_smaller_drops_and_thin_windows_raise_no_alert(self, store, two_weeks):
        assert compute_stats(store, "procure", alert_drop=8.0).alerts == []
        assert compute_stats(store, "procure", min_runs=60).alerts == []

    def test_replays_are_not_production_traffic(self, store, run_wf):
        run = run_wf("propagated", offset=1000)
        attribute(store, run.run_id, "counterfactual")
        report = compute_stats(store)
        assert report.runs == 1 and {s.runs for s in report.steps} == {1}

    def test_stats_json_keeps_the_contract(self, cli, store, two_weeks):
        result = cli("stats", "--workflow", "procure", "--json")
        assert result.exit_code == 0
        doc = result.json()
        assert {"workflow", "steps", "alerts"} <= set(doc) and doc["workflow"] == "procure"
        for step in doc["steps"]:
            assert {"step_id", "runs", "gate_pass_rate", "blamed_share", "trend"} <= set(step)
        assert doc["alerts"][0]["step_id"] == "retrieve"

    def test_stats_prints_table_and_alerts(self, cli, two_weeks):
        shown = cli("stats", "--workflow", "procure")
        assert shown.exit_code == 0
        assert "96% -> 89%" in shown.stdout and "alert" in shown.stdout
        assert "failure attribution: retrieve 60%" in shown.stdout

    def test_bad_since_and_ambiguous_workflow_exit_2(self, cli, store, two_weeks):
        assert cli("stats", "--since", "last tuesday").exit_code == 2
        cli("run", str(FIX / "no_evaluator.yaml"))
        ambiguous = cli("stats")
        assert ambiguous.exit_code == 2 and "choose one with --workflow" in ambiguous.stderr

    def test_stats_on_an_empty_store_exits_2(self, cli, store):
        result = cli("stats")
        assert result.exit_code == 2 and "no runs are stored yet" in result.stderr


def test_parse_since_accepts_dates_and_relative_spans():
    assert parse_since("2026-11-02") == datetime(2026, 11, 2, tzinfo=UTC).timestamp()
    assert parse_since("14d", now=100 * DAY) == 86 * DAY
    assert parse_since("2w", now=100 * DAY) == 86 * DAY
    with pytest.raises(InputError):
        parse_since("yesterday-ish")


class TestReport:
    def test_checklist_measures_non_determinism_lengths_and_outcomes(self, store, run_wf):
        for _ in range(2):
            run_wf("coin")  # flip's output depends on the run id: same inputs, different outputs
        report = build_report(store, "coin")
        rates = {s.step_id: s.rate for s in report.nondeterminism}
        assert rates == {"fetch": 0.0, "flip": 1.0, "respond": None}
        assert report.trajectory_steps.count == 2 and report.trajectory_steps.p50 == 3
        assert report.outcomes["share_nonzero_reward"] == 1.0
        assert report.outcomes["by_source"] == {"evaluator": 2}

    def test_checklist_counts_composition_and_granularity(self, store, run_wf):
        run = run_wf("propagated", offset=1000)
        attribute(store, run.run_id, "shapley", by="agent")
        report = build_report(store, "propagated")
        assert report.runs == 1
        assert report.composition["by_kind"]["run"] == 1 and report.composition["by_kind"]["counterfactual"] >= 1
        assert report.granularity["by_method"] == {"trace": 1, "shapley": 1}
        assert report.granularity["by_granularity"] == {"step": 1, "agent": 1}
        assert report.baseline["steps_with_baseline"] == ["analyze"]
        assert report.outcomes["share_nonzero_reward"] == 0.0

    def test_report_command_json_and_text(self, cli):
        cli("run", str(FIX / "propagated.yaml"), "-i", "offset=1000")
        doc = cli("report", "--json").json()
        assert {"trajectory_steps", "outcomes", "nondeterminism", "composition", "granularity", "baseline"} <= set(doc)
        text = cli("report", "--workflow", "propagated")
        assert text.exit_code == 0 and "reporting checklist" in text.stdout and "non-determinism" in text.stdout
