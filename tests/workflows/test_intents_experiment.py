"""The intents example's loop, as docs/experiments.md shows it, on a scripted OpenAI-compatible endpoint.

The example runs on the embedded model; here each file's ``llm:`` block points at the scripted server
instead (nothing else changes), so which answers are right, and so which outcomes flip, is decided by
the script: v1 answers ``delivery`` to every ticket, as the embedded model does; v2 (the changed
prompt) names refunds and logins correctly but calls "Where is my stuff?" ``other``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.llm.fake_openai_server import FakeOpenAI, completion

EXAMPLE = REPO / "workflows" / "intents"
TICKETS = [json.loads(line) for line in (EXAMPLE / "tickets.jsonl").read_text().splitlines()]
EMBEDDED = "  provider: local\n  model: smollm2\n"


@pytest.fixture
def example(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the example whose workflows call the scripted endpoint."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    copy = tmp_path / "intents"
    shutil.copytree(EXAMPLE, copy)
    for name in ("intents.yaml", "intents_v2.yaml", "intents_strict.yaml"):
        path = copy / name
        text = path.read_text()
        assert EMBEDDED in text, f"{name} no longer names the embedded model as this test expects"
        path.write_text(text.replace(EMBEDDED, f"  provider: openai\n  model: fake-model\n"
                                               f"  base_url: {fake_openai.base_url}\n"))
    return copy


def answer(fake: FakeOpenAI, intent: str) -> None:
    fake.respond(completion(json.dumps({"intent": intent})))


def v2_answer(ticket: str, reference: str) -> str:
    """What the scripted endpoint answers under the changed prompt."""
    if reference in ("refund", "login"):
        return reference
    return "other" if ticket.startswith("Where is my stuff") else "delivery"


def run_experiment(cli, fake: FakeOpenAI, workflow: Path, dataset: str, name: str) -> None:
    examples = cli("dataset", "show", dataset, "--json").json()["examples"]
    for example in sorted(examples, key=lambda e: e["position"]):  # --parallel 1: in example order
        answer(fake, v2_answer(example["inputs"]["ticket"], example["reference"]["intent"]))
    ran = cli("experiment", "run", str(workflow), "--dataset", dataset, "--name", name, "--parallel", "1")
    assert ran.exit_code == 0, ran.stderr


@pytest.fixture
def stored(cli, fake_openai: FakeOpenAI, example: Path) -> Path:
    """The twelve tickets run through v1, every answer ``delivery``."""
    for _ in TICKETS:
        answer(fake_openai, "delivery")
    ran = cli("run", str(example / "intents.yaml"), "--input-file", str(example / "tickets.jsonl"),
              "--parallel", "1")
    assert ran.exit_code == 0, ran.stderr
    return example


@pytest.mark.slow
def test_the_changed_prompt_fixes_refunds_and_logins_and_compare_names_classify(cli, fake_openai, stored):
    created = cli("dataset", "create", "misses", "--from-runs", "--workflow", "intents", "--outcome", "incorrect",
                  "--json")
    assert created.exit_code == 0, created.stderr
    assert created.json()["size"] == sum(t["$reference"]["intent"] != "delivery" for t in TICKETS) == 8
    calls_before = len(fake_openai.requests)
    run_experiment(cli, fake_openai, stored / "intents_v2.yaml", "misses", "prompt-v2")
    assert len(fake_openai.requests) - calls_before == 8  # classify only: clean is reused
    shown = cli("experiment", "show", "prompt-v2", "--json").json()
    assert shown["summary"]["reuse"]["step_executions_saved"] == 8

    compared = cli("experiment", "compare", "baseline", "prompt-v2", "--json").json()
    assert compared["changed_steps"] == ["classify"]
    assert compared["flips"] == {"fixed": 6, "broken": 0, "ambiguous": 0, "total": 6}
    assert compared["flips_by_step"] == [{"step_id": "classify", "fixed": 6, "broken": 0, "share": 1.0}]
    fixed = [row for row in compared["per_example"] if row["flip"] == "fixed"]
    assert {row["inputs"]["ticket"] for row in fixed} == {
        t["ticket"] for t in TICKETS if t["$reference"]["intent"] in ("refund", "login")}
    assert {(row["changed_step"], row["attribution"]) for row in fixed} == {("classify", "the only changed step")}

    table = cli("experiment", "compare", "baseline", "prompt-v2")
    assert "flips: 6 fixed, 0 broken" in table.stdout
    assert "classify: 6 fixed, 0 broken (100% of flips)" in table.stdout


def test_on_the_runs_that_were_right_the_changed_prompt_breaks_one(cli, fake_openai, stored):
    created = cli("dataset", "create", "kept", "--from-runs", "--workflow", "intents", "--outcome", "correct")
    assert created.exit_code == 0, created.stderr
    run_experiment(cli, fake_openai, stored / "intents_v2.yaml", "kept", "prompt-v2-kept")
    compared = cli("experiment", "compare", "baseline", "prompt-v2-kept", "--json").json()
    assert compared["flips"] == {"fixed": 0, "broken": 1, "ambiguous": 0, "total": 1}
    broken = next(row for row in compared["per_example"] if row["flip"] == "broken")
    assert broken["inputs"]["ticket"].startswith("Where is my stuff")
    assert broken["changed_step"] == "classify"


def test_backtesting_the_blocking_cue_word_gate_catches_every_miss_with_one_false_alarm(cli, fake_openai, stored):
    calls_before = len(fake_openai.requests)
    result = cli("gates", "backtest", str(stored / "intents_strict.yaml"), "--json")
    assert result.exit_code == 0, result.stderr
    assert len(fake_openai.requests) == calls_before  # no step executed, no model called
    gate = next(g for g in result.json()["gates"] if (g["step_id"], g["gate"]) == ("classify", "intents:cue_words"))
    assert (gate["evaluated"], gate["would_pause"], gate["failures"], gate["caught"], gate["false_alarms"]) == (
        12, 9, 8, 8, 1)
    assert (gate["precision"]["hits"], gate["precision"]["of"]) == (8, 9)
    assert (gate["recall"]["hits"], gate["recall"]["of"]) == (8, 8)
    assert gate["severity"] == "block" and gate["changed"] == []  # v1 failed the same runs, as a warning
