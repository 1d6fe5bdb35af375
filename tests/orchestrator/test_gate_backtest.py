"""`orchestrator gates backtest` and `Orchestrator.backtest`: a changed workflow's gates judged on stored runs.

Nine runs of ``quotes_v1.yaml`` (prices below, labels as the names say) are backtested with
``quotes_v2.yaml``, whose fetch gate is tightened to a maximum of 140, whose price warning is loosened to
125, and which adds a ceiling gate on summarize, a stricter critic, and a new step no stored run has. The
runs labelled incorrect are blamed on ``fetch`` by the backward trace (v1's warning failed there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.api import Orchestrator
from tests.conftest import side_effect_file
from tests.llm.fake_openai_server import completion

HERE = Path(__file__).parent.parent / "fixtures" / "backtest"
V1, V2, JUDGED, SCORED, INVALID = (str(HERE / f"{name}.yaml") for name in (
    "quotes_v1", "quotes_v2", "quotes_judged", "quotes_scored", "invalid"))

RUNS = {"ok_10": (10, True), "ok_50": (50, True), "plain_90": (90, None), "ok_110": (110, True),
        "wrong_130": (130, False), "wrong_150": (150, False), "ok_160": (160, True), "wrong_200": (200, False),
        "paused_neg": (-5, None)}
"""Name -> (price, label: True correct, False incorrect, None unlabelled). -5 pauses at fetch's range gate."""

CONTRACT_KEYS = {"workflow", "runs_of", "runs", "matching_runs", "filters", "judges", "steps_executed",
                 "model_calls", "gates"}
GATE_KEYS = {"step_id", "gate", "kind", "severity", "on_gate_fail", "judge", "guards", "new", "runs", "evaluated",
             "not_evaluable", "skipped", "passes", "fails", "errors", "would_pause", "pauses_per_100_runs",
             "failures", "caught", "missed", "false_alarms", "other_incorrect_pauses", "unlabelled_pauses",
             "precision", "recall", "caught_runs", "false_alarm_runs", "changed", "not_evaluated", "model_calls",
             "input_tokens", "output_tokens", "cost"}


def store_runs(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workflow: str = V1,
               runs: dict[str, tuple[int, bool | None]] = RUNS) -> dict[str, str]:
    """Run ``workflow`` once per price and label the runs; returns name -> run id. The steps log to
    ``runs.log`` meanwhile, so a test can see that logging works."""
    side_effect_file(tmp_path, monkeypatch, "runs.log", "STEP_LOG")
    ids: dict[str, str] = {}
    with Orchestrator(db) as orch:
        for name, (price, label) in runs.items():
            ids[name] = orch.run(workflow, {"price": price}).run_id
            if label is not None:
                orch.label(ids[name], correct=label)
    return ids


@pytest.fixture
def stored(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return store_runs(db_url, tmp_path, monkeypatch)


@pytest.fixture
def backtest_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: dict[str, str]) -> Path:
    """Where a step executed during the backtest would write (empty unless something executed)."""
    return side_effect_file(tmp_path, monkeypatch, "backtest.log", "STEP_LOG")


def test_a_tightened_gate_is_scored_against_the_labels_and_no_step_executes(db_url, tmp_path, stored,
                                                                            backtest_log):
    with Orchestrator(db_url) as orch:
        report = orch.backtest(V2)
    assert (tmp_path / "runs.log").read_text().count("fetch") == len(RUNS)  # the steps do log when they run
    assert backtest_log.read_text() == ""
    assert (report.workflow, report.runs, report.steps_executed, report.model_calls) == ("quotes", 9, 0, 0)
    fetch = report.gate("fetch", "range")
    assert (fetch.evaluated, fetch.fails, fetch.would_pause, fetch.pauses_per_100_runs) == (9, 4, 4, 44.44)
    assert (fetch.failures, fetch.caught, fetch.missed) == (3, 2, 1)
    assert sorted(fetch.caught_runs) == sorted([stored["wrong_150"], stored["wrong_200"]])
    assert (fetch.false_alarms, fetch.false_alarm_runs) == (1, [stored["ok_160"]])
    assert fetch.unlabelled_pauses == 1  # the run that paused at -5 (its label is unknown)
    assert (fetch.precision.hits, fetch.precision.of, fetch.precision.value) == (2, 3, 0.6667)
    assert (fetch.recall.hits, fetch.recall.of, fetch.recall.value) == (2, 3, 0.6667)
    assert not fetch.new
    # passed under v1 (min 0 only), fails now; the paused run failed before and fails now: no change
    assert sorted((c.run_id, c.change, c.was, c.now) for c in fetch.changed) == sorted(
        (stored[name], "now_fails", True, False) for name in ("wrong_150", "ok_160", "wrong_200"))
    assert "above max 140" in next(c.reason for c in fetch.changed if c.run_id == stored["wrong_200"])


