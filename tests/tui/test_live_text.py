"""What the run screen's live panel holds, built from a continuation's events (no Textual involved)."""

from __future__ import annotations

from orchestrator.spec.events import StepFinished, StepStarted, Token
from orchestrator.spec.model import StepStatus
from tui.live_text import StreamedText


def token(text: str, step: str = "draft", *, attempt: int = 1, call: int = 1, index: int | None = None,
          run: str = "r1") -> Token:
    return Token(run_id=run, step_id=step, attempt=attempt, call=call, text=text, index=index)


def finished(step: str = "draft", status: StepStatus = "succeeded", run: str = "r1") -> StepFinished:
    return StepFinished(run_id=run, step_id=step, status=status, attempt=1, duration=0.1)


def shown(streamed: StreamedText, run: str = "r1") -> list[tuple[str, str, str | None]]:
    return [(a.unit, a.text, a.ended) for a in streamed.of(run)]


def test_pieces_of_one_answer_are_joined_per_unit_and_run() -> None:
    streamed = StreamedText()
    for event in (token("Hel"), token("lo", index=0, step="each"), token("lo"), token("other", run="r2")):
        assert streamed.apply(event)
    assert shown(streamed) == [("draft", "Hello", None), ("each[0]", "lo", None)]
    assert shown(streamed, "r2") == [("draft", "other", None)]


def test_a_finished_answer_stays_until_another_unit_writes() -> None:
    streamed = StreamedText()
    streamed.apply(token("first answer"))
    assert streamed.apply(finished())
    assert shown(streamed) == [("draft", "first answer", "succeeded")]
    streamed.apply(token("next", step="reply"))
    assert shown(streamed) == [("reply", "next", None)]


def test_a_tool_turn_or_retry_starts_the_text_again() -> None:
    streamed = StreamedText()
    streamed.apply(token("calling a tool"))
    streamed.apply(token("the answer", call=2))
    assert shown(streamed) == [("draft", "the answer", None)]
    streamed.apply(finished(status="failed"))
    assert streamed.apply(StepStarted(run_id="r1", step_id="draft", attempt=2, started_at=0.0))
    assert shown(streamed) == []
    streamed.apply(token("again", attempt=2))
    assert shown(streamed) == [("draft", "again", None)]


def test_events_of_steps_that_never_streamed_change_nothing() -> None:
    streamed = StreamedText()
    assert not streamed.apply(StepStarted(run_id="r1", step_id="fetch", attempt=1, started_at=0.0))
    assert not streamed.apply(finished("fetch"))
    assert shown(streamed) == []


def test_a_new_continuation_forgets_the_last_ones_text() -> None:
    streamed = StreamedText()
    streamed.apply(token("old"))
    streamed.forget("r1")
    assert shown(streamed) == []
