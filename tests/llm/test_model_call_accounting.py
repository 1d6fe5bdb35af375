"""Every model call is counted: the totals a run shows equal the calls the endpoint received.

The workflow (tests/llm/workflows/counted.yaml) makes model calls in every way a run can: an LLM
step, its judge gate, a Python step calling ``ctx.llm`` twice (sync), an LLM critic, an async step
calling ``ctx.llm`` with a judge gate that fails, and the judge's check of a reviewer's edit.
Each scripted answer has its own token counts, so a call left out or counted twice shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.core.errors import EditRefusedError
from orchestrator.store import open_store
from tests.llm.fake_openai_server import completion
from tui import actions
from tui.queries import load_run_detail

WORKFLOWS = Path(__file__).parent / "workflows"


def verdict(score: float, reason: str) -> str:
    return json.dumps({"score": score, "reason": reason})


SCRIPT = [  # (answer, input tokens, output tokens) in the order the chain asks
    ("Sorry about order 42, we will fix it.", 101, 11),                               # draft (step)
    (verdict(0.9, "polite"), 102, 12),                                                # draft's judge
    ("A reply about order 42.", 103, 13),                                             # notes: ctx.llm (step)
    ("order 42, refund", 104, 14),                                                    # notes: ctx.llm again
    (json.dumps({"passed": True, "score": 0.8, "reason": "consistent"}), 105, 15),    # check (critic)
    ("We are sorry; it is being fixed.", 106, 16),                                    # final: ctx.llm (step)
    (verdict(0.1, "no order number"), 107, 17),                                       # final's judge: fails
]
EDIT_CHECK = (verdict(0.95, "names order 42"), 108, 18)                               # the edit's validation


def test_usage_totals_equal_the_calls_the_endpoint_received(cli, db_url, fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    for text, tokens_in, tokens_out in SCRIPT:
        fake_openai.respond(completion(text, prompt_tokens=tokens_in, completion_tokens=tokens_out))
    paused = cli("run", str(WORKFLOWS / "counted.yaml"), "--input", "ticket=order 42 is broken", "--json")
    assert paused.exit_code == 3, paused.stderr
    run_id = paused.json()["run_id"]
    assert len(fake_openai.requests) == 7
    # ctx.llm sent the step's text verbatim (braces are not a template) with its system message
    assert fake_openai.requests[3]["messages"] == [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "List the {facts}."}]

    text, tokens_in, tokens_out = EDIT_CHECK
    fake_openai.respond(completion(text, prompt_tokens=tokens_in, completion_tokens=tokens_out))
    edited = tmp_path / "final.json"
    edited.write_text(json.dumps("We are sorry about order 42; it is being fixed."))
    assert cli("edit", run_id, "--output", str(edited), "--comment", "named the order").exit_code == 0
    assert len(fake_openai.requests) == 8

    doc = cli("show", run_id, "--json").json()
    assert doc["status"] == "succeeded"
    script = [*SCRIPT, EDIT_CHECK]
    totals = doc["llm"]
    assert (totals["calls"], totals["input_tokens"], totals["output_tokens"]) == (
        len(fake_openai.requests), sum(s[1] for s in script), sum(s[2] for s in script))
    assert totals["cost"] > 0
    split = {purpose: (u["calls"], u["input_tokens"]) for purpose, u in totals["by_purpose"].items()}
    assert split == {"step": (4, 101 + 103 + 104 + 106), "judge": (2, 102 + 107), "critic": (1, 105),
                     "validation": (1, 108)}
    owners = [(c["purpose"], c["step_id"], c["gate"], c["usage"]["input_tokens"]) for c in doc["model_calls"]]
    assert owners == [("step", "draft", None, 101), ("judge", "draft", "llm_judge", 102),
                      ("step", "notes", None, 103), ("step", "notes", None, 104), ("critic", "check", None, 105),
                      ("step", "final", None, 106), ("judge", "final", "llm_judge", 107),
                      ("validation", "final", "llm_judge", 108)]
    for call in doc["model_calls"]:
        assert call["started_at"] <= call["ended_at"] and call["latency"] >= 0

    listed = {r["run_id"]: r for r in cli("runs", "--json").json()}
    assert listed[run_id]["llm"]["calls"] == 8
    assert listed[run_id]["llm"]["input_tokens"] == totals["input_tokens"]

    stats = cli("stats", "--workflow", "llm-counted", "--json").json()
    assert {p: u["calls"] for p, u in stats["model_usage"].items()} == {"critic": 1, "judge": 2, "step": 4,
                                                                         "validation": 1}
    assert sum(p["calls"] for p in stats["model_trend"]) == 8
    steps = {s["step_id"]: s for s in stats["steps"]}
    assert (steps["notes"]["model_calls"], steps["notes"]["input_tokens"]) == (2, 103 + 104)
    assert (steps["final"]["model_calls"], steps["final"]["input_tokens"]) == (3, 106 + 107 + 108)
    spend = {(g["step_id"], g["gate"], g["purpose"]): (g["calls"], g["input_tokens"], g["output_tokens"])
             for g in stats["judge_spend"]}
    assert spend == {("draft", "llm_judge", "judge"): (1, 102, 12), ("final", "llm_judge", "judge"): (1, 107, 17),
                     ("final", "llm_judge", "validation"): (1, 108, 18)}
    text_stats = cli("stats", "--workflow", "llm-counted")
    assert "judge spend: final / llm_judge (judge): 1 call, 107/17 tokens" in text_stats.stdout
    assert "validation 1 call, 108/18 tokens" in text_stats.stdout
    shown = cli("show", run_id).stdout
    assert "model calls: 8," in shown and "judge: 2 calls, 209/29 tokens" in shown
    with open_store(db_url) as store:  # the review screen's summary reads the same totals
        usage = load_run_detail(store, run_id).model_usage
    assert usage is not None and usage["calls"] == 8 and usage["by_purpose"]["validation"]["calls"] == 1


def paused_at_final(cli, fake_openai, monkeypatch) -> str:
    """The counted workflow run to its pause at ``final`` (its judge refused it), on the scripted endpoint."""
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    for text, tokens_in, tokens_out in SCRIPT:
        fake_openai.respond(completion(text, prompt_tokens=tokens_in, completion_tokens=tokens_out))
    res = cli("run", str(WORKFLOWS / "counted.yaml"), "--input", "ticket=order 42 is broken", "--json")
    assert res.exit_code == 3, res.stderr
    return res.json()["run_id"]


def test_an_edit_the_judge_refuses_then_forced_in_the_review_app_is_judged_once(cli, db_url, fake_openai,
                                                                                 monkeypatch):
    """The review app asks before storing an edit its gates refuse; storing it after the confirmation keeps the
    verdicts that refused it, so the judge is asked (and paid) once, and that one call is counted once."""
    run_id = paused_at_final(cli, fake_openai, monkeypatch)
    fake_openai.respond(completion(verdict(0.2, "still no order number"), prompt_tokens=108, completion_tokens=18))
    output = "We are sorry; it is being fixed."
    with open_store(db_url) as store:
        with pytest.raises(EditRefusedError) as refused:
            actions.decide(store, run_id, "edit", output=output, reviewer="ann")
        assert len(fake_openai.requests) == 8
        decision = actions.decide(store, run_id, "edit", output=output, reviewer="ann", force=True,
                                  checked=refused.value.checked)
        assert decision.forced
    assert len(fake_openai.requests) == 8
    doc = cli("show", run_id, "--json").json()
    assert doc["llm"]["by_purpose"]["validation"]["calls"] == 1
    final = [s for s in doc["steps"] if s["step_id"] == "final"][-1]
    assert final["origin"] == "edited" and [(g["gate"], g["passed"]) for g in final["gates"]] == [("llm_judge", False)]


def test_verdicts_on_another_output_are_not_reused_by_a_forced_edit(cli, db_url, fake_openai, monkeypatch):
    run_id = paused_at_final(cli, fake_openai, monkeypatch)
    fake_openai.respond(completion(verdict(0.2, "no order number"), prompt_tokens=108, completion_tokens=18))
    fake_openai.respond(completion(verdict(0.9, "names order 42"), prompt_tokens=109, completion_tokens=19))
    with open_store(db_url) as store:
        with pytest.raises(EditRefusedError) as refused:
            actions.decide(store, run_id, "edit", output="Sorry.", reviewer="ann")
        decision = actions.decide(store, run_id, "edit", output="Sorry about order 42.", reviewer="ann", force=True,
                                  checked=refused.value.checked)
    assert len(fake_openai.requests) == 9 and not decision.forced
