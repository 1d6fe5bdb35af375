"""Under the run screen's steps: the text the run's LLM steps are writing, while this app continues the run."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.live_text import LiveAnswer

SHOWN_CHARS = 400
"""Of a long answer, its last characters: the panel follows the writing, the step's record keeps it whole."""


class LiveAnswerPanel(Static):
    """``unit: text so far`` for each streaming unit (``unit (succeeded): ...`` once its step ended); hidden while
    there is nothing to show. The class ``-shown`` is set while it shows something."""

    def show(self, answers: list[LiveAnswer]) -> None:
        self.set_class(bool(answers), "-shown")
        text = Text()
        for i, answer in enumerate(answers):
            if i:
                text.append("\n")
            label = answer.unit if answer.ended is None else f"{answer.unit} ({answer.ended})"
            text.append(f"{label}: ", style="bold")
            body = answer.text if len(answer.text) <= SHOWN_CHARS else "…" + answer.text[-SHOWN_CHARS:]
            text.append(body)
            if answer.ended is None:
                text.append("▌", style="dim")
        self.update(text)

