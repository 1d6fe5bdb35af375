"""Replace a paused step's output, or a completed step's (a fix at the pause's cause: its
descendants are superseded and run again). Saving goes through ``orchestrator.service.review.edit``, the
function behind ``orchestrator edit``, so the new output must be valid JSON and pass all of the
step's gates; when it does not, the reason is shown here and nothing is stored or lost. An output the
gates refuse (an approval step's: its ``output_schema``) may be stored anyway once the reviewer
confirms, recorded as forced like ``orchestrator edit --force``; invalid JSON and a tool call's
arguments that do not fit the tool never are. A fix that would run again steps with side effects
asks first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Static, TextArea

from tui import actions
from tui.messages import DecisionMade, EditRejected, EditTargetLoaded

if TYPE_CHECKING:
    from orchestrator.core.errors import EditRefusedError
    from orchestrator.spec.records import StepRecordView
    from tui.app import ReviewApp


class EditScreen(Screen[None]):
    """A JSON editor over the paused output, with the gates it must pass and an inline error line."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", tooltip="Check the output against the step's gates and store it"),
        Binding("ctrl+r", "reset", "Reset", tooltip="Put the paused output back in the editor"),
        Binding("escape", "back", "Back", tooltip="Leave without changing anything"),
    ]

    def __init__(self, run_id: str, step: str | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.step = step
        self.record: StepRecordView | None = None
        self.saving = False
        self.original = ""

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        yield Static(f"Edit the output of run {self.run_id}: loading…", id="edit-title")
        editor = TextArea("", language=None, soft_wrap=True, show_line_numbers=True, tab_behavior="focus",
                          id="editor", disabled=True)
        editor.cursor_blink = self.app.cursor_blink
        yield editor
        yield Static(id="edit-error")
        comment = Input(placeholder="comment (stored with the edit)", compact=True, id="edit-comment")
        comment.cursor_blink = self.app.cursor_blink
        yield comment
        with Horizontal(id="edit-buttons"):
            yield Button("Save", variant="primary", compact=True, id="save", disabled=True)
            yield Button("Back", compact=True, id="back")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exit_on_error=False)
    def load(self) -> None:
        try:
            record, gates = actions.editable_record(self.app.store, self.run_id, self.step)
        except Exception as exc:
            self.post_message(EditRejected(_error_text(exc)))
            return
        self.post_message(EditTargetLoaded(record, gates))

    def on_edit_target_loaded(self, message: EditTargetLoaded) -> None:
        rec = self.record = message.record
        self.run_id, self.step = rec.run_id, rec.unit  # a path into a child run: the child holds the record
        title = Text()
        title.append(f"Edit the output of step {rec.unit}", style="bold")
        title.append(f" (run {self.run_id}, attempt {rec.attempt})")
        if message.gates:
            title.append(f"\nmust pass: {', '.join(message.gates)}")
        for gate in rec.failed_gates:
            title.append(f"\n✗ {gate.gate}: {gate.reason}", style="red")
        if rec.status == "succeeded":
            title.append("\na fix at the cause: the steps downstream of it are superseded and run again",
                         style="yellow")
        self.query_one("#edit-title", Static).update(title)
        editor = self.query_one("#editor", TextArea)
        self.original = json.dumps(rec.output, indent=2, ensure_ascii=False)
        editor.load_text(self.original)
        editor.disabled = False
        self.query_one("#save", Button).disabled = False
        editor.focus()

    def on_edit_rejected(self, message: EditRejected) -> None:
        self.saving = False
        self._error(message.error)

    def _error(self, error: str | None) -> None:
        box = self.query_one("#edit-error", Static)
        box.update(error or "")
        box.set_class(bool(error), "-shown")

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        if self.record is None or self.saving:
            return
        editor = self.query_one("#editor", TextArea)
        try:
            value = json.loads(editor.text)
        except json.JSONDecodeError as exc:
            self._error(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; nothing was saved")
            editor.move_cursor((exc.lineno - 1, max(0, exc.colno - 1)))
            editor.focus()
            return
        self.saving = True
        self._error(None)
        self.query_one("#edit-error", Static).update("checking the step's gates…")
        self.save(value, self.query_one("#edit-comment", Input).value.strip() or None)

    @work(thread=True, exit_on_error=False)
    def save(self, value: object, comment: str | None, rerun_side_effects: bool = False,
             force: bool = False, checked: object = None) -> None:
        from orchestrator.core.errors import EditRefusedError

        try:
            if not rerun_side_effects and self.step is not None and actions.is_fix(self.app.store, self.run_id,
                                                                                   self.step):
                effects = actions.fix_side_effects(self.app.store, self.run_id, self.step, "edit")
                if effects:
                    self.app.call_from_thread(self._confirm_side_effects, value, comment, effects)
                    return
            decision = actions.decide(self.app.store, self.run_id, "edit", step=self.step, output=value,
                                      comment=comment, reviewer=self.app.reviewer,
                                      rerun_side_effects=rerun_side_effects, force=force, checked=checked)
        except EditRefusedError as exc:
            self.app.call_from_thread(self._confirm_force, value, comment, rerun_side_effects, exc)
            return
        except Exception as exc:
            self.post_message(EditRejected(_error_text(exc)))
            return
        self.post_message(DecisionMade(decision))

    def _confirm_side_effects(self, value: object, comment: str | None, effects: list[str]) -> None:
        """Steps downstream that acted on the world act again only if the reviewer says so."""
        from tui.screens.confirm import ConfirmScreen

        def answered(answer: str | None) -> None:
            if answer is None:
                self.saving = False
                self._error("not saved: the steps with side effects would have run again")
            else:
                self.save(value, comment, True)

        self.app.push_screen(
            ConfirmScreen("Re-run steps with side effects?",
                          f"Fixing step {self.step} runs again steps that already acted: {', '.join(effects)}. "
                          "The choice is recorded in the review.", confirm_label="Re-run them",
                          ask_comment=False, cursor_blink=self.app.cursor_blink),
            answered)

    def _confirm_force(self, value: object, comment: str | None, rerun_side_effects: bool,
                       refused: EditRefusedError) -> None:
        """The gates refused the output: show why, and store it only if the reviewer overrides them."""
        from tui.screens.force_edit import ForceEditScreen

        why = f"the edited output fails its checks: {'; '.join(refused.failing)}"
        self._error(f"{why}; store it anyway?")

        def answered(force: bool | None) -> None:
            if force:
                self.query_one("#edit-error", Static).update("storing the edit, recorded as forced…")
                self.save(value, comment, rerun_side_effects, True, refused.checked)  # judged once, not twice
            else:
                self.saving = False
                self._error(f"not saved: {why} (ctrl+s asks again)")

        self.app.push_screen(ForceEditScreen(str(self.step), refused.failing), answered)

    def on_decision_made(self, _message: DecisionMade) -> None:
        # The message bubbles on to the app, which continues the run.
        self.saving = False
        self.dismiss()

    def action_reset(self) -> None:
        if self.record is not None:
            self.query_one("#editor", TextArea).load_text(self.original)
            self._error(None)

    @on(Button.Pressed, "#back")
    def action_back(self) -> None:
        """Leave; if the output was changed, ask first so a stray escape loses nothing."""
        from tui.screens.confirm import ConfirmScreen

        if self.record is None or self.query_one("#editor", TextArea).text == self.original:
            self.dismiss()
            return

        async def discard(answer: str | None) -> None:
            # Textual awaits the callback, so the screen is popped before the callback completes
            if answer is not None:
                await self.dismiss()

        self.app.push_screen(
            ConfirmScreen("Discard the edited output?", "Nothing has been saved; the step stays paused.",
                          confirm_label="Discard", ask_comment=False),
            discard)


def _error_text(exc: Exception) -> str:
    from orchestrator.core.errors import OrchestratorError

    if isinstance(exc, OrchestratorError):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (nothing was saved)"
