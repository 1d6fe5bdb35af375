"""The text LLM steps are writing right now, in runs this app continues, assembled from ``Token`` events.

Tokens are not stored, so only a continuation running inside the app can show them: the app keeps, per run,
each streaming unit's answer so far here, and the run screen's live panel shows it. No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.spec.events import Event, StepFinished, StepStarted, Token


@dataclass
class LiveAnswer:
    """One unit's model answer as far as it has been written, and whether its step has ended."""

    unit: str
    text: str = ""
    call: tuple[int, int] = (0, 0)
    """(attempt, call) the text belongs to: a retry, a tool turn or a re-ask starts a new answer."""
    ended: str | None = None
    """The step's status once it finished (the text is kept until another unit streams)."""


class StreamedText:
    """Per run, the answers streaming (or last streamed) in this app's continuations."""

    def __init__(self) -> None:
        self.by_run: dict[str, dict[str, LiveAnswer]] = {}

    def apply(self, event: Event) -> bool:
        """Take an event of a continuation; whether what a live panel of ``event.run_id`` shows changed."""
        answers = self.by_run.setdefault(event.run_id, {})
        if isinstance(event, Token):
            if any(a.ended for a in answers.values()) and event.unit not in answers:
                for unit in [u for u, a in answers.items() if a.ended]:
                    del answers[unit]  # a new step streams: the finished ones' text gives way
            answer = answers.setdefault(event.unit, LiveAnswer(event.unit))
            if answer.call != (event.attempt, event.call) or answer.ended:
                answer.text, answer.call, answer.ended = "", (event.attempt, event.call), None
            answer.text += event.text
            return True
        if isinstance(event, StepFinished) and event.unit in answers:
            answers[event.unit].ended = event.status
            return True
        if isinstance(event, StepStarted) and event.unit in answers:
            del answers[event.unit]  # the unit runs again (a retry): its old answer is gone
            return True
        return False

    def of(self, run_id: str) -> list[LiveAnswer]:
        """What the run's live panel shows: its units' answers, in the order they began."""
        return list(self.by_run.get(run_id, {}).values())

    def forget(self, run_id: str) -> None:
        """A new continuation of ``run_id`` starts: the last one's text is no longer news."""
        self.by_run.pop(run_id, None)
