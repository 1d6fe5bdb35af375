"""A JSON value, pretty-printed and highlighted."""

from __future__ import annotations

import json
from typing import Any

from rich.json import JSON
from rich.text import Text
from textual.widgets import Static

MAX_CHARS = 40_000
"""Beyond this a step's output is shown cut short: rendering megabytes would stall the screen."""


class JsonView(Static):
    """Shows ``value`` as indented, highlighted JSON (``null`` for None)."""

    def show(self, value: Any) -> None:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        if len(text) > MAX_CHARS:
            self.update(Text(text[:MAX_CHARS] + f"\n… ({len(text) - MAX_CHARS} more characters; "
                             "see `orchestrator show RUN --json`)"))
            return
        rendered = JSON(text).text
        rendered.no_wrap = False  # rich crops JSON lines; a narrow detail pane must fold them instead
        rendered.overflow = "fold"
        self.update(rendered)