def test_a_loosened_warning_and_a_new_gate_show_their_changed_verdicts(db_url, stored):
    with Orchestrator(db_url) as orch:
        report = orch.backtest(V2)
    warning = report.gate("fetch", "price_sane")
    assert (warning.severity, warning.fails, warning.would_pause, warning.caught) == ("warn", 4, 0, 0)
    assert [(c.run_id, c.change, c.was, c.now) for c in warning.changed] == [
        (stored["ok_110"], "now_passes", False, True)]
    ceiling = report.gate("summarize", "ceiling")
    assert ceiling.new
    assert (ceiling.evaluated, ceiling.not_evaluable, ceiling.would_pause) == (8, 1, 1)
    assert [(c.run_id, c.change, c.was) for c in ceiling.changed] == [(stored["wrong_200"], "new_gate_fails", None)]
    # the run is wrong, but its blame is on fetch: a pause here is neither a catch nor a false alarm
    assert (ceiling.failures, ceiling.caught, ceiling.false_alarms, ceiling.other_incorrect_pauses) == (0, 0, 0, 1)
    assert (ceiling.precision.value, ceiling.recall.value) == (None, None)
    assert [(n.run_id, n.reason) for n in ceiling.not_evaluated] == [
        (stored["paused_neg"], "step 'summarize' did not run in this run (no record)")]
    upstream_reader = report.gate("summarize", "quote_steps:states_fetched_price")  # reads ctx.upstream
    assert (upstream_reader.evaluated, upstream_reader.passes, upstream_reader.errors) == (8, 8, 0)


def test_a_changed_critic_is_called_on_the_outputs_it_verifies(db_url, stored, backtest_log):
    with Orchestrator(db_url) as orch:
        check = orch.backtest(V2, step="check").gate("check", "critic")
    assert (check.kind, check.guards) == ("critic", ["check", "fetch", "summarize"])
    assert (check.evaluated, check.fails, check.caught, check.failures, check.false_alarms) == (8, 1, 1, 3, 0)
    assert [(c.run_id, c.change) for c in check.changed] == [(stored["wrong_200"], "now_fails")]
    assert "above the cap of 175" in check.changed[0].reason
    assert [(n.run_id, n.reason) for n in check.not_evaluated] == [
        (stored["paused_neg"], "critic 'check' reads step 'fetch', which waits for review (its output went no "
                               "further)")]
    assert backtest_log.read_text() == ""


def test_gates_whose_input_is_missing_are_reported_not_evaluable_with_the_reason(db_url, stored):
    with Orchestrator(db_url) as orch:
        report = orch.backtest(V2)
    enrich = report.gate("enrich", "required_fields")
    assert (enrich.runs, enrich.evaluated, enrich.not_evaluable, enrich.would_pause) == (9, 0, 9, 0)
    assert {n.reason for n in enrich.not_evaluated} == {
        "step 'enrich' is not in the workflow version this run ran (a new step)"}
    critic = report.gate("vendor_check", "critic")
    assert (critic.evaluated, critic.not_evaluable, critic.pauses_per_100_runs) == (0, 9, None)
    assert {n.reason for n in critic.not_evaluated} == {
        "critic 'vendor_check' reads step 'enrich', which is not in the workflow version this run ran (a new step)"}


def test_an_evaluators_outcome_labels_runs_as_a_persons_does(db_url, tmp_path, monkeypatch):
    stored = store_runs(db_url, tmp_path, monkeypatch, workflow=SCORED,
                        runs={"fine": (50, None), "pricey": (110, None), "over": (130, None), "far_over": (160, None)})
    with Orchestrator(db_url) as orch:
        assert orch.get_run(stored["over"]).outcomes[-1].source == "evaluator"
        fetch = orch.backtest(V2, step="fetch").gate("fetch", "range")
    assert (fetch.failures, fetch.caught_runs, fetch.false_alarms) == (2, [stored["far_over"]], 0)
    assert (fetch.precision.value, fetch.recall.value) == (1.0, 0.5)


def test_a_workflow_backtested_on_its_own_runs_changes_no_verdict(db_url, tmp_path, monkeypatch):
    """The backtest's verdicts are the ones a run reaches: v2's own runs, judged again by v2, keep every verdict."""
    store_runs(db_url, tmp_path, monkeypatch, workflow=V2,
               runs={"low": (10, True), "high": (150, None), "capped": (120, None), "neg": (-1, None)})
    with Orchestrator(db_url) as orch:
        report = orch.backtest(V2)
    evaluated = [g for g in report.gates if g.evaluated]
    assert {(g.step_id, g.gate) for g in evaluated} >= {("fetch", "range"), ("fetch", "price_sane"),
                                                        ("summarize", "ceiling"), ("check", "critic")}
    assert [c for g in report.gates for c in g.changed] == []
    assert not any(g.new for g in evaluated)


