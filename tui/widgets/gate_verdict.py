"""One gate result: pass/fail mark, gate name, score and the gate's reason."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from orchestrator.spec.records import GateView
from tui.format import format_score


class GateVerdict(Static):
    """``✗ range  0.10  field 'score' = 0.1 is below min 0.5``; the class says pass, fail or warn."""

    def __init__(self, gate: GateView, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.set_class(gate.passed, "-passed")
        self.set_class(not gate.passed and gate.severity == "block", "-failed")
        self.set_class(not gate.passed and gate.severity == "warn", "-warn")

    def render(self) -> Text:
        g = self.gate
        text = Text()
        text.append("✓ " if g.passed else "✗ ", style="bold")
        text.append(g.gate, style="bold")
        if g.severity == "warn":
            text.append(" (warn)")
        verifies = g.details.get("verifies") if isinstance(g.details, dict) else None
        if g.gate == "critic" and verifies:
            text.append(f" of {', '.join(map(str, verifies))}", style="not bold")
        score = format_score(g.score)
        if score:
            text.append(f"  score {score}")
        text.append("\n")
        text.append(g.reason or "(no reason given)", style="not bold")
        return text
