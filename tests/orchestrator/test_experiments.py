"""``orchestrator experiment``: run a changed workflow on a dataset of stored runs, reuse what did not
change, and compare: flips called out and put down to the changed step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store import open_store
from tests.conftest import calls

STEPS = """\
import os


def _log(name):
    with open(os.environ["STEP_LOG"], "a") as fh:
        fh.write(name + "\\n")


def retrieve(q):
    _log("retrieve")
    return {"docs": [q]}


def retrieve_again(q):
    _log("retrieve_again")
    return {"docs": [q]}


def upper(docs):
    _log("upper")
    return {"text": docs[0].upper()}


def lower(docs):
    _log("lower")
    return {"text": docs[0].lower()}


def notify(text):
    _log("notify")
    return {"sent": True}


def notify_dry_run(text):
    _log("dry_run")
    return {"sent": False}


def score(output, reference=None):
    return 1.0 if output["text"] == reference else 0.0
"""


def workflow_text(retrieve: str = "retrieve", answer: str = "upper", gate: str = "", notify: str | None = None) -> str:
    text = f"""\
name: demo
inputs:
  q: {{type: string}}
steps:
  - id: retrieve
    run: exp_steps:{retrieve}
    inputs: {{q: $inputs.q}}
  - id: answer
    run: exp_steps:{answer}
    inputs: {{docs: retrieve.docs}}
{gate}"""
    if notify is not None:
        text += f"""\
  - id: notify
    type: action
    run: exp_steps:notify
    side_effects: true
{notify}    inputs: {{text: answer.text}}
"""
    return text + "outcome: exp_steps:score\noutput: answer\n"


ONE_OF_ABC = """\
    gates:
      - gate: one_of
        field: text
        values: [abc]
