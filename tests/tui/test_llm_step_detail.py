"""The run screen's step detail shows an LLM step's model call: model, tokens, cost, prompt, answer, tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Static

from orchestrator.bind.loader import load_workflow
from orchestrator.store import NewRun, NewStepRecord, Store
from tests.tui.seed import EPOCH
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.step_detail import INJECTED_STYLE, StepDetail, format_cost, llm_prompt
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (100, 40)
TRIAGE = Path(__file__).parents[1] / "llm" / "workflows" / "triage.yaml"

RENDERED = "Ticket:\nI was charged twice for order 42\nAnswer with the category."
NEEDS = "## What the next steps need\n- step 'reply' (writer): needs: the ticket's category"
PROMPT = f"{RENDERED}\n\n{NEEDS}\n"

CLASSIFY_LLM: dict[str, Any] = {
    "provider": "openai", "model": "gpt-4o-mini",
    "messages": [{"role": "system", "content": "You route support tickets."}, {"role": "user", "content": PROMPT}],
    "response": '{"category": "billing", "confidence": 0.9}',
    "usage": {"input_tokens": 40, "output_tokens": 9}, "latency": 0.42, "cost": 0.0000114,
    "finish_reason": "stop",
    "turns": [{"kind": "model", "response": '{"category": "billing", "confidence": 0.9}', "finish_reason": "stop",
               "input_tokens": 40, "output_tokens": 9, "latency": 0.42, "tool_calls": []}],
    "validation_errors": [], "injected_spans": [[len(RENDERED) + 2, len(RENDERED) + 2 + len(NEEDS)]],
    "cached": False, "calls": 1,
}

REPLY_LLM: dict[str, Any] = {
    "provider": "openai", "model": "local-llama",
    "messages": [{"role": "user", "content": "Write a one-line reply to a billing ticket: charged twice"}],
    "response": "We refunded the duplicate charge.",
    "usage": {"input_tokens": 71, "output_tokens": 19}, "latency": 1.5, "cost": None, "finish_reason": "stop",
    "turns": [
        {"kind": "model", "response": "", "finish_reason": "tool_calls", "input_tokens": 11, "output_tokens": 7,
         "latency": 0.5, "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": '{"order_id": "42"}'}]},
        {"kind": "tool", "name": "lookup_order", "arguments": {"order_id": "42"},
         "result": '{"order_id": "42", "status": "shipped"}', "error": None, "duration": 0.01},
        {"kind": "tool", "name": "refund", "arguments": {"order_id": "42"}, "result": None,
         "error": "PermissionError: refunds need a human", "duration": 0.01},
        {"kind": "model", "response": "We refunded the duplicate charge.", "finish_reason": "stop",
         "input_tokens": 60, "output_tokens": 12, "latency": 1.0, "tool_calls": []},
    ],
    "validation_errors": [], "injected_spans": [], "cached": False, "calls": 2,
}


def seed_llm_run(store: Store) -> str:
    """A finished run of the triage workflow whose two LLM steps carry model-call records."""
    bound = load_workflow(TRIAGE)
    workflow_id = store.register_workflow(bound.name, str(bound.spec.version), dict(bound.definition),
                                          bound.source, bound.content_hash)
    run_id = store.create_run(NewRun(workflow_id, bound.name, {"ticket": "I was charged twice for order 42"},
                                     status="succeeded"))
    for step_id, agent, output, llm in (
            ("classify", "classifier", {"category": "billing", "confidence": 0.9}, CLASSIFY_LLM),
            ("reply", "writer", "We refunded the duplicate charge. -- support (billing)", REPLY_LLM)):
        store.insert_step_record(NewStepRecord(
            run_id=run_id, workflow_id=workflow_id, step_id=step_id, step_type="llm", agent=agent, attempt=1,
            status="succeeded", started_at=EPOCH, ended_at=EPOCH + 1, output=json.dumps(output),
            llm=json.dumps(llm)))
    return run_id


def rendered(screen: RunDetailScreen, selector: str) -> str:
    return str(screen.query_one(StepDetail).query_one(selector, Static).render())


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
    await pilot.pause()
    return screen


async def test_an_llm_step_shows_its_model_tokens_cost_and_prompt(store: Store) -> None:
    run_id = seed_llm_run(store)
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        assert screen.query_one(StepList).selected_step == "classify"
        await wait_for(pilot, lambda: "gpt-4o-mini" in rendered(screen, "#llm-summary"))
        assert not screen.query_one("#section-llm").has_class("-empty")
        summary = rendered(screen, "#llm-summary")
        assert "openai · gpt-4o-mini" in summary
        assert "tokens 40 in / 9 out" in summary
        assert "$0.000011" in summary and "finished: stop" in summary
        prompt = rendered(screen, "#llm-prompt")
        assert "I was charged twice for order 42" in prompt and "What the next steps need" in prompt
        assert '"category": "billing"' in rendered(screen, "#llm-response")
        assert screen.query_one("#llm-tools").has_class("-empty")  # no tool was called
        await settle(pilot)


async def test_tool_calls_and_an_unknown_cost(store: Store) -> None:
    run_id = seed_llm_run(store)
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        await pilot.press("down")
        assert screen.query_one(StepList).selected_step == "reply"
        await wait_for(pilot, lambda: "local-llama" in rendered(screen, "#llm-summary"))
        summary = rendered(screen, "#llm-summary")
        assert "tokens 71 in / 19 out" in summary and "unknown cost" in summary
        tools = rendered(screen, "#llm-tools")
        assert 'lookup_order({"order_id": "42"})' in tools and '"status": "shipped"' in tools
        assert "refund(" in tools and "PermissionError: refunds need a human" in tools
        assert not screen.query_one("#llm-tools").has_class("-empty")
        await settle(pilot)


async def test_a_step_without_a_model_call_hides_the_section(store: Store) -> None:
    run_id = seed_llm_run(store)
    store.insert_step_record(NewStepRecord(run_id=run_id, workflow_id=store.get_run(run_id).workflow_id,
                                           step_id="classify", step_type="llm", agent="classifier", attempt=2,
                                           status="succeeded", started_at=EPOCH + 2, ended_at=EPOCH + 2,
                                           output=json.dumps({"category": "bug"}), origin="edited"))
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        assert screen.query_one("#section-llm").has_class("-empty")
        await settle(pilot)


def test_the_injected_spans_of_the_prompt_are_highlighted() -> None:
    text = llm_prompt(CLASSIFY_LLM)
    start = text.plain.index(NEEDS)
    styled = [(text.plain[s.start:s.end], str(s.style)) for s in text.spans if str(s.style) == INJECTED_STYLE]
    assert styled == [(NEEDS, INJECTED_STYLE)]
    assert start > text.plain.index(RENDERED)
    # spans out of range are clamped, not an error
    assert isinstance(llm_prompt({**CLASSIFY_LLM, "injected_spans": [[5, 10_000], ["x", 1]]}), Text)


def test_costs_read_as_dollars() -> None:
    assert format_cost(0.0000114) == "$0.000011"
    assert format_cost(1.5) == "$1.5"
    assert format_cost(0) == "$0"
    assert format_cost(1e-9) == "< $0.000001"
