"""Execution semantics: concurrency, retries, timeouts, failures and what gets stored."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import FIXTURES, calls


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def test_independent_branches_overlap_in_time(cli):
    doc = cli("run", str(FIXTURES / "fanout.yaml"), "--json").json()
    assert doc["status"] == "succeeded"
    steps = {s["step_id"]: s for s in doc["steps"]}
    spans = [(_ts(steps[b]["started_at"]), _ts(steps[b]["ended_at"])) for b in ("b1", "b2", "b3")]
    for start, end in spans:
        assert end - start >= 0.39  # each branch really slept 0.4 s
    latest_start = max(s for s, _ in spans)
    earliest_end = min(e for _, e in spans)
    assert latest_start < earliest_end, "all three 0.4 s branches were running at the same moment"
    assert _ts(steps["join"]["started_at"]) >= max(e for _, e in spans)


def test_max_concurrency_one_serializes_branches(cli):
    doc = cli("run", str(FIXTURES / "fanout.yaml"), "--json", "--max-concurrency", "1").json()
    branches = [s for s in doc["steps"] if s["step_id"] in ("b1", "b2", "b3")]
    spans = sorted((_ts(s["started_at"]), _ts(s["ended_at"])) for s in branches)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end


def test_consumer_starts_only_after_its_producer_record_exists(cli):
    doc = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()
    steps = {s["step_id"]: s for s in doc["steps"]}
    total = steps["total"]
    linked = {c["step_id"]: c for c in total["consumed"]}
    assert set(linked) == {"left", "right"}
    assert linked["left"]["record_id"] == steps["left"]["record_id"]
    assert all(c["delay"] >= 0 for c in total["consumed"])
    assert total["inputs"] == {"a": {"$record": steps["left"]["record_id"]},
                               "b": {"$record": steps["right"]["record_id"]}}


def test_transient_errors_are_retried_and_every_attempt_is_stored(cli, step_log):
    result = cli("run", str(FIXTURES / "retry_flaky.yaml"), "--json")
    assert result.exit_code == 0
    doc = result.json()
    flaky = [a for a in doc["attempts"] if a["step_id"] == "flaky"]
    assert [a["status"] for a in flaky] == ["failed", "failed", "succeeded"]
    assert flaky[0]["error"] == "ConnectionError: transient failure on attempt 1"
    assert calls(step_log).count("flaky") == 3


def test_exhausted_attempts_fail_the_run_with_exit_1(cli, step_log):
    result = cli("run", str(FIXTURES / "retry_exhausted.yaml"), "--json")
    assert result.exit_code == 1
    doc = result.json()
    assert doc["status"] == "failed"
    broken = [a for a in doc["attempts"] if a["step_id"] == "broken"]
    assert [a["attempt"] for a in broken] == [1, 2, 3]
    assert all(a["error"] == "ValueError: the vendor API returned garbage" for a in broken)
    assert "after" not in calls(step_log)
    assert "step 'broken' failed" in doc["error"]


def test_errors_not_listed_for_retry_fail_at_once(cli, step_log):
    result = cli("run", str(FIXTURES / "retry_wrong_exception.yaml"))
    assert result.exit_code == 1
    assert calls(step_log).count("broken") == 1


def test_timeout_cancels_the_step_and_records_a_timeout_error(cli):
    result = cli("run", str(FIXTURES / "timeout.yaml"), "--json")
    assert result.exit_code == 1
    slow = {s["step_id"]: s for s in result.json()["steps"]}["slow"]
    assert slow["status"] == "failed"
    assert slow["error"] == "TimeoutError: step 'slow' timed out after 0.3 s"
    assert slow["duration"] < 2


def test_a_timed_out_attempt_is_retried(cli):
    doc = cli("run", str(FIXTURES / "timeout_retry.yaml"), "--json").json()
    assert doc["status"] == "succeeded"
    assert [a["status"] for a in doc["attempts"] if a["step_id"] == "slow_once"] == ["failed", "succeeded"]


def test_output_that_is_not_json_fails_the_step_naming_it(cli):
    result = cli("run", str(FIXTURES / "unserializable.yaml"), "--json")
    assert result.exit_code == 1
    weird = {s["step_id"]: s for s in result.json()["steps"]}["weird"]
    assert weird["error"] == ("NotJsonError: step 'weird' output is an object; return JSON data, a pydantic model "
                              "or a dataclass")


def test_pydantic_models_and_dataclasses_are_stored_as_json(cli):
    doc = cli("run", str(FIXTURES / "models.yaml"), "--json").json()
    assert doc["status"] == "succeeded"
    assert doc["output"] == {"vendor": "Acme", "total": 10.0}
    assert {s["step_id"]: s for s in doc["steps"]}["vendor"]["output"] == {"name": "Acme", "price": 1.0}


def test_inputs_are_converted_to_declared_types(cli):
    doc = cli("run", str(FIXTURES / "types.yaml"), "--input", "n=41", "--input", "flag=yes",
              "--input", "tags=[1, 2]", "--input", "ratio=0.25", "--json").json()
    assert doc["output"] == 42
    assert doc["inputs"] == {"n": 41, "ratio": 0.25, "flag": True, "tags": [1, 2], "name": "anon"}


def test_input_file_supplies_inputs(cli, tmp_path):
    (tmp_path / "in.json").write_text('{"n": 9}')
    doc = cli("run", str(FIXTURES / "types.yaml"), "--input-file", str(tmp_path / "in.json"), "--json").json()
    assert doc["output"] == 10


def test_bad_inputs_are_exit_2_and_store_nothing(cli, store):
    cases = [
        (["--input", "n=lots"], "input 'n' must be an integer; got 'lots'"),
        ([], "needs input 'n' (integer); pass --input n=..."),
        (["--input", "n=1", "--input", "bogus=1"], "has no input 'bogus'"),
        (["--input", "n"], "--input 'n' must look like key=value"),
        (["--input", "n=1", "--input", "flag=maybe"], "input 'flag' must be a boolean"),
    ]
    for args, message in cases:
        result = cli("run", str(FIXTURES / "types.yaml"), *args)
        assert result.exit_code == 2, args
        assert message in result.stderr, (args, result.stderr)
    assert store.count_rows()["runs"] == 0


def test_run_id_and_progress_are_shown(cli):
    result = cli("run", str(FIXTURES / "ok.yaml"))
    assert result.exit_code == 0
    assert "succeeded" in result.stdout
    run_id = result.stdout.split()[1]
    assert run_id.startswith("r")
    assert "total" in result.stderr  # progress lines name the steps