"""

EXAMPLES = [{"q": "abc", "$reference": "abc"}, {"q": "xyz", "$reference": "XYZ"}, {"q": "Mm", "$reference": "mm"}]
"""Upper case gets only xyz right; lower case fixes abc and Mm and breaks xyz."""


@pytest.fixture
def folder(tmp_path: Path, step_log: Path) -> Path:
    (tmp_path / "exp_steps.py").write_text(STEPS)
    versions = {"v1": workflow_text(), "lower": workflow_text(answer="lower"),
                "both": workflow_text(retrieve="retrieve_again", answer="lower"),
                "gated": workflow_text(answer="lower", gate=ONE_OF_ABC),
                "acting": workflow_text(notify=""), "acting_lower": workflow_text(answer="lower", notify=""),
                "simulated": workflow_text(answer="lower", notify="    simulate: exp_steps:notify_dry_run\n")}
    for name, text in versions.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


def baseline(cli, folder: Path, version: str = "v1") -> list[str]:
    """Run ``version`` on the examples and make dataset ``ds`` of those runs; the run ids in example order."""
    path = folder / "inputs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in EXAMPLES))
    ran = cli("run", str(folder / f"{version}.yaml"), "--input-file", str(path), "--json", "--parallel", "1")
    assert ran.exit_code in (0, 1), ran.stderr
    assert cli("dataset", "create", "ds", "--from-runs").exit_code == 0
    return [row["run_id"] for row in ran.json()]


def experiment(cli, folder: Path, version: str, name: str, *extra: str) -> dict:
    result = cli("experiment", "run", str(folder / f"{version}.yaml"), "--dataset", "ds", "--name", name, "--json",
                 *extra)
    assert result.exit_code == 0, result.stderr
    return result.json()


def by_query(doc: dict) -> dict[str, dict]:
    return {row["inputs"]["q"]: row for row in doc["per_example"]}


@pytest.mark.slow
def test_an_experiment_reuses_unchanged_steps_and_compare_puts_each_flip_on_the_changed_step(durable_cli, folder,
                                                                                              step_log):
    baseline(durable_cli, folder)
    assert sorted(calls(step_log)) == ["retrieve"] * 3 + ["upper"] * 3
    ran = experiment(durable_cli, folder, "lower", "lower")
    assert sorted(r["status"] for r in ran["runs"]) == ["succeeded"] * 3
    assert sorted(calls(step_log)[6:]) == ["lower"] * 3  # retrieve did not run again

    shown = durable_cli("experiment", "show", "lower", "--json").json()
    assert shown["summary"]["reuse"] == {"runs_reusing": 3, "step_executions_saved": 3, "model_calls_saved": 0,
                                         "tokens_saved": 0, "cost_saved": 0.0}
    assert shown["summary"]["step_executions"] == 3
    assert [r["reused_steps"] for r in shown["runs"]] == [["retrieve"]] * 3
    steps = durable_cli("show", shown["runs"][0]["run_id"], "--json").json()["steps"]
    assert [(s["step_id"], s["origin"], s["status"]) for s in steps] == [("retrieve", "reused", "succeeded"),
                                                                         ("answer", "executed", "succeeded")]
    experiment_runs = durable_cli("runs", "--kind", "experiment", "--json").json()
    assert sorted(r["run_id"] for r in experiment_runs) == sorted(r["run_id"] for r in ran["runs"])
    assert len(durable_cli("runs", "--json").json()) == 3  # the originals: experiments are not production traffic

    compared = durable_cli("experiment", "compare", "baseline", "lower", "--json")
    assert compared.exit_code == 0, compared.stderr
    doc = compared.json()
    assert (doc["a"], doc["b"], doc["dataset"], doc["examples"]) == ("baseline", "lower", "ds", 3)
    assert doc["changed_steps"] == ["answer"]
    assert doc["flips"] == {"fixed": 2, "broken": 1, "ambiguous": 0, "total": 3}
    assert doc["flips_by_step"] == [{"step_id": "answer", "fixed": 2, "broken": 1, "share": 1.0}]
    assert [row["flip"] for row in doc["per_example"]] == ["fixed", "fixed", "broken"]  # flips first, fixed first
    rows = by_query(doc)
    assert (rows["abc"]["a"]["correct"], rows["abc"]["b"]["correct"], rows["abc"]["b"]["score"]) == (False, True, 1.0)
    assert (rows["xyz"]["flip"], rows["xyz"]["changed_step"], rows["xyz"]["attribution"]) == (
        "broken", "answer", "the only changed step")
    a, b = doc["aggregates"]["a"], doc["aggregates"]["b"]
    assert (a["correct"], a["judged"], b["correct"], b["judged"]) == (1, 3, 2, 3)
    assert a["outcome_rate_ci95"] == pytest.approx([0.0615, 0.7923], abs=1e-3)  # Wilson, 1 of 3
    assert b["outcome_rate_ci95"] == pytest.approx([0.2077, 0.9385], abs=1e-3)
    assert a["trajectory_length"]["mean"] == b["trajectory_length"]["mean"] == 2.0
    assert a["statuses"] == b["statuses"] == {"succeeded": 3}

    text = durable_cli("experiment", "compare", "baseline", "lower")
    assert text.exit_code == 0 and "2 fixed, 1 broken" in text.stdout and "answer: 2 fixed, 1 broken" in text.stdout


def test_reuse_none_executes_every_step(cli, folder, step_log):
    baseline(cli, folder)
    experiment(cli, folder, "lower", "everything", "--reuse", "none")
    assert sorted(calls(step_log)[6:]) == ["lower"] * 3 + ["retrieve"] * 3
    summary = cli("experiment", "show", "everything", "--json").json()["summary"]
    assert summary["reuse"]["step_executions_saved"] == 0 and summary["step_executions"] == 6


def test_with_two_changed_steps_a_flip_goes_to_the_one_whose_output_differed(cli, folder, step_log):
    baseline(cli, folder)
    experiment(cli, folder, "both", "both")
    assert sorted(calls(step_log)[6:]) == ["lower"] * 3 + ["retrieve_again"] * 3  # retrieve changed: nothing reused
    doc = cli("experiment", "compare", "baseline", "both", "--json").json()
    assert doc["changed_steps"] == ["retrieve", "answer"]
    assert doc["flips_by_step"] == [{"step_id": "answer", "fixed": 2, "broken": 1, "share": 1.0}]
    flipped = [row for row in doc["per_example"] if row["flip"]]
    assert {(row["changed_step"], row["attribution"], tuple(row["candidates"])) for row in flipped} == {
        ("answer", "the only changed step whose output differed", ("retrieve", "answer"))}

    experiment(cli, folder, "lower", "lower")
    same = cli("experiment", "compare", "lower", "both", "--json").json()
    assert same["changed_steps"] == ["retrieve"] and same["flips"]["total"] == 0


def test_a_failing_gate_ends_an_experiment_run_paused_and_counts_as_incorrect(cli, folder):
    baseline(cli, folder)
    ran = experiment(cli, folder, "gated", "gated")
    statuses = {row["position"]: row["status"] for row in ran["runs"]}
    assert sorted(statuses.values()) == ["paused", "paused", "succeeded"]
    doc = cli("experiment", "compare", "baseline", "gated", "--json").json()
    rows = by_query(doc)
    assert (rows["Mm"]["b"]["status"], rows["Mm"]["b"]["correct"], rows["Mm"]["flip"]) == ("paused", False, None)
    assert (rows["abc"]["flip"], rows["xyz"]["flip"]) == ("fixed", "broken")
    assert doc["gates"] == [{"step_id": "answer", "a": None, "b": pytest.approx(1 / 3), "a_runs": 0, "b_runs": 3}]
    assert doc["aggregates"]["b"]["statuses"] == {"paused": 2, "succeeded": 1}


def test_side_effecting_steps_are_blocked_or_simulated_unless_rerun_is_asked_for(cli, folder, step_log):
    baseline(cli, folder, "acting")
    assert calls(step_log).count("notify") == 3
    blocked = experiment(cli, folder, "acting_lower", "blocked")
    assert {r["status"] for r in blocked["runs"]} == {"failed"}
    error = cli("show", blocked["runs"][0]["run_id"], "--json").json()["steps"][-1]["error"]
    assert "blocked by notify" in error
    simulated = experiment(cli, folder, "simulated", "simulated")
    assert {r["status"] for r in simulated["runs"]} == {"succeeded"}
    assert calls(step_log).count("notify") == 3 and calls(step_log).count("dry_run") == 3
    experiment(cli, folder, "acting_lower", "acting", "--rerun-side-effects")
    assert calls(step_log).count("notify") == 6
    refused = cli("experiment", "run", str(folder / "acting_lower.yaml"), "--dataset", "ds", "--queue",
                  "--rerun-side-effects")
    assert refused.exit_code == 2 and "--rerun-side-effects" in refused.stderr


def test_queued_experiment_runs_are_executed_by_a_worker_without_acting(cli, folder, step_log):
    baseline(cli, folder, "acting")
    queued = experiment(cli, folder, "acting_lower", "queued", "--queue")
    assert queued["status"] == "queued" and {r["status"] for r in queued["runs"]} == {"queued"}
    assert cli("worker", "--once").exit_code == 0
    summary = cli("experiment", "show", "queued", "--json").json()["summary"]
    assert summary["statuses"] == {"failed": 3}  # notify blocked in the worker too
    assert calls(step_log).count("notify") == 3 and calls(step_log).count("lower") == 3


def test_bad_experiments_are_refused_and_store_nothing(cli, folder, tmp_path, db_url):
    (tmp_path / "hand.jsonl").write_text('{"inputs": {"q": "a"}}\n{"inputs": {}}\n')
    assert cli("dataset", "add", "ds", "--file", str(tmp_path / "hand.jsonl")).exit_code == 0
    refused = cli("experiment", "run", str(folder / "v1.yaml"), "--dataset", "ds")
    assert refused.exit_code == 2 and "dataset 'ds' example 2" in refused.stderr
    unknown = cli("experiment", "run", str(folder / "v1.yaml"), "--dataset", "nope")
    assert unknown.exit_code == 2 and "no dataset 'nope'" in unknown.stderr
    bad_reuse = cli("experiment", "run", str(folder / "v1.yaml"), "--dataset", "ds", "--reuse", "some")
    assert bad_reuse.exit_code == 2 and "--reuse" in bad_reuse.stderr
    with open_store(db_url) as store:
        counts = store.count_rows()
    assert (counts["experiments"], counts["runs"]) == (0, 0)
    both = cli("experiment", "compare", "baseline", "baseline")
    assert both.exit_code == 2 and "at most one side may be baseline" in both.stderr
    missing = cli("experiment", "compare", "baseline", "nope")
    assert missing.exit_code == 2 and "no experiment 'nope'" in missing.stderr


def test_experiments_are_listed_with_their_dataset_version(cli, folder):
    baseline(cli, folder)
    experiment(cli, folder, "lower", "first")
    listed = cli("experiment", "list", "--json").json()
    assert [(e["name"], e["dataset"], e["dataset_version"], e["status"], e["summary"]["runs"]) for e in listed] == [
        ("first", "ds", 1, "finished", 3)]
    text = cli("experiment", "list")
    assert text.exit_code == 0 and "first" in text.stdout
    shown = cli("experiment", "show", "first")
    assert shown.exit_code == 0 and "reuse saved 3 step executions" in shown.stdout
