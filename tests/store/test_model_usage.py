"""``stats`` reads a workflow's model calls added up by the database, per step, purpose, gate and UTC day: as
many rows however many calls were made, with the same totals as the calls themselves; on every store."""

from __future__ import annotations

from orchestrator.attribution.stats import compute_stats
from orchestrator.spec.context import ModelCall
from orchestrator.store import Store
from tests.store.rows import add_run, step

DAY = 86400.0
NOON = 20_000 * DAY + 12 * 3600


def calls_of_runs(store: Store, runs: int) -> None:
    """``runs`` runs of one day, each with two answered step calls of ``a``, a judge call of gate ``g``, and a
    failed call (not charged); every call priced."""
    wf = store.register_workflow("wf", "1", {"name": "wf", "steps": [{"id": "a", "run": "m:f"}]}, None, "h1")
    for i in range(runs):
        run_id = add_run(store, wf)
        record = store.insert_step_record(step(run_id, wf, "a", started_at=NOON + i))
        store.add_model_calls(run_id, record, [
            ModelCall("step", None, "openai", "m", NOON + i, NOON + i + 1, 100, 10, 0.001),
            ModelCall("step", None, "openai", "m", NOON + i, NOON + i + 1, 50, 5, 0.0005),
            ModelCall("judge", "g", "openai", "m", NOON + i, NOON + i + 1, 20, 2, 0.0002),
            ModelCall("step", None, "openai", "m", NOON + i, NOON + i + 1, 0, 0, None, error="timeout")])


def test_model_usage_is_one_row_per_step_purpose_gate_and_day_whatever_the_calls(store: Store) -> None:
    calls_of_runs(store, 30)
    groups = sorted(store.workflow_model_usage("wf"), key=lambda g: g.purpose)
    assert [(g.step_id, g.purpose, g.gate, g.day_start, g.calls, g.input_tokens, g.output_tokens, g.unpriced)
            for g in groups] == [("a", "judge", "g", 20_000 * DAY, 30, 600, 60, 0),
                                 ("a", "step", None, 20_000 * DAY, 90, 4500, 450, 0)]
    assert round(groups[1].cost, 8) == round(30 * 0.0015, 8)
    assert store.workflow_model_usage("wf", since=NOON + 30) == []


def test_stats_totals_the_groups_as_the_calls_and_an_unpriced_answer_leaves_the_cost_unknown(store: Store) -> None:
    calls_of_runs(store, 3)
    report = compute_stats(store, "wf", period="day")
    [a] = report.steps
    assert (a.model_calls, a.input_tokens, a.output_tokens, a.cost) == (12, 510, 51, round(3 * 0.0017, 8))
    assert {p: u.calls for p, u in report.model_usage.items()} == {"judge": 3, "step": 9}
    [point] = report.model_trend
    assert point.calls == 12 and point.period == "2024-10-04"
    [judge] = report.judge_spend
    assert (judge.gate, judge.calls, judge.input_tokens) == ("g", 3, 60)
    run_id = store.list_runs(limit=1)[0].run_id
    record = store.step_records(run_id)[0].id
    store.add_model_calls(run_id, record, [ModelCall("step", None, "openai", "local", NOON, NOON + 1, 5, 5, None)])
    assert compute_stats(store, "wf", period="day").steps[0].cost is None
