"""A horizontal bar for a share between 0 and 1, drawn to an eighth of a cell."""

from __future__ import annotations

from typing import Any

from textual.reactive import reactive
from textual.widget import Widget

EIGHTHS = " ▏▎▍▌▋▊▉"


def bar_text(share: float, width: int) -> str:
    """``share`` of ``width`` cells in block characters, padded with spaces to ``width``."""
    eighths = round(max(0.0, min(1.0, share)) * max(0, width) * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return text.ljust(max(0, width))


class ShareBar(Widget):
    """Fills ``share`` of its width; the bar takes the widget's ``color``, the track its ``background``."""

    DEFAULT_CSS = """
    ShareBar {
        height: 1;
        width: 1fr;
        min-width: 4;
        color: $accent;
        background: $boost;
    }
    """

    share: reactive[float] = reactive(0.0)

    def __init__(self, share: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.share = share

    def render(self) -> str:
        return bar_text(self.share, self.size.width)
