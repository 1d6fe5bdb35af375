"""`show` from 80 columns up: one block per step on a narrow terminal, nothing cut when piped, a table when wide."""

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


def render(width: int, *, terminal: bool) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=terminal, color_system=None, record=True,
                      soft_wrap=True)
    print_steps(DOC, console)
    return console.export_text()


def test_a_narrow_terminal_gets_one_block_per_step_cut_to_its_width():
    text = render(80, terminal=True)
    assert text == SNAPSHOT.read_text()
    assert max(len(line) for line in text.splitlines()) <= 80


def test_piped_output_is_never_cut():
    text = render(80, terminal=False)
    assert f"  output: {json.dumps(LONG_OUTPUT)}" in text.splitlines()
    assert "approved despite: max_words: 41 words | [approved] \"a short summary\"" in text
    assert "  error: ConnectionError: the mail server refused the connection" in text


def test_a_wide_terminal_keeps_the_table():
    text = render(140, terminal=True)
    assert "error / output" in text and "retrieve_candidates" in text
    assert "  output: " not in text
