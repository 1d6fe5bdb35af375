"""The selected step: gate results, output, inputs, injected context, upstream, attempts, reviews."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Static

from tui.format import STATUS_STYLE, format_age, format_duration, step_status_words
from tui.messages import JumpToStep
from tui.queries import StepItem
from tui.widgets.gate_verdict import GateVerdict
from tui.widgets.json_view import JsonView

SECTIONS = (
    ("gates", "Gates"),
    ("output", "Output"),
    ("inputs", "Inputs"),
    ("injected", "Context injected (what its consumers need)"),
    ("upstream", "Upstream steps it consumed"),
    ("attempts", "Attempts"),
    ("reviews", "Reviews"),
)


class JumpButton(Button):
    """A one-line button that asks the screen to select an upstream step."""

    def __init__(self, step_id: str) -> None:
        super().__init__(f"↑ {step_id}", compact=True, classes="jump", tooltip=f"Show step {step_id}")
        self.step_id = step_id


class StepDetail(VerticalScroll):
    """Shows one :class:`~tui.queries.StepItem`; empty sections are hidden."""

    def compose(self) -> ComposeResult:
        yield Static(id="step-title")
        for key, title in SECTIONS:
            with Vertical(id=f"section-{key}", classes="section"):
                yield Static(title, classes="section-title")
                if key in ("output", "inputs"):
                    yield JsonView(id=f"{key}-json")
                elif key in ("gates", "upstream"):
                    yield Vertical(id=f"{key}-list")
                else:
                    yield Static(id=f"{key}-text")

    _shown: tuple[str, str, bool, int | None, int, int] | None = None

    async def show(self, item: StepItem | None, *, now: float) -> None:
        """Show ``item``; a refresh that changes nothing about it keeps the pane (and its scroll) as is."""
        key = None if item is None else (
            item.step_id, item.status, item.waiting, item.record.id if item.record else None,
            len(item.attempts), len(item.reviews))
        if key is not None and key == self._shown:
            return
        same_step = key is not None and self._shown is not None and key[0] == self._shown[0]
        self._shown = key
        title = self.query_one("#step-title", Static)
        if item is None:
            title.update("No step selected.")
            for section, _ in SECTIONS:
                self.query_one(f"#section-{section}").add_class("-empty")
            return
        title.update(self._title(item))
        title.set_class(item.waiting, "-waiting")

        gates = item.gate_record.gates if item.gate_record else []
        gate_list = self.query_one("#gates-list", Vertical)
        await gate_list.remove_children()
        await gate_list.mount_all([GateVerdict(g) for g in gates])
        gate_title = "Gates"
        if item.gate_record is not None and item.gate_record is not item.record:
            gate_title += f" (attempt {item.gate_record.attempt}, before the review)"
        self.query_one("#section-gates .section-title", Static).update(gate_title)
        self._section("gates", bool(gates))

        self.query_one("#output-json", JsonView).show(item.output)
        self._section("output", item.record is not None and item.record.output is not None)
        self.query_one("#inputs-json", JsonView).show(item.inputs)
        self._section("inputs", bool(item.inputs))

        injected = item.record.injected if item.record else []
        self.query_one("#injected-text", Static).update(self._injected(injected))
        self._section("injected", bool(injected))

        upstream = self.query_one("#upstream-list", Vertical)
        await upstream.remove_children()
        await upstream.mount_all([JumpButton(sid) for sid in item.upstream])
        self._section("upstream", bool(item.upstream))

        self.query_one("#attempts-text", Static).update(self._attempts(item))
        self._section("attempts", bool(item.attempts))
        self.query_one("#reviews-text", Static).update(self._reviews(item, now))
        self._section("reviews", bool(item.reviews))
        if not same_step:
            self.scroll_home(animate=False)

    def _section(self, key: str, visible: bool) -> None:
        self.query_one(f"#section-{key}").set_class(not visible, "-empty")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if isinstance(event.button, JumpButton):
            event.stop()
            self.post_message(JumpToStep(event.button.step_id))

    @staticmethod
    def _title(item: StepItem) -> Text:
        text = Text()
        text.append(item.step_id, style="bold")
        text.append(f"  {item.step_type} · agent {item.agent}")
        if item.attempt:
            text.append(f" · attempt {item.attempt}")
        if item.duration is not None:
            text.append(f" · {format_duration(item.duration)}")
        if item.record is not None and item.record.origin != "executed":
            text.append(f" · {item.record.origin} by a reviewer")
        text.append("\n")
        decision = item.reviews[-1].decision if item.reviews else None
        text.append(step_status_words(item.status, item.waiting, decision), style=STATUS_STYLE.get(item.status, ""))
        if item.record is not None and item.record.error and item.status != "gate_failed":
            text.append(f": {item.record.error}")
        return text

    @staticmethod
    def _injected(injected: list[dict[str, Any]]) -> Text:
        text = Text()
        for i, need in enumerate(injected):
            if i:
                text.append("\n")
            text.append(f"→ {need.get('step_id')}", style="bold")
            text.append(f" ({need.get('agent')})")
            if need.get("needs"):
                text.append(f" needs: {need['needs']}")
            if need.get("description"):
                text.append(f" makes: {need['description']}")
        return text

    @staticmethod
    def _attempts(item: StepItem) -> Text:
        text = Text()
        for i, rec in enumerate(item.attempts):
            if i:
                text.append("\n")
            text.append(f"#{rec.attempt} ")
            text.append(rec.status, style=STATUS_STYLE.get(rec.status, ""))
            text.append(f"  {rec.origin}  {format_duration(rec.duration)}")
            if rec.error:
                text.append(f"\n   {rec.error}", style="dim")
        return text

    @staticmethod
    def _reviews(item: StepItem, now: float) -> Text:
        text = Text()
        attempt_of = {rec.id: rec.attempt for rec in item.attempts}
        for i, review in enumerate(item.reviews):
            if i:
                text.append("\n")
            text.append(review.decision, style="bold")
            if review.record_id in attempt_of:
                text.append(f" of attempt {attempt_of[review.record_id]}")
            text.append(f" by {review.reviewer}, {format_age(now - review.created_at)} ago")
            if review.forced:
                text.append(" (forced past failing gates)")
            if review.comment:
                text.append(f"\n   “{review.comment}”", style="italic")
        return text
