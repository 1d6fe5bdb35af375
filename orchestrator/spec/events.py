"""What the executor and the code that finishes a run report while they work: a closed set.

Listeners (the CLI's live progress, the TUI, tracing) receive one of these dataclasses and
match on its type; adding a field to an event never breaks a listener that ignores it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.spec.context import ModelCall
from orchestrator.spec.model import RunStatus, StepStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    run_id: str
    workflow: str
    steps: tuple[str, ...]
    """Every step, in topological order."""
    resumed: bool = False
    parent_run_id: str | None = None
    """For a child run (a ``workflow:`` step's): the run that started it; its events come in the same stream."""
    parent_step: str | None = None
    """For a child run: the parent's unit that started it (``research``, ``per_ticket[3]``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted:
    run_id: str
    step_id: str
    attempt: int
    started_at: float
    agent: str = ""
    step_type: str = ""
    index: int | None = None
    """The item of a ``for_each`` instance; None for a plain step."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a plain step (or a loop's result)."""

    @property
    def unit(self) -> str:
        return _unit(self.step_id, self.index, self.iteration)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One gate's verdict on an attempt, as listeners see it."""

    gate: str
    passed: bool
    score: float | None
    reason: str
    severity: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinished:
    run_id: str
    step_id: str
    status: StepStatus
    attempt: int
    duration: float
    error: str | None = None
    gates: int = 0
    failed_gates: int = 0
    verdicts: tuple[Verdict, ...] = ()
    llm: Mapping[str, Any] | None = None
    """The attempt's model call record (LLM steps): provider, model, usage, turns..."""
    model_calls: tuple[ModelCall, ...] = ()
    """Every model call of the attempt (the step's, its gates', ``ctx.llm``'s) with its real start and end."""
    index: int | None = None
    """The item of a ``for_each`` instance; None for a plain step (or a mapped step's collected list)."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a plain step (or a loop's result)."""
    awaiting_approval: bool = False
    """The step waits for a person's approval (an approval step, a tool call marked ``approve``): its status
    says ``gate_failed`` as every waiting record's does, but no check failed."""
    waiting_in_child: bool = False
    """The step (a ``workflow:`` step) waits on a pause inside its child run: it failed nothing itself."""

    @property
    def unit(self) -> str:
        return _unit(self.step_id, self.index, self.iteration)

    @property
    def shown_status(self) -> str:
        """The status as faces print it: ``waiting`` for an approval or a pause inside the child run, the
        stored status otherwise."""
        return "waiting" if self.awaiting_approval or self.waiting_in_child else self.status


@dataclass(frozen=True, slots=True, kw_only=True)
class Token:
    """A piece of an LLM step's answer as the model generates it (a step with ``stream: true``, or every LLM
    step when the run streams tokens). The pieces of one model call, concatenated in order, are the text
    stored for it (the call's ``response``); a step's tool turns and re-asks are calls of their own."""

    run_id: str
    step_id: str
    attempt: int
    call: int
    """The model call of the attempt it belongs to (1-based: the first answer, then a tool turn or a re-ask)."""
    text: str
    index: int | None = None
    """The item of a ``for_each`` instance; None for a plain step."""
    iteration: int | None = None
    """The iteration of a ``repeat:`` step (1-based); None for a plain step."""

    @property
    def unit(self) -> str:
        return _unit(self.step_id, self.index, self.iteration)


def _unit(step_id: str, index: int | None, iteration: int | None) -> str:
    """``summarize[7]``, ``improve#2``, ``summarize[7]#2`` or the step id (as ``records.unit_name`` spells it)."""
    unit = step_id if index is None else f"{step_id}[{index}]"
    return unit if iteration is None else f"{unit}#{iteration}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    run_id: str
    status: RunStatus
    paused_steps: tuple[str, ...] = ()
    failed_steps: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeScored:
    run_id: str
    value: float
    correct: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeFailed:
    """The evaluator raised; the finished run is kept."""

    run_id: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributionFailed:
    """The automatic backward trace of an incorrect outcome raised; the run is kept."""

    run_id: str
    error: str


Event = (RunStarted | StepStarted | StepFinished | Token | RunFinished | OutcomeScored | OutcomeFailed
         | AttributionFailed)
"""Every event there is."""

EventHook = Callable[[Event], None]
"""A listener: called synchronously on the executor's event loop, so keep it quick."""


class ShieldedListener:
    """A listener whose errors never change what happened.

    Events report what is already decided (a step's record is committed before its
    ``StepFinished``), so a listener that raises, a user's callback or the OpenTelemetry
    exporter, must not turn a committed step into a failed run. Its first error is logged, with
    the event it broke on; later ones are counted and not repeated. Only ``Exception`` is caught:
    ``KeyboardInterrupt`` from a listener still stops the execution, as Ctrl-C does.
    """

    __slots__ = ("listener", "errors")

    def __init__(self, listener: EventHook) -> None:
        self.listener = listener
        self.errors = 0
        """How many events the listener raised on."""

    def __call__(self, event: Event) -> None:
        try:
            self.listener(event)
        except Exception as exc:
            self.errors += 1
            if self.errors == 1:
                logging.getLogger("orchestrator.events").warning(
                    "event listener %s raised %s: %s (on %s of run %s); the run goes on unchanged, and later "
                    "errors of this listener are not reported", _name(self.listener), type(exc).__name__, exc,
                    type(event).__name__, event.run_id)


def shielded(listener: EventHook | None) -> EventHook | None:
    """``listener`` as a :class:`ShieldedListener` (None stays None; shielding twice changes nothing)."""
    if listener is None or isinstance(listener, ShieldedListener):
        return listener
    return ShieldedListener(listener)


def _name(listener: object) -> str:
    return getattr(listener, "__qualname__", None) or type(listener).__qualname__
