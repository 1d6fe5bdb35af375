"""How run and step states look in the review app: icons, colours, ages and durations.

Plain functions over plain values, kept out of the widgets so every screen shows a state the
same way (and the CLI's words: ``paused``, ``gate_failed``, ...).
"""

from __future__ import annotations

STEP_ICON = {
    "succeeded": "✓",
    "failed": "✗",
    "gate_failed": "!",
    "running": "»",
    "pending": "·",
    "skipped": "-",
}
"""Single-cell glyphs only: emoji-width symbols misalign columns in tmux and older terminals."""

STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "rejected": "red",
    "gate_failed": "bold yellow",
    "paused": "bold yellow",
    "running": "cyan",
    "queued": "dim",
    "pending": "dim",
    "skipped": "dim",
    "interrupted": "magenta",
}

STEP_STATUS_WORDS = {
    "gate_failed": "waiting for review",
    "pending": "not run yet",
}


DECIDED = {"reject": "gate failed; rejected by a reviewer", "retry": "gate failed; sent back for a retry",
           "approve": "gate failed; approved by a reviewer", "edit": "gate failed; output edited by a reviewer"}


def step_status_words(status: str, waiting: bool, decision: str | None = None) -> str:
    """``gate_failed`` reads as "waiting for review" only while no decision has been made."""
    if status == "gate_failed" and not waiting:
        return DECIDED.get(decision or "", "gate failed")
    return STEP_STATUS_WORDS.get(status, status)


def format_age(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``: the largest whole unit, as ``orchestrator runs`` prints it."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def format_duration(seconds: float | None) -> str:
    """``0.01s``, ``1.2s``, ``2m03s``; empty for a step that has not run."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def format_score(score: float | None) -> str:
    return "" if score is None else f"{score:.2f}"


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
