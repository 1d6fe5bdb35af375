"""`show` from 80 columns up: one block per step on a narrow console, a table when wide; every output, error,
prompt and answer cut to one line of the console's width (piped too), or whole with ``--full``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator.cli.inspecting import print_steps

SNAPSHOT = Path(__file__).parent / "snapshots" / "show_narrow_80.txt"
LONG_OUTPUT = {"vendors": [{"id": f"V-00{i}", "name": f"Vendor number {i}", "unit_price": 3.4 + i} for i in range(6)]}


def step(step_id: str, status: str, *, output: Any = None, error: str | None = None, origin: str = "executed",
         gates: list[tuple[str, bool]] = (), **extra: Any) -> dict[str, Any]:
    return {"step_id": step_id, "agent": f"{step_id}-agent", "status": status, "attempt": 1, "duration": 0.25,
            "origin": origin, "output": output, "error": error,
            "gates": [{"gate": g, "passed": ok, "reason": "ok" if ok else "too low", "details": {}} for g, ok in gates],
            **extra}


DOC = {"steps": [
    step("retrieve_candidates", "succeeded", output=LONG_OUTPUT, gates=[("schema", True), ("min_items", True)]),
    step("score", "gate_failed", output={"score": 0.2}, gates=[("range", False)]),
    step("summarize", "succeeded", output="a short summary", origin="approved",
         override={"phrase": "approved despite"}, overridden_gates=[{"gate": "max_words", "reason": "41 words"}]),
    step("notify", "failed", error="ConnectionError: the mail server refused the connection"),
]}


def render(width: int, *, terminal: bool, full: bool = False, doc: dict[str, Any] = DOC) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=terminal, color_system=None, record=True,
                      soft_wrap=True)
    print_steps(doc, console, full=full)
    return console.export_text()


def test_a_narrow_terminal_gets_one_block_per_step_cut_to_its_width():
    text = render(80, terminal=True)
    assert text == SNAPSHOT.read_text()
    assert max(len(line) for line in text.splitlines()) <= 80


def test_piped_output_is_cut_to_the_width_too():
    text = render(80, terminal=False)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert json.dumps(LONG_OUTPUT) not in text
    assert "  output: " + json.dumps(LONG_OUTPUT)[:60] in text


def test_full_prints_every_value_whole():
    text = render(80, terminal=False, full=True)
    assert f"  output: {json.dumps(LONG_OUTPUT)}" in text.splitlines()
    assert "approved despite: max_words: 41 words | [approved] \"a short summary\"" in text
    assert "  error: ConnectionError: the mail server refused the connection" in text


def test_a_wide_terminal_keeps_the_table():
    text = render(140, terminal=True)
    assert "error / output" in text and "retrieve_candidates" in text
    assert "  output: " not in text


PROMPT = "Vendors: " + json.dumps(LONG_OUTPUT["vendors"])
LLM_DOC = {"steps": [step("recommend", "succeeded", output={"vendor": "V-000"}, llm={
    "messages": [{"role": "system", "content": "You pick the best vendor."}, {"role": "user", "content": PROMPT}],
    "response": '{"vendor": "V-000", "why": "the cheapest"}\nwith a second line'})]}


def test_an_llm_steps_prompt_and_answer_are_shown_cut_to_the_width():
    for width in (80, 140):
        lines = render(width, terminal=True, doc=LLM_DOC).splitlines()
        prompt = next(line for line in lines if "prompt: " in line)
        answer = next(line for line in lines if "answer: " in line)
        assert prompt.split("prompt: ")[1].startswith("Vendors: [{") and len(prompt) <= width
        assert answer.split("answer: ")[1].startswith('{"vendor": "V-000", "why": "the cheapest"} ⏎ with')
        assert max(len(line) for line in lines) <= width


def test_full_shows_the_whole_prompt_and_answer():
    text = render(140, terminal=True, doc=LLM_DOC, full=True)
    assert f"  prompt: {PROMPT}" in text.splitlines()
    assert '  answer: {"vendor": "V-000", "why": "the cheapest"} ⏎ with a second line' in text.splitlines()


def test_show_full_on_the_command_line_prints_the_whole_output(cli):
    from tests.conftest import FIXTURES

    run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
    src = json.dumps(cli("show", run_id, "--json").json()["steps"][0]["output"])
    assert src not in cli("show", run_id).stdout
    assert src in cli("show", run_id, "--full").stdout
