"""The selected step: gate results, its model call (LLM steps), output, inputs, injected context,
upstream, attempts, reviews."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Static

from orchestrator.bind.approvals import is_approval, waiting_words
from orchestrator.spec.records import StepRecordView, shown_status, unit_name
from tui.format import STATUS_STYLE, format_age, format_duration, step_status_words
from tui.messages import JumpToStep
from tui.queries import StepItem
from tui.widgets.gate_verdict import GateVerdict
from tui.widgets.json_view import JsonView
from tui.widgets.step_marks import step_mark

SECTIONS = (
    ("gates", "Gates"),
    ("traceback", "Traceback"),
    ("llm", "Model call"),
    ("output", "Output"),
    ("inputs", "Inputs"),
    ("injected", "Context injected (what its consumers need)"),
    ("upstream", "Upstream steps it consumed"),
    ("attempts", "Attempts"),
    ("reviews", "Reviews"),
)

LLM_PARTS = ("summary", "prompt", "response", "tools")
"""The model-call section's parts, each a Static ``#llm-PART``."""

INJECTED_STYLE = "bold black on #d7af5f"
"""The prompt text the orchestrator added (what the next steps need, gate feedback): set apart
from what the template rendered."""


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
                elif key == "llm":
                    for part in LLM_PARTS:
                        yield Static(id=f"llm-{part}", classes="llm-part")
                else:
                    yield Static(id=f"{key}-text")

    _shown: tuple[str, str, bool, int | None, int, int] | None = None

    async def show(self, item: StepItem | None, *, now: float) -> None:
        """Show ``item``; a refresh that changes nothing about it keeps the pane (and its scroll) as is."""
        key = None if item is None else (
            item.unit, item.status, item.waiting, item.record.id if item.record else None,
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

        failed = self._failed_attempt(item)
        self.query_one("#traceback-text", Static).update(self._traceback(failed))
        self._section("traceback", failed is not None)

        llm = item.record.llm if item.record is not None else None
        self._show_llm(llm)
        self._section("llm", bool(llm))

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

    def _show_llm(self, llm: dict[str, Any] | None) -> None:
        record = llm or {}
        self.query_one("#llm-summary", Static).update(llm_summary(record))
        self.query_one("#llm-prompt", Static).update(llm_prompt(record))
        self.query_one("#llm-response", Static).update(llm_response(record))
        tools = llm_tool_calls(record)
        self.query_one("#llm-tools", Static).update(tools)
        self.query_one("#llm-tools").set_class(not tools.plain, "-empty")

    def _section(self, key: str, visible: bool) -> None:
        self.query_one(f"#section-{key}").set_class(not visible, "-empty")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if isinstance(event.button, JumpButton):
            event.stop()
            self.post_message(JumpToStep(event.button.step_id))

    @staticmethod
    def _title(item: StepItem) -> Text:
        text = Text()
        text.append(item.unit, style="bold")
        if item.iteration is not None:
            text.append(f"  iteration {item.iteration} of {unit_name(item.step_id, item.index)}")
        elif item.index is not None:
            text.append(f"  instance {item.index} of {item.step_id}")
        text.append(f"  {item.step_type} · agent {item.agent}")
        if item.child_run is not None:  # enter opens it
            where = "in" if item.inside else "runs"
            text.append(f" · {where} child run {item.child_run} (enter opens it)")
        if item.attempt:
            text.append(f" · attempt {item.attempt}")
        if item.duration is not None:
            text.append(f" · {format_duration(item.duration)}")
        if item.record is not None and item.record.origin != "executed":
            text.append(f" · {item.record.origin} by a reviewer")
        text.append("\n")
        decision = item.reviews[-1].decision if item.reviews else None
        words = step_status_words(item.status, item.waiting, decision)
        if item.waiting and item.record is not None and is_approval(item.record.error_type):
            words = waiting_words(item.step_type, item.record.error_type)  # a proposal, not a failed check
        text.append(words, style=STATUS_STYLE.get(item.status, ""))
        if item.record is not None and item.record.error and item.status != "gate_failed":
            text.append(f": {item.record.error}")
        if item.skip_reason:  # the condition and the values it read, or the upstream step that was skipped
            text.append(f": {item.skip_reason}")
        if item.summary is not None:
            text.append(f"\n{item.summary}; the ones waiting or failed are listed below it")
        mark = step_mark(item)
        if mark.note:  # approved despite / edited after failing verdicts, or failed warnings
            text.append(f"\n{mark.icon} {mark.note}", style=mark.style)
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
    def _failed_attempt(item: StepItem) -> StepRecordView | None:
        """The latest attempt that stored a traceback (the step's own error), or None."""
        records = [*item.attempts, item.record] if item.record is not None else list(item.attempts)
        return next((r for r in reversed(records) if r is not None and r.traceback), None)

    @staticmethod
    def _traceback(record: StepRecordView | None) -> Text:
        if record is None or record.traceback is None:
            return Text()
        text = Text(f"attempt {record.attempt}: {record.error}\n", style="bold red")
        text.append(record.traceback.rstrip(), style="dim")
        return text

    @staticmethod
    def _attempts(item: StepItem) -> Text:
        text = Text()
        decided = {review.record_id: review.decision for review in item.reviews}
        for i, rec in enumerate(item.attempts):
            if i:
                text.append("\n")
            text.append(f"#{rec.attempt} ")
            waiting = item.waiting and item.record is not None and rec.id == item.record.id
            status = shown_status(rec.status, rec.pause, waiting=waiting, decision=decided.get(rec.id))
            text.append(status, style=STATUS_STYLE.get(rec.status, ""))
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
                text.append(" (forced past its failing checks)")
            if review.comment:
                text.append(f"\n   “{review.comment}”", style="italic")
        return text


def _label(text: Text, label: str) -> None:
    text.append(label, style="bold")
    text.append("\n")


def llm_summary(llm: dict[str, Any]) -> Text:
    """``provider · model``, then tokens in/out, cost (or "unknown cost"), latency and how it finished."""
    text = Text()
    text.append(f"{llm.get('provider', '?')} · {llm.get('model', '?')}", style="bold")
    if llm.get("cached"):
        text.append("  (answered from the cache)", style="dim")
    usage = llm.get("usage") or {}
    text.append(f"\ntokens {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out")
    cost = llm.get("cost")
    text.append(" · ")
    if isinstance(cost, (int, float)):
        text.append(format_cost(cost))
    else:
        text.append("unknown cost", style="dim")
    latency = llm.get("latency")
    if isinstance(latency, (int, float)):
        text.append(f" · {format_duration(latency)}")
    if llm.get("finish_reason"):
        text.append(f" · finished: {llm['finish_reason']}")
    for error in llm.get("validation_errors") or []:
        text.append(f"\n✗ schema: {error}", style="red")
    return text


def format_cost(cost: float) -> str:
    """USD with up to six decimals: ``$0.000123``, ``$1.5``; a nonzero cost never reads as ``$0``."""
    if cost <= 0:
        return "$0"
    if cost < 0.000001:
        return "< $0.000001"
    return "$" + f"{cost:.6f}".rstrip("0").rstrip(".")


def prompt_message(llm: dict[str, Any]) -> str:
    """The rendered prompt: the user message the step's template produced.

    ``injected_spans`` index into it. That is the first user message sent; later user messages
    are re-asks after a schema failure (without a re-ask it is also the last one).
    """
    for message in llm.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return ""


def llm_prompt(llm: dict[str, Any]) -> Text:
    """The prompt, the spans the orchestrator injected (next-step needs, gate feedback) highlighted."""
    text = Text()
    _label(text, "Prompt")
    prompt = prompt_message(llm).rstrip("\n")
    body = Text(prompt)
    for span in llm.get("injected_spans") or []:
        try:
            start, end = (max(0, min(int(v), len(prompt))) for v in span)
        except (TypeError, ValueError):
            continue
        if start < end:
            body.stylize(INJECTED_STYLE, start, end)
    text.append_text(body)
    return text


def llm_response(llm: dict[str, Any]) -> Text:
    text = Text()
    _label(text, "Response")
    response = llm.get("response")
    if response:
        text.append(str(response))
    else:
        text.append("(no text)", style="dim")
    return text


def llm_tool_calls(llm: dict[str, Any]) -> Text:
    """Each tool call of the attempt: name, arguments, then its result or its error. Empty without tools."""
    calls = [t for t in llm.get("turns") or [] if isinstance(t, dict) and t.get("kind") == "tool"]
    text = Text()
    if not calls:
        return text
    _label(text, "Tool calls")
    for i, call in enumerate(calls):
        if i:
            text.append("\n")
        arguments = call.get("arguments")
        shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        text.append(f"→ {call.get('name', '?')}", style="bold")
        text.append(f"({shown})")
        if call.get("error"):
            text.append(f"\n   ✗ {call['error']}", style="red")
        else:
            text.append(f"\n   = {call.get('result')}", style="green")
    return text
