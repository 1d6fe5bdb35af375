"""A run's backward trace: the method, the blamed step, the confidence and the ranked candidates.

Shows an :class:`~orchestrator.spec.records.AttributionView` as :func:`orchestrator.attribution.trace_view`
returns it, or the reason there is none (a run without an outcome yet). The run screen reads the
store and hands the view over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static

if TYPE_CHECKING:
    from orchestrator.spec.records import AttributionView

SIGNAL_WORDS = {
    "approved_despite_failing": "approved despite failing",
    "gate_failed": "gate failed",
    "critic_failed": "critic failed",
    "critic_overridden": "critic overridden",
    "forced_edit": "forced edit",
}


@dataclass
class TraceLoaded(Message):
    """The run's latest backward trace (stored just now if it had none)."""

    run_id: str
    view: AttributionView


@dataclass
class TraceUnavailable(Message):
    """No trace can be made: the attribution code's own message (no outcome yet, ...)."""

    run_id: str
    reason: str


def evidence_lines(candidate: dict[str, Any]) -> list[str]:
    """What the trace recorded against a candidate: one line per signal, or why it has none."""
    ev = candidate.get("evidence") or {}
    signals = ev.get("signals") or []
    if signals:
        return [f"{SIGNAL_WORDS.get(s.get('kind'), str(s.get('kind', '')).replace('_', ' '))}: {s.get('detail', '')}"
                for s in signals]
    return ["no signal, checked by gates" if ev.get("checked") else "no signal, unchecked: no gate or critic"]


class CandidateView(Vertical):
    """One ranked candidate: rank, step, agent and credit, then its evidence.

    ``-blamed`` marks the blamed step; ``-quiet`` a step with no signal against it, shown on one
    line (most steps of a long workflow), so the signalled ones stand out.
    """

    def __init__(self, rank: int, candidate: dict[str, Any], *, blamed: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rank = rank
        self.candidate = candidate
        self.step_id = str(candidate.get("step_id"))
        self.credit = float(candidate.get("credit") or 0.0)
        self.evidence = evidence_lines(candidate)
        self.set_class(blamed, "-blamed")
        self.set_class(self.credit < 0, "-negative")
        self.set_class(not (candidate.get("evidence") or {}).get("signals"), "-quiet")

    def compose(self) -> ComposeResult:
        head = Text()
        head.append(f"{self.rank:>2} ")
        head.append(self.step_id, style="bold")
        head.append(f" ({self.candidate.get('agent', '')}) {self.credit:+.2f}")
        if self.has_class("-blamed"):
            head.append("  ◀ blamed")
        if self.has_class("-quiet"):
            head.append(f" · {self.evidence[0]}")
        yield Static(head, classes="candidate-head")
        yield Static("\n".join(self.evidence), classes="candidate-evidence", markup=False)


class TracePanel(VerticalScroll):
    """Replaces the step detail while the trace is open; the screen flips ``-tracing`` to show it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view: AttributionView | None = None
        self.reason: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("Backward trace", classes="section-title", id="trace-title")
        yield Static("tracing…", id="trace-head")
        yield Static("Candidates, most blamed first", classes="section-title", id="trace-candidates-title")
        yield Vertical(id="trace-candidates")
        yield Static(id="trace-why")
        yield Static(id="trace-coverage")

    @property
    def candidates(self) -> list[CandidateView]:
        return list(self.query(CandidateView))

    def show_loading(self) -> None:
        self.query_one("#trace-head", Static).update("tracing…")

    async def show(self, view: AttributionView) -> None:
        """Show a stored trace; the same record again keeps the pane and its scroll."""
        if self.view is not None and self.view.id == view.id and self.reason is None:
            return
        self.view, self.reason = view, None
        self.remove_class("-unavailable")
        self.set_class(view.blamed_step is None, "-nothing-blamed")
        self.query_one("#trace-head", Static).update(self._head(view))
        evidence = view.evidence or {}
        self.query_one("#trace-why", Static).update(f"why: {evidence.get('explanation') or '(not recorded)'}")
        coverage = evidence.get("coverage") or {}
        cov = ""
        if coverage.get("candidates"):
            cov = f"{coverage.get('checked', 0)} of {coverage['candidates']} candidate steps are checked by gates " \
                  "or critics"
            if coverage.get("unchecked"):
                cov += f"; unchecked: {', '.join(coverage['unchecked'])}"
        self.query_one("#trace-coverage", Static).update(cov)
        box = self.query_one("#trace-candidates", Vertical)
        await box.remove_children()
        await box.mount_all([CandidateView(i, c, blamed=c.get("step_id") == view.blamed_step)
                             for i, c in enumerate(view.step_credits, 1)])
        self.scroll_home(animate=False)

    async def show_unavailable(self, reason: str) -> None:
        self.view, self.reason = None, reason
        self.add_class("-unavailable")
        self.remove_class("-nothing-blamed")
        self.query_one("#trace-head", Static).update(reason)
        for name in ("#trace-why", "#trace-coverage"):
            self.query_one(name, Static).update("")
        await self.query_one("#trace-candidates", Vertical).remove_children()

    @staticmethod
    def _head(view: AttributionView) -> Text:
        text = Text()
        if view.blamed_step:
            agent = next((c.get("agent") for c in view.step_credits if c.get("step_id") == view.blamed_step), None)
            text.append("blames step ")
            text.append(view.blamed_step, style="bold")
            if agent:
                text.append(f" (agent {agent})")
        else:
            text.append("blames no step")
        text.append(f" · confidence {view.confidence or 0.0:.2f} · method {view.method}")
        outcome = (view.evidence or {}).get("outcome")
        if isinstance(outcome, dict):
            verdicts: dict[object, str] = {True: "correct", False: "incorrect"}
            verdict = verdicts.get(outcome.get("correct"), "unjudged")
            who = " ".join(str(p) for p in (outcome.get("source"), outcome.get("reviewer")) if p)
            text.append(f"\noutcome {verdict} ({float(outcome.get('value') or 0.0):.2f}, {who})", style="not bold")
        elif (view.evidence or {}).get("run_status"):
            text.append(f"\nno outcome: the run {view.evidence['run_status']}", style="not bold")
        return text
