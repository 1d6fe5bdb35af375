"""Messages between the review app's workers, screens and widgets.

Thread workers post these back to the event loop (``post_message`` is thread-safe), so no
widget ever waits on the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from orchestrator.service.labels import LabelResult
    from orchestrator.service.review import Decision
    from orchestrator.spec.events import Event
    from orchestrator.spec.records import StepRecordView
    from tui.queries import RunDetail, RunsPage


@dataclass
class RunsLoaded(Message):
    """A fresh page of runs for the runs screen, and the filter and length it was read with."""

    page: RunsPage
    query: RunsWanted


@dataclass(frozen=True)
class RunsWanted:
    """What the runs screen reads: a status (None: any), a part of a workflow name, how many runs."""

    status: str | None
    workflow: str
    limit: int


@dataclass
class RunLoaded(Message):
    """A fresh detail of one run for the run screen."""

    detail: RunDetail


@dataclass
class LoadFailed(Message):
    """A store read failed; the screen keeps what it showed and says why."""

    error: str


@dataclass
class DecisionMade(Message):
    """A review decision was stored; the app continues the run if the decision says so."""

    decision: Decision


@dataclass
class ActionFailed(Message):
    """A decision or label did not apply (ReviewError, InputError, ...); nothing was stored."""

    run_id: str
    error: str


@dataclass
class Labelled(Message):
    """A human outcome was stored for a run."""

    result: LabelResult


@dataclass
class RunProgress(Message):
    """An executor event (a step started or finished, ...) of a run continuing in the background."""

    run_id: str
    event: Event


@dataclass
class ContinuationEnded(Message):
    """A background continuation returned: its final status, or the error that stopped it."""

    run_id: str
    status: str | None
    paused_steps: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class RunUnchanged(Message):
    """The run screen's refresh found the run as it was last read (:func:`tui.queries.run_fingerprint`)."""


@dataclass
class StoreChanged(Message, bubble=False):
    """Sent by the app to the active screen: something about ``run_id`` (None: any run) changed."""

    run_id: str | None = None
    decided: str | None = None
    """The unit a decision just stored was on, as named from ``run_id`` (the screen moves to the next one)."""
    continues: bool = False
    """The decision continues the run in this app: the screen reads it when the continuation ends."""
    progress: Event | None = None
    """An event of a run continuing in this app: what changed is in it, so no screen reads the store for it."""


@dataclass
class LiveTextChanged(Message, bubble=False):
    """Sent by the app to the active screen: the text an LLM step of ``run_id`` is writing grew, began or ended
    (``app.streamed`` holds it)."""

    run_id: str


@dataclass
class JumpToStep(Message):
    """The reviewer asked to see an upstream step."""

    step_id: str


@dataclass
class EditRejected(Message):
    """The edited output was not stored: invalid JSON, failing gates or a run decided meanwhile."""

    error: str


@dataclass
class EditTargetLoaded(Message):
    """The paused record an edit replaces, and the gates its new output must pass."""

    record: StepRecordView
    gates: list[str]
