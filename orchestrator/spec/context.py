"""The context a step function (and a gate) receives: who is running, and what is expected.

Plain data with no I/O, built by the executor. A step declares a ``ctx`` parameter to get it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.model import GateResult


@dataclass(frozen=True)
class NextNeed:
    """What one consumer of a step's output needs from it (next-step context injection)."""

    step_id: str
    agent: str
    needs: str | None = None
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "agent": self.agent, "needs": self.needs, "description": self.description}


PURPOSES = ("step", "critic", "judge", "validation")
"""What a model call is for: the step's own work (``step``, ``critic`` for a critic step), a gate judging
its output (``judge``), or a gate checking a reviewer's edit (``validation``)."""


@dataclass
class ModelCall:
    """One model call as it happened: who made it, for what, what it cost and when."""

    purpose: str
    gate: str | None
    provider: str
    model: str
    started_at: float
    ended_at: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    response: str = ""


class CallLog:
    """Every model call made during one attempt (or one edit's validation), in order.

    Whoever calls a model through the project's clients (an LLM step, a judge gate, ``ctx.llm``)
    appends here, so the attempt's record carries all of them. ``purpose`` and ``gate`` say who
    is calling right now: the executor switches them while it checks each gate.
    """

    __slots__ = ("calls", "purpose", "gate")

    def __init__(self, purpose: str = "step") -> None:
        self.calls: list[ModelCall] = []
        self.purpose = purpose
        self.gate: str | None = None

    def add(self, call: ModelCall) -> None:
        self.calls.append(call)

    @contextmanager
    def owned_by(self, purpose: str, gate: str | None) -> Iterator[None]:
        """Calls made inside the block are charged to ``purpose`` and ``gate``."""
        before = self.purpose, self.gate
        self.purpose, self.gate = purpose, gate
        try:
            yield
        finally:
            self.purpose, self.gate = before


@dataclass
class StepContext:
    """Everything a step function or gate may want to know about the attempt in progress."""

    run_id: str
    step_id: str
    workflow: str
    agent: str
    step_type: str
    attempt: int = 1
    idempotency_key: str = ""
    """Stable across retries and resumes of the same step in the same run: use it to dedupe side effects."""
    next_needs: list[NextNeed] = field(default_factory=list)
    """What the steps consuming this step's output need from it."""
    gate_feedback: list[GateResult] = field(default_factory=list)
    """On a retry caused by failing gates: the failing verdicts, so the step can do better."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The resolved keyword arguments this attempt was called with."""
    upstream: Mapping[str, Any] = field(default_factory=dict)
    """Outputs of already-completed steps of this run, by step id (gates like ``evidence`` read them)."""
    workflow_inputs: dict[str, Any] = field(default_factory=dict)
    llm_records: list[dict[str, Any]] = field(default_factory=list)
    """What this attempt's model calls recorded (prompt, response, tokens, cost, tool turns); stored with it."""
    llm_defaults: LLMConfig | None = None
    """The workflow's ``llm:`` block: what model judges and LLM steps use unless they say otherwise."""
    llm_cache: Any = None
    """A response cache LLM steps consult first (replays preload it with the original run's answers)."""
    resample: bool = False
    """Ask the model again even when the cache knows the answer (a replay that re-samples)."""
    previous: Any = None
    """On a retry (after failing gates, or a reviewer's ``retry``): the output the feedback is about."""
    calls: CallLog = field(default_factory=CallLog)
    """Every model call of this attempt (the step's, its gates', ``ctx.llm``'s), stored with its record."""
    llm: Any = None
    """A model client for step and gate code (``orchestrator.llm.client.LLMClient``): its calls are
    recorded and traced like the step's own. ``await ctx.llm.acomplete(prompt)`` or ``ctx.llm.complete``."""
    index: int | None = None
    """The item's position when this attempt is an instance of a ``for_each`` step; None otherwise."""
    iteration: int | None = None
    """The iteration (1-based) when this attempt belongs to a ``repeat:`` step; None otherwise."""
    previous_iteration: Any = None
    """On a ``repeat:`` step: the output of the iteration before this one (None on the first)."""
    tool_resume: Any = None
    """On an LLM step with tools: where its tool loop continues (``orchestrator.bind.approvals.ToolResume``: a
    decided tool call, or a checkpoint after a stop), else None."""
    checkpoint: Any = None
    """On an LLM step with tools: ``await ctx.checkpoint(state, calls)`` commits the tool loop's state around
    an approved call before the step goes on (the durable "the call ran" marker), else None."""
    on_token: Callable[[int, str], None] | None = None
    """Where an LLM step that streams sends each piece of its answer (the model call's number in the attempt,
    the text) as it arrives, on the event loop: the run's listener gets it as a ``Token`` event. None when
    nobody listens to the run."""
    stream_tokens: bool = False
    """The run streams the answer of every LLM step, not only of those with ``stream: true``."""

    def upstream_output(self, step_id: str) -> Any:
        """The recorded output of an earlier step; KeyError names the step when it has none."""
        if step_id not in self.upstream:
            raise KeyError(f"step {step_id!r} has no recorded output in run {self.run_id}")
        return self.upstream[step_id]

    def needs_text(self) -> str:
        """The injected needs rendered as prompt text, for ``llm`` steps."""
        lines = []
        for need in self.next_needs:
            parts = [p for p in (need.needs, need.description) if p]
            if parts:
                lines.append(f"- step {need.step_id!r} ({need.agent}) needs: {'; '.join(parts)}")
        return "\n".join(lines)
