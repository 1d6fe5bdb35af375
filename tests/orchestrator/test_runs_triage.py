"""`orchestrator runs` for triage: paging, the outcome/pause/blame columns and every filter (SQLite)."""

from __future__ import annotations

import time

import pytest

from orchestrator.store import NewRun, open_store
from tests.conftest import FIXTURES, listed_row

GATED = str(FIXTURES / "gated.yaml")


def run_gated(cli, x: int) -> str:
    """A run of gated.yaml: x=1 pauses at `scored` (score 0.1 < 0.5), x=9 succeeds."""
    result = cli("run", GATED, "--input", f"x={x}", "--json")
    assert result.exit_code in (0, 3), result.stderr
    return result.json()["run_id"]


@pytest.fixture
def mixed(cli) -> dict[str, str]:
    """Four runs: one paused, one approved despite its gate and labelled incorrect (so the backward trace
    blames `scored`), one labelled correct, one unlabelled."""
    runs = {"paused": run_gated(cli, 1), "wrong": run_gated(cli, 1)}
    assert cli("approve", runs["wrong"]).exit_code == 0
    for name in ("right", "plain"):
        runs[name] = run_gated(cli, 9)
    assert cli("label", runs["wrong"], "--incorrect").exit_code == 0
    assert cli("label", runs["right"], "--correct").exit_code == 0
    return runs


def listed(cli, *args: str) -> list[str]:
    result = cli("runs", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [doc["run_id"] for doc in result.json()]


def test_json_keeps_the_contract_keys_and_adds_outcome_pause_and_blame(cli, mixed):
    docs = {d["run_id"]: d for d in cli("runs", "--json").json()}
    assert set(docs) == set(mixed.values())
    for doc in docs.values():
        assert {"run_id", "workflow", "status", "created_at"} <= set(doc)
    paused = docs[mixed["paused"]]
    assert (paused["status"], paused["waiting_step"], paused["waiting_steps"]) == ("paused", "scored", ["scored"])
    assert "0.1" in paused["gate_reason"]
    wrong = docs[mixed["wrong"]]
    assert (wrong["outcome"], wrong["correct"], wrong["blamed_step"]) == (0.0, False, "scored")
    assert (docs[mixed["right"]]["outcome"], docs[mixed["right"]]["correct"]) == (1.0, True)
    assert docs[mixed["plain"]]["outcome"] is None and docs[mixed["plain"]]["waiting_step"] is None


def test_the_table_shows_outcome_waiting_step_and_gate_reason(cli, mixed):
    result = cli("runs")
    assert result.exit_code == 0
    paused_line = listed_row(result.stdout, mixed["paused"])
    assert "scored" in paused_line and "0.1" in paused_line
    assert "0.00 incorrect" in listed_row(result.stdout, mixed["wrong"])
    assert "1.00 correct" in listed_row(result.stdout, mixed["right"])
    assert "tokens" not in result.stdout  # no listed run called a model
    assert "showing" not in result.stdout  # everything fits on the page


def test_limit_and_offset_page_through_runs_and_say_when_more_exist(cli, mixed):
    every = listed(cli)
    assert len(every) == 4
    first = cli("runs", "--limit", "2")
    assert "showing 1-2 of 4; --offset 2 for more" in first.stdout
    assert listed(cli, "--limit", "2") == every[:2]
    assert listed(cli, "--limit", "2", "--offset", "2") == every[2:]
    last = cli("runs", "--limit", "2", "--offset", "2")
    assert "showing 3-4 of 4" in last.stdout and "for more" not in last.stdout
    as_json = cli("runs", "--json", "--limit", "1")
    assert len(as_json.json()) == 1 and "showing 1-1 of 4; --offset 1 for more" in as_json.stderr


def test_the_default_page_holds_fifty_runs(cli, db_url):
    store = open_store(db_url)
    wf = store.register_workflow("many", "1", {"name": "many", "steps": []}, None, "h")
    for _ in range(55):
        store.create_run(NewRun(wf, "many", {}, status="succeeded"))
    store.close()
    result = cli("runs", "--json")
    assert len(result.json()) == 50 and "showing 1-50 of 55; --offset 50 for more" in result.stderr


def test_outcome_filters_by_the_latest_outcome(cli, mixed):
    assert listed(cli, "--outcome", "incorrect") == [mixed["wrong"]]
    assert listed(cli, "--outcome", "correct") == [mixed["right"]]


def test_blamed_filters_by_the_stored_attribution(cli, mixed):
    assert listed(cli, "--blamed", "scored") == [mixed["wrong"]]
    assert listed(cli, "--blamed", "no-such-step") == []


def test_since_takes_a_duration_or_an_iso_time(cli, db_url, mixed):
    store = open_store(db_url)
    wf = store.register_workflow("old", "1", {"name": "old", "steps": []}, None, "h")
    old = store.create_run(NewRun(wf, "old", {}, status="succeeded"))
    store.close()
    assert old in listed(cli)
    assert set(listed(cli, "--since", "2h")) == set(mixed.values()) | {old}
    assert listed(cli, "--since", "2999-01-01") == []
    assert old in listed(cli, "--since", time.strftime("%Y-%m-%dT00:00:00", time.gmtime(time.time() - 86400)))


def test_kind_maps_original_to_stored_runs_and_lists_replays(cli, mixed):
    fork = cli("replay", mixed["plain"], "--from", "final", "--json")
    assert fork.exit_code == 0, fork.stderr
    fork_id = fork.json()["run_id"]
    assert fork_id not in listed(cli)
    assert listed(cli, "--kind", "replay") == [fork_id]
    assert fork_id not in listed(cli, "--kind", "original")


@pytest.mark.parametrize(("args", "message"), [
    (("--outcome", "maybe"), "--outcome 'maybe' must be correct or incorrect"),
    (("--kind", "fork"), "--kind 'fork' must be one of"),
    (("--since", "yesterday"), "--since 'yesterday' is not a date"),
    (("--limit", "-1"), "--limit and --offset must not be negative"),
    (("--status", "done"), "--status 'done' is not a run status"),
])
def test_bad_filters_are_one_line_and_exit_2(cli, mixed, args, message):
    result = cli("runs", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
