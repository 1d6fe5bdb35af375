"""``orchestrator review``: a Textual app over paused runs.

It reads and writes the same store as the CLI and makes decisions through the same functions
(:mod:`tui.actions` calls :mod:`orchestrator.service.review` and :mod:`orchestrator.service.labels`). After a
decision the run continues in a thread worker inside the app, reporting step events back as
messages; quitting stops it at the next step boundary, leaving it for ``orchestrator resume``.

Only Textual and the store are imported at start-up: the executor, spec loader and graph
(networkx) load inside workers, the first time a screen needs them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from orchestrator.service.waiting_list import first_and_count
from orchestrator.spec.events import Event, StepFinished, StepStarted, Token
from tui import actions
from tui.live_text import StreamedText
from tui.messages import (
    ActionFailed,
    ContinuationEnded,
    DecisionMade,
    Labelled,
    LiveTextChanged,
    RunProgress,
    StoreChanged,
)
from tui.screens.runs import RunsScreen

if TYPE_CHECKING:
    from orchestrator.store import Lease, Store
    from tui.screens.label import LabelChoice


class ContinuationStopped(BaseException):  # noqa: N818  (a stop signal, like KeyboardInterrupt)
    """Raised from the event hook to stop a background continuation when the app quits.

    A BaseException, because the executor turns an Exception inside a step into a failed step;
    this must leave the run as a crash would (``running``, every finished record kept) so that
    ``orchestrator resume`` picks it up.
    """


class ReviewApp(App[None]):
    """Runs screen first; run, edit, reject and label screens on top of it."""

    CSS_PATH = "app.tcss"
    TITLE = "orchestrator review"
    ENABLE_COMMAND_PALETTE = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit_app", "Quit", show=False, priority=True),
        # as in every terminal program; not a priority binding, so a focused editor still copies with it
        Binding("ctrl+c", "quit_app", "Quit", show=False),
    ]

    activity: reactive[str] = reactive("", init=False)
    """The live-status line every screen shows: background continuations and the last news."""

    def __init__(self, store: Store, *, reviewer: str | None = None, clock: Callable[[], float] = time.time,
                 refresh_interval: float = 2.0, cursor_blink: bool = True) -> None:
        """
        Args:
            store: the store the CLI would use (``--db`` / ``ORCHESTRATOR_DB``).
            reviewer: stored with every decision and label; default the OS user, as in the CLI.
            clock: the time ages are measured against (tests freeze it).
            refresh_interval: seconds between re-reads of the runs list, to see other processes' runs.
            cursor_blink: off in snapshot tests, so screenshots do not depend on timing.
        """
        super().__init__()
        self.store = store
        self.reviewer = reviewer
        self.clock = clock
        self.refresh_interval = refresh_interval
        self.cursor_blink = cursor_blink
        self.sub_title = store.display_url
        self.continuing: dict[str, str] = {}
        """Runs continuing in a worker of this app -> what they are doing now."""
        self.running_steps: dict[str, set[str]] = {}
        """Run -> steps in flight in this app's continuations (no record exists until they finish)."""
        self.blamed: dict[str, str] = {}
        """Run -> the step a label's backward trace blamed (LabelResult.blamed_step)."""
        self.streamed = StreamedText()
        """What the LLM steps of this app's continuations are writing (tokens are not stored: only here)."""
        self._stopping = threading.Event()
        self._deciding: set[str] = set()

    def on_mount(self) -> None:
        self.push_screen(RunsScreen())

    def _changed(self, run_id: str | None = None, *, decided: str | None = None, continues: bool = False,
                 progress: Event | None = None) -> None:
        """Tell the visible screen to re-read (or, for a ``progress`` event, what moved); screens below re-read
        when they are shown again."""
        self.screen.post_message(StoreChanged(run_id, decided=decided, continues=continues, progress=progress))

    def _show_activity(self, news: str | None = None) -> None:
        parts = [f"{run_id}: {doing}" for run_id, doing in self.continuing.items()]
        if news:
            parts.append(news)
        self.activity = "  ·  ".join(parts)

    # -- decisions -------------------------------------------------------------------------------

    def request_decision(self, run_id: str, decision: str, *, step: str | None = None) -> None:
        """Approve and retry at once; reject after a confirmation that says what it will do (a tool call is
        refused and its step goes on; an instance ends and the run goes on; any other pause ends the run) and
        asks for a comment."""
        if run_id in self._deciding:  # a second key press before the first decision is stored
            return
        if decision != "reject":
            self._decide(run_id, decision, step, None)
            return
        self._deciding.add(run_id)
        self._confirm_reject(run_id, step)

    @work(thread=True, group="decisions", exit_on_error=False)
    def _confirm_reject(self, run_id: str, step: str | None) -> None:
        """Read what rejecting the pause will do (a store read, so off the event loop), then ask."""
        try:
            effect = actions.reject_effect(self.store, run_id, step)
        except Exception as exc:
            self.post_message(ActionFailed(run_id, _error_text(exc)))
            return
        self.call_from_thread(self._ask_reject, run_id, step, effect.title, effect.body)

    def _ask_reject(self, run_id: str, step: str | None, title: str, body: str) -> None:
        from tui.screens.confirm import ConfirmScreen

        self._deciding.discard(run_id)
        self.push_screen(
            ConfirmScreen(title, body, confirm_label="Reject", cursor_blink=self.cursor_blink),
            lambda comment: None if comment is None else self._decide(run_id, "reject", step, comment or None))

    def _decide(self, run_id: str, decision: str, step: str | None, comment: str | None) -> None:
        self._deciding.add(run_id)
        self._store_decision(run_id, decision, step, comment)

    @work(thread=True, group="decisions", exit_on_error=False)
    def _store_decision(self, run_id: str, decision: str, step: str | None, comment: str | None) -> None:
        try:
            result = actions.decide(self.store, run_id, decision, step=step, reviewer=self.reviewer, comment=comment)
        except Exception as exc:
            self.post_message(ActionFailed(run_id, _error_text(exc)))
            return
        self.post_message(DecisionMade(result))

    def on_decision_made(self, message: DecisionMade) -> None:
        d = message.decision
        self._deciding.discard(d.shown_run_id)
        news = f"{d.shown_run_id}: step {d.shown_step} {actions.DECISION_VERBS.get(d.decision, d.decision)}" + (
            " (forced past its failing checks)" if d.forced else "")
        self.notify(news, title="decision stored", markup=False)
        if d.continue_run:
            self.continue_in_background(d.run_id, d.lease)
        self._show_activity(news)
        self._changed(d.shown_run_id, decided=d.shown_step, continues=d.continue_run)

    def on_action_failed(self, message: ActionFailed) -> None:
        self._deciding.discard(message.run_id)
        self.notify(message.error, title="nothing was changed", severity="error", timeout=10, markup=False)
        self._changed(message.run_id)

    def open_editor(self, run_id: str, step: str | None) -> None:
        from tui.screens.edit import EditScreen

        self.push_screen(EditScreen(run_id, step))

    # -- labels ----------------------------------------------------------------------------------

    def request_label(self, run_id: str, output_preview: str = "") -> None:
        from tui.screens.label import LabelScreen

        def on_choice(choice: LabelChoice | None) -> None:
            if choice is not None:
                self.label_run(run_id, choice)

        self.push_screen(LabelScreen(run_id, output_preview, cursor_blink=self.cursor_blink), on_choice)

    @work(thread=True, group="labels", exit_on_error=False)
    def label_run(self, run_id: str, choice: LabelChoice) -> None:
        try:
            result = actions.label(self.store, run_id, correct=choice.correct, reason=choice.reason,
                                   reviewer=self.reviewer)
        except Exception as exc:
            self.post_message(ActionFailed(run_id, _error_text(exc)))
            return
        self.post_message(Labelled(result))

    def on_labelled(self, message: Labelled) -> None:
        r = message.result
        news = f"{r.run_id}: labelled {'correct' if r.correct else 'incorrect'}"
        if r.blamed_step is not None:
            self.blamed[r.run_id] = r.blamed_step
            news += f"; backward trace blames step {r.blamed_step}"
        self.notify(news, title="label stored", markup=False)
        self._show_activity(news)
        self._changed(r.run_id)

    # -- background continuation -----------------------------------------------------------------

    def continue_in_background(self, run_id: str, lease: Lease | None = None) -> None:
        """``lease``: the run's lease, when the decision claimed it with its own transaction."""
        self.continuing[run_id] = "continuing…"
        self.streamed.forget(run_id)
        self._show_activity()
        self._continue(run_id, lease)

    @work(thread=True, group="continue", exit_on_error=False)
    def _continue(self, run_id: str, lease: Lease | None = None) -> None:
        def on_event(event: Event) -> None:
            if isinstance(event, Token):  # a piece of a step in flight: quitting stops after the step, not inside it
                if not self._stopping.is_set():
                    self.post_message(RunProgress(run_id, event))
                return
            if self._stopping.is_set():
                raise ContinuationStopped(run_id)
            self.post_message(RunProgress(run_id, event))

        try:
            result = actions.continue_after_decision(self.store, run_id, on_event, lease)
        except BaseException as exc:  # an ExceptionGroup from the executor's task group, too
            if _is_stop(exc):
                return
            self.post_message(ContinuationEnded(run_id, None, error=_error_text(exc)))
            return
        self.post_message(ContinuationEnded(run_id, result.status, result.paused_steps, result.error))

    def on_run_progress(self, message: RunProgress) -> None:
        event = message.event
        if self.streamed.apply(event):
            self.screen.post_message(LiveTextChanged(event.run_id))
        if isinstance(event, Token):
            return  # dozens a second: the live panel shows them, the steps and the activity line do not move
        in_flight = self.running_steps.setdefault(message.run_id, set())
        if isinstance(event, StepStarted):
            in_flight.add(event.unit)
            doing = f"running {event.unit} (attempt {event.attempt})"
        elif isinstance(event, StepFinished):
            in_flight.discard(event.unit)
            doing = f"{event.unit} {event.status}"
        else:
            doing = _event_words(event)
        if message.run_id in self.continuing:
            self.continuing[message.run_id] = doing
        self._show_activity()
        self._changed(message.run_id, progress=event)

    def on_continuation_ended(self, message: ContinuationEnded) -> None:
        self.continuing.pop(message.run_id, None)
        self.running_steps.pop(message.run_id, None)
        if message.error:
            news = f"{message.run_id} could not continue: {message.error}"
            self.notify(news + f"; try `orchestrator resume {message.run_id}`", severity="error", timeout=15,
                        markup=False)
        elif message.status == "paused":
            waiting = message.paused_steps
            news = f"{message.run_id} paused again at {first_and_count(waiting, shown=3)}" + (
                f" ({len(waiting)} waiting)" if len(waiting) > 1 else "")
            self.notify(news, severity="warning", markup=False)
        else:
            news = f"{message.run_id} {message.status}"
            self.notify(news, severity="error" if message.status == "failed" else "information", markup=False)
        self._show_activity(news)
        self._changed()  # any run: a continuation of a child run moves the parent shown too

    # -- quitting --------------------------------------------------------------------------------

    def action_quit_app(self) -> None:
        """Quit at once, or, while runs continue here, after saying what happens to them."""
        if not self.continuing:
            self.exit()
            return
        from tui.screens.confirm import ConfirmScreen

        runs = ", ".join(self.continuing)
        self.push_screen(
            ConfirmScreen("Quit while runs continue?",
                          f"{runs} will stop after the step in flight and stay resumable with "
                          "`orchestrator resume RUN`.", confirm_label="Quit", ask_comment=False),
            lambda answer: None if answer is None else self._quit_now())

    def _quit_now(self) -> None:
        self._stopping.set()
        in_flight = sorted({step for run in self.continuing for step in self.running_steps.get(run, ())})
        lines = []
        if in_flight:
            lines.append(f"waiting for the step(s) in flight to finish ({', '.join(in_flight)}) …")
        lines += [f"run {run} stops there and stays resumable: `orchestrator resume {run}`" for run in self.continuing]
        self.exit(message="\n".join(lines))


def _is_stop(exc: BaseException) -> bool:
    if isinstance(exc, ContinuationStopped):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_stop(e) for e in exc.exceptions)
    return False


def _error_text(exc: BaseException) -> str:
    from orchestrator.core.errors import OrchestratorError

    if isinstance(exc, OrchestratorError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def make_app(store: Store, **options: Any) -> ReviewApp:
    """The app ``orchestrator review`` runs; ``options`` are :class:`ReviewApp`'s keyword arguments."""
    return ReviewApp(store, **options)


def _event_words(event: Event) -> str:
    """``RunFinished`` -> ``run finished``: what the activity line says for other events."""
    name = type(event).__name__
    return "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()
