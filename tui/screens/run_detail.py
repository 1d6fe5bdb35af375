"""One run: its steps in topological order beside the selected step's detail."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, Static

from orchestrator.service.waiting_list import first_and_count
from tui import actions
from tui.bindings import DECISION_BINDINGS
from tui.format import STATUS_STYLE, format_age, truncate
from tui.messages import (
    ActionFailed,
    DecisionMade,
    JumpToStep,
    LiveTextChanged,
    LoadFailed,
    RunLoaded,
    RunUnchanged,
    StoreChanged,
)
from tui.queries import Fingerprint, RunDetail, StepItem, load_run_detail, run_fingerprint
from tui.reloads import SingleFlight
from tui.widgets.live_answers import LiveAnswerPanel
from tui.widgets.live_status import LiveStatus
from tui.widgets.step_detail import StepDetail
from tui.widgets.step_list import StepList
from tui.widgets.trace_panel import TraceLoaded, TracePanel, TraceUnavailable
from tui.widgets.traced_step_list import TracedStepList

if TYPE_CHECKING:
    from tui.app import ReviewApp


FIXABLE_RUNS = ("paused", "failed")
"""Run states in which `e`/`r` also apply to a completed step (a fix at the pause's cause)."""


class RunDetailScreen(Screen[None]):
    """Opens on the paused step (or instance, ``summarize[3]``); decisions apply to the selected row when it
    waits for review, and `e`/`r` on a completed step or instance of a paused or failed run fix it there
    (its descendants run again). A pause inside a child run is a row of its own (``research > retrieve``),
    decided here by its path; enter on it, or on the step that started the child, opens the child's screen."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        *DECISION_BINDINGS,
        Binding("n", "next_waiting", "Next waiting", tooltip="Move to the next unit waiting for a decision"),
        Binding("p", "next_waiting(-1)", "Previous waiting", show=False,
                tooltip="Move to the previous unit waiting for a decision"),
        Binding("w", "only_waiting", "Waiting only", show=False,  # the footer is full at 80 columns; see the docs
                tooltip="Show only the units waiting for a decision (again: all)"),
        Binding("l", "label", "Label", tooltip="Mark the run's final output correct or incorrect"),
        Binding("t", "trace", "Trace", tooltip="Which step the backward trace blames for the run's outcome"),
        Binding("q", "back", "Back", tooltip="Back to the runs"),
        Binding("escape", "close_trace_or_back", "Back", show=False),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.detail: RunDetail | None = None
        self._opened = False
        self._seen_waiting: set[str] = set()
        self._follow: list[str] = []
        """After a decision: the units that waited after the decided one, to select the first still waiting."""
        self._loads = SingleFlight()
        self._whole = False
        """Whether the read asked for meanwhile must read the whole run (else the timer's: only if it moved)."""
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        yield Static(f"run {self.run_id}: loading…", id="run-summary")
        with Horizontal(id="run-body"):
            yield TracedStepList(id="steps")
            yield StepDetail(id="detail")
            yield TracePanel(id="trace")
        yield Static(id="critic-evidence")
        yield LiveAnswerPanel(id="live-answers")
        yield LiveStatus("tab: into the detail · ↑ buttons jump upstream · a e r x: the waiting step",
                         id="live-status")
        yield Footer()

    def on_mount(self) -> None:
        evidence = self.query_one("#critic-evidence", Static)
        evidence.display = False
        evidence.styles.height = "auto"
        evidence.styles.max_height = 14
        self.query_one(StepList).focus()
        self._show_live_text()
        self.reload()
        # Other reviewers and processes change runs too: the timer reads the whole run again only when it moved.
        self._timer = self.set_interval(self.app.refresh_interval, lambda: self.reload(whole=False))

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def on_resize(self) -> None:
        self.query_one(StepList).refit()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
        self._show_live_text()  # the text grew while another screen was on top
        if self._opened:
            self.reload()

    def on_store_changed(self, message: StoreChanged) -> None:
        if message.run_id not in (None, self.run_id):
            return
        if message.progress is not None:
            self._show_progress()  # the event says what moved; the run is read when its continuation ends
            return
        if message.decided is not None:
            self._move_past(message.decided)
            if message.continues:
                return  # shown decided at once; the run is read once its continuation here ends
        self.reload()
        if self.has_class("-tracing"):
            self._load_trace()  # a label traces the run anew

    def on_live_text_changed(self, message: LiveTextChanged) -> None:
        if message.run_id == self.run_id:
            self._show_live_text()

    def _show_live_text(self) -> None:
        """What this run's LLM steps are writing in this app's continuation (kept after the step, until another
        streams); a run executed elsewhere streams nothing here, its records come with the timer's reads."""
        self.query_one(LiveAnswerPanel).show(self.app.streamed.of(self.run_id))

    def reload(self, whole: bool = True) -> None:
        """Read the run, unless a read is in flight: then once more after it (:class:`SingleFlight`), so a read
        slower than the timer is never thrown away and restarted. ``whole=False`` (the timer): only if the run
        moved since the last read (:func:`~tui.queries.run_fingerprint`)."""
        self._whole = self._whole or whole
        if self._loads.ask():
            self._start_read()

    def _start_read(self) -> None:
        whole, self._whole = self._whole, False
        last = self.detail.fingerprint if self.detail is not None and not whole else None
        self._read(last)

    def _read_done(self) -> None:
        if self._loads.finished():
            self._start_read()

    @work(thread=True, group="run-load", exit_on_error=False)
    def _read(self, last: Fingerprint | None) -> None:
        try:
            if last is not None and last[0] not in ("running", "queued"):
                _, now = run_fingerprint(self.app.store, self.run_id)
                if now == last:
                    self.post_message(RunUnchanged())
                    return
            detail = load_run_detail(self.app.store, self.run_id)
        except Exception as exc:  # keep what is shown; say why it is not fresh
            self.post_message(LoadFailed(f"cannot read run {self.run_id}: {type(exc).__name__}: {exc}"))
            return
        self.post_message(RunLoaded(detail))

    def on_run_unchanged(self, _message: RunUnchanged) -> None:
        self._read_done()

    def on_load_failed(self, message: LoadFailed) -> None:
        self._read_done()
        self.notify(message.error, severity="error", timeout=10, markup=False)

    async def on_run_loaded(self, message: RunLoaded) -> None:
        self._read_done()
        detail = self.detail = message.detail
        self._mark_running(detail)
        # On opening, and when the run pauses again further on, select the step that now waits; after a
        # decision, the next unit that still waits.
        new_waits = [s for s in detail.waiting if s not in self._seen_waiting]
        select = new_waits[0] if new_waits else None
        following = [unit for unit in self._follow if unit in detail.waiting]
        if following:
            select, self._follow = following[0], []
        elif detail.run.status not in ("running", "queued"):
            self._follow = []  # nothing it named waits any more (the run moved on, or ended)
        if select is not None and self.has_class("-tracing"):
            self._close_trace()  # a step waits for review again: show its detail, not "no outcome yet"
        self._seen_waiting.update(detail.waiting)
        self._opened = True
        blamed = self._blamed(detail)
        steps = self.query_one(StepList)
        steps.show(detail.steps, select=select, blamed=blamed)
        self.query_one("#run-summary", Static).update(self._summary(detail, blamed))
        await self._show_selected()
        self.refresh_bindings()

    def _mark_running(self, detail: RunDetail) -> None:
        """Steps in flight in this app's continuation have no record yet: show them running."""
        for item in detail.steps:
            if item.unit in self.app.running_steps.get(self.run_id, ()):
                item.status = "running"

    def _show_progress(self) -> None:
        """A step of this run started or finished in this app: show it from what the app tracks, without a read
        (the record is read when the continuation ends, or by the timer)."""
        if self.detail is None:
            return
        self._mark_running(self.detail)
        self.query_one(StepList).show(self.detail.steps, blamed=self._blamed(self.detail))

    def _move_past(self, decided: str) -> None:
        """A decision on ``decided`` was stored: show it no longer waiting and select the next unit waiting after
        it (wrapping round) at once, without a read; once the run is read again, the first of those still waiting."""
        if self.detail is None or decided not in self.detail.waiting:
            return
        waiting = self.detail.waiting
        at = waiting.index(decided)
        self._follow = waiting[at + 1:] + waiting[:at]
        item = self.detail.step(decided)
        if item is not None:
            item.waiting = False
        blamed = self._blamed(self.detail)
        self.query_one(StepList).show(self.detail.steps, select=self._follow[0] if self._follow else None,
                                      blamed=blamed)
        self.query_one("#run-summary", Static).update(self._summary(self.detail, blamed))
        self.refresh_bindings()

    def action_only_waiting(self) -> None:
        """``w``: narrow the steps to the units that wait for a decision, or show every unit again."""
        steps = self.query_one(StepList)
        steps.only_waiting = not steps.only_waiting
        if self.detail is not None:
            steps.show(self.detail.steps, blamed=self._blamed(self.detail))
            shown = f"the {len(self.detail.waiting)} waiting units" if steps.only_waiting else "every unit"
            self.notify(f"showing {shown} (w: {'all' if steps.only_waiting else 'waiting only'})",
                        severity="information")

    def action_next_waiting(self, step: int = 1) -> None:
        """``n``: the next unit waiting for a decision after the selected row (``p``: the one before), wrapping."""
        if self.detail is None or not self.detail.waiting:
            self.notify("nothing in this run waits for a decision", severity="information")
            return
        units = [item.unit for item in self.detail.steps]
        selected = self.query_one(StepList).selected_step
        at = units.index(selected) if selected in units else -1
        order = units[at + 1:] + units[:at + 1] if step > 0 else units[:at][::-1] + units[at:][::-1]
        waiting = set(self.detail.waiting)
        target = next((unit for unit in order if unit in waiting and unit != selected), None)
        if target is not None:
            self.query_one(StepList).select(target)

    def _blamed(self, detail: RunDetail) -> str | None:
        """The step the run's explaining attribution record blames: the record the trace panel shows too
        (``orchestrator.attribution.choice``); before any is read back, what a label here just reported."""
        return detail.blamed_step if detail.attribution is not None else self.app.blamed.get(self.run_id)

    def _summary(self, detail: RunDetail, blamed: str | None) -> Text:
        run = detail.run
        text = Text()
        text.append(f"run {run.run_id}", style="bold")
        text.append(f" · {run.workflow} · ")
        text.append(run.status, style=STATUS_STYLE.get(run.status, ""))
        if detail.waiting:
            text.append(f" at {first_and_count(detail.waiting, shown=3)}", style="bold yellow")
            if len(detail.waiting) > 1:
                text.append(f" ({len(detail.waiting)} waiting; n: next)")
        if run.kind == "child" and run.parent_run_id is not None:
            text.append(f" · child run of {run.parent_run_id} at step {run.parent_step}")
        text.append(f" · started {format_age(self.app.clock() - run.created_at)} ago")
        if run.status == "succeeded":
            text.append("\noutput: " + truncate(json.dumps(run.output, default=str), 200), style="dim")
        elif run.error:
            text.append("\n" + truncate(run.error, 200), style="red")
        for outcome in detail.outcomes:
            verdicts: dict[bool | None, str] = {True: "correct", False: "incorrect"}
            verdict = verdicts.get(outcome.correct, "unjudged")
            text.append(f"\noutcome: {verdict} ({outcome.value:.2f}, {outcome.source}"
                        + (f" {outcome.reviewer}" if outcome.reviewer else "") + ")")
            if outcome.reason:
                text.append(f": {truncate(outcome.reason, 120)}")
        if detail.model_usage:
            from orchestrator.engine.documents import usage_text

            usage = detail.model_usage
            split = ", ".join(f"{purpose} {u['calls']}" for purpose, u in usage["by_purpose"].items())
            total = usage_text(usage["calls"], usage["input_tokens"], usage["output_tokens"], usage["cost"])
            text.append(f"\nmodel calls: {total} ({split})", style="dim")
        if blamed:
            method = detail.attribution.method if detail.attribution is not None else "trace"
            who = "backward trace" if method == "trace" else f"{method} attribution"
            text.append(f"\n{who} blames step {blamed}", style="bold red")
        return text

    async def _show_selected(self) -> None:
        if self.detail is None:
            return
        step_id = self.query_one(StepList).selected_step
        item = self.detail.step(step_id) if step_id else None
        await self.query_one(StepDetail).show(item, now=self.app.clock())
        self._show_critic_evidence(item)

    def _show_critic_evidence(self, item: StepItem | None) -> None:
        """Under a waiting critic: the outputs of the steps it verified, side by side, and where to fix."""
        box = self.query_one("#critic-evidence", Static)
        verdict = next((g for g in item.gate_record.gates if g.gate == "critic"), None) \
            if item is not None and item.waiting and item.step_type == "critic" and item.gate_record else None
        verified = [str(s) for s in verdict.details.get("verifies", [])] if verdict is not None else []
        box.display = bool(verified)
        if not verified or self.detail is None:
            return
        table = Table(title=f"critic {item.step_id if item else ''} verified: select the wrong step, "
                            "then e (edit) or r (retry) fixes it there", title_justify="left", expand=True)
        cells = []
        for sid in verified:
            step = self.detail.step(sid)
            table.add_column(f"{sid} ({step.status if step else 'no record'})", overflow="fold", ratio=1)
            cells.append(truncate(json.dumps(step.output, indent=2, default=str), 500) if step else "")
        table.add_row(*cells)
        box.update(table)

    @on(DataTable.RowHighlighted, "#steps")
    async def step_highlighted(self) -> None:
        await self._show_selected()
        self.refresh_bindings()

    @on(DataTable.RowSelected, "#steps")
    def open_child(self, event: DataTable.RowSelected) -> None:
        """Enter on a ``workflow:`` step's row, or on a pause inside its child (``research > retrieve``),
        opens the child run's screen; escape comes back here."""
        item = self.detail.step(str(event.row_key.value)) if self.detail is not None else None
        if item is not None and item.child_run is not None:
            self.app.push_screen(RunDetailScreen(item.child_run))

    def on_jump_to_step(self, message: JumpToStep) -> None:
        if self.detail is not None:
            steps = self.query_one(StepList)
            steps.show(self.detail.steps, select=message.step_id,
                       blamed=self._blamed(self.detail))
            steps.focus()

    # -- actions ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:  # noqa: ARG002 (Textual hook)
        """Decisions show dimmed unless a step waits for review; labels unless the run is finished."""
        if self.detail is None or action not in ("decide", "edit", "label"):
            return True
        if action == "label":
            return True if self.detail.run.status in ("succeeded", "failed", "rejected") else None
        fixing = action == "edit" or (action == "decide" and parameters == ("retry",))
        if fixing and self._fixable_step() is not None:
            return True
        return True if self.detail.waiting else None

    def _fixable_step(self) -> str | None:
        """The selected step when it completed in a paused or failed run and does not itself wait; or in a
        child run that finished, whose output its parent took (the fix reaches up into the parent, which says
        whether it is upstream of its pause)."""
        if self.detail is None:
            return None
        run = self.detail.run
        if run.status not in FIXABLE_RUNS and not (run.kind == "child" and run.status == "succeeded"):
            return None
        selected = self.query_one(StepList).selected_step
        item = self.detail.step(selected) if selected else None
        if item is None or item.waiting or item.status != "succeeded" or item.record is None \
                or item.record.superseded or item.summary is not None:
            return None
        return item.unit

    def _target_step(self) -> str | None:
        """The selected step if it waits for review, else the only waiting step."""
        if self.detail is None or not self.detail.waiting:
            return None
        selected = self.query_one(StepList).selected_step
        if selected in self.detail.waiting:
            return selected
        if len(self.detail.waiting) == 1:
            return self.detail.waiting[0]
        self.notify(f"{len(self.detail.waiting)} steps wait for review "
                    f"({first_and_count(self.detail.waiting, shown=3)}): select one (n: the next)",
                    severity="warning")
        return None

    def action_decide(self, decision: str) -> None:
        fix = self._fixable_step() if decision == "retry" else None
        if fix is not None:
            self._retry_fix(fix)
            return
        step = self._target_step()
        if step is not None:
            self.app.request_decision(self.run_id, decision, step=step)

    def action_edit(self) -> None:
        step = self._fixable_step() or self._target_step()
        if step is not None:
            self.app.open_editor(self.run_id, step)

    @work(thread=True, group="fix", exit_on_error=False)
    def _retry_fix(self, step: str, rerun_side_effects: bool = False) -> None:
        """Retry a completed step; steps with side effects that would run again are confirmed first."""
        try:
            effects = [] if rerun_side_effects else actions.fix_side_effects(self.app.store, self.run_id, step,
                                                                             "retry")
            if effects:
                self.app.call_from_thread(self._confirm_side_effects, step, effects)
                return
            decision = actions.decide(self.app.store, self.run_id, "retry", step=step, reviewer=self.app.reviewer,
                                      rerun_side_effects=rerun_side_effects)
        except Exception as exc:
            self.post_message(ActionFailed(self.run_id, _error_text(exc)))
            return
        self.post_message(DecisionMade(decision))

    def _confirm_side_effects(self, step: str, effects: list[str]) -> None:
        from tui.screens.confirm import ConfirmScreen

        def answered(answer: str | None) -> None:
            if answer is not None:
                self._retry_fix(step, True)

        self.app.push_screen(
            ConfirmScreen(f"Retry step {step} and re-run side effects?",
                          f"These steps downstream already acted and would act again: {', '.join(effects)}. "
                          "The choice is recorded in the review.", confirm_label="Re-run them",
                          ask_comment=False, cursor_blink=self.app.cursor_blink),
            answered)

    def action_label(self) -> None:
        if self.detail is not None:
            self.app.request_label(self.run_id, truncate(json.dumps(self.detail.run.output, default=str), 300))

    def action_back(self) -> None:
        self.dismiss()

    # -- backward trace --------------------------------------------------------------------------

    def action_trace(self) -> None:
        """Show the run's backward trace in place of the step detail; `t` again (or escape) hides it."""
        if self.has_class("-tracing"):
            self._close_trace()
            return
        self.add_class("-tracing")
        self.query_one(TracePanel).show_loading()
        self._load_trace()

    def _close_trace(self) -> None:
        self.remove_class("-tracing")
        self.query_one(TracedStepList).show_trace(None, tracing=False)

    def action_close_trace_or_back(self) -> None:
        if self.has_class("-tracing"):
            self._close_trace()
        else:
            self.dismiss()

    @work(thread=True, exclusive=True, group="trace-load", exit_on_error=False)
    def _load_trace(self) -> None:
        from orchestrator.attribution.choice import explaining_view
        from orchestrator.core.errors import OrchestratorError

        try:
            view = explaining_view(self.app.store, self.run_id)
        except OrchestratorError as exc:  # no outcome yet: the attribution code says what to do
            self.post_message(TraceUnavailable(self.run_id, str(exc)))
            return
        except Exception as exc:
            self.post_message(TraceUnavailable(self.run_id, f"cannot trace run {self.run_id}: "
                                                            f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(TraceLoaded(self.run_id, view))

    async def on_trace_loaded(self, message: TraceLoaded) -> None:
        if self.has_class("-tracing"):
            self.query_one(TracedStepList).show_trace(message.view.blamed_step)
            await self.query_one(TracePanel).show(message.view)

    async def on_trace_unavailable(self, message: TraceUnavailable) -> None:
        if self.has_class("-tracing"):
            self.query_one(TracedStepList).show_trace(None)
            reason = message.reason
            if self.detail is not None and self.detail.run.status in ("succeeded", "failed", "rejected"):
                reason += "\n\nPress l to label it here; the trace then appears."
            await self.query_one(TracePanel).show_unavailable(reason)


def _error_text(exc: Exception) -> str:
    from orchestrator.core.errors import OrchestratorError

    if isinstance(exc, OrchestratorError):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (nothing was changed)"
