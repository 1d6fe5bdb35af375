"""One line at the bottom of every screen: runs continuing in the background and the last news,
or, when nothing is happening, a hint about the screen."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static


class LiveStatus(Static):
    """Mirrors the app's ``activity`` text; the class ``-busy`` is set while a run is continuing."""

    def __init__(self, hint: str = "", **kwargs: Any) -> None:
        super().__init__(hint, **kwargs)
        self.hint = hint

    def on_mount(self) -> None:
        self.watch(self.app, "activity", self._show)

    def _show(self, activity: str) -> None:
        self.update(activity or self.hint)
        self.set_class(bool(getattr(self.app, "continuing", None)), "-busy")