def test_cli_json_keeps_the_contract_and_filters_runs(cli, stored, backtest_log):
    result = cli("gates", "backtest", V2, "--step", "fetch", "--runs", "outcome=incorrect", "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert set(doc) == CONTRACT_KEYS
    assert (doc["runs"], doc["filters"], doc["steps_executed"]) == (3, {"outcome": "incorrect"}, 0)
    assert [(g["step_id"], g["gate"]) for g in doc["gates"]] == [("fetch", "range"), ("fetch", "price_sane")]
    for gate in doc["gates"]:
        assert set(gate) == GATE_KEYS
        assert set(gate["precision"]) == set(gate["recall"]) == {"value", "hits", "of"}
    assert set(doc["gates"][0]["changed"][0]) == {"run_id", "unit", "was", "now", "change", "reason"}
    fetch = doc["gates"][0]
    assert (fetch["caught"], fetch["failures"], fetch["false_alarms"]) == (2, 3, 0)
    limited = cli("gates", "backtest", V2, "--step", "fetch", "--runs", "status=succeeded,limit=2", "--json").json()
    assert (limited["runs"], limited["matching_runs"], limited["filters"]) == (
        2, 8, {"status": "succeeded", "limit": 2})
    assert backtest_log.read_text() == ""


def test_cli_table_names_each_gate_with_its_numbers_and_the_changed_runs(cli, stored):
    result = cli("gates", "backtest", V2)
    assert result.exit_code == 0, result.stderr
    fetch_row = next(line for line in result.stdout.splitlines() if "fetch" in line and "range" in line)
    assert "2/3" in fetch_row and "44.44" in fetch_row and "67% (2/3)" in fetch_row
    assert f"{stored['ok_160']} fetch: now fails: field 'price' = 160 is above max 140" in result.stdout
    assert "not evaluated in 9 runs: step 'enrich' is not in the workflow version this run ran" in result.stdout
    assert "no step executed" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    ((INVALID,), "invalid.yaml:7: steps.fetch.gates[0]: step 'fetch' gate 'range': 'min' (10) is greater"),
    ((V2, "--step", "nope"), "--step 'nope' is not a step of workflow 'quotes'"),
    ((V2, "--runs", "colour=red"), "--runs 'colour=red': unknown filter 'colour'"),
    ((V2, "--runs", "limit"), "--runs 'limit' is not KEY=VALUE"),
    ((V2, "--runs", "status=sleeping"), "--status 'sleeping' is not a run status"),
    ((V2, "--runs", "workflow=nobody"), "no runs of workflow 'nobody' are stored; workflows with runs: ['quotes']"),
])
def test_bad_input_exits_2_with_one_clean_line(cli, stored, args, message):
    result = cli("gates", "backtest", *args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.slow  # the model client's first import and its calls over HTTP
def test_a_model_judge_is_skipped_unless_asked_and_then_called_and_counted(db_url, tmp_path, monkeypatch, cli,
                                                                           fake_openai):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    store_runs(db_url, tmp_path, monkeypatch, runs={"a": (10, True), "b": (20, True), "c": (-3, None)})
    skipped = cli("gates", "backtest", JUDGED, "--step", "summarize", "--json").json()["gates"][0]
    assert (skipped["gate"], skipped["judge"], skipped["skipped"], skipped["not_evaluable"]) == ("llm_judge", True,
                                                                                                  2, 1)
    assert fake_openai.requests == []
    for _ in range(2):
        fake_openai.respond(completion(json.dumps({"score": 0.9, "reason": "states 10 EUR"})))
    judged = cli("gates", "backtest", JUDGED, "--step", "summarize", "--judges", "--json").json()
    gate = judged["gates"][0]
    assert (gate["evaluated"], gate["passes"], gate["model_calls"], judged["model_calls"]) == (2, 2, 2, 2)
    assert gate["input_tokens"] == 2 * 11
    assert len(fake_openai.requests) == 2


@pytest.mark.slow  # a PostgreSQL schema per test
def test_backtest_on_each_durable_backend(durable_url, tmp_path, monkeypatch):
    stored = store_runs(durable_url, tmp_path, monkeypatch,
                        runs={"ok": (160, True), "wrong": (150, False), "low": (20, True)})
    with Orchestrator(durable_url) as orch:
        fetch = orch.backtest(V2, step="fetch").gate("fetch", "range")
    assert (fetch.caught_runs, fetch.false_alarm_runs) == ([stored["wrong"]], [stored["ok"]])
    assert (fetch.precision.value, fetch.recall.value) == (0.5, 1.0)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_twin_gives_the_same_report(db_url, stored, anyio_backend):
    with Orchestrator(db_url) as orch:
        report = await orch.abacktest(V2, step="fetch", outcome="incorrect")
    assert report.runs == 3 and report.gate("fetch", "range").caught == 2
