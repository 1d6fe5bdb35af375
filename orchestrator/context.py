"""The context a step function (and a gate) receives: who is running, and what is expected.

Plain data with no I/O, built by the executor. A step declares a ``ctx`` parameter to get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.llm.config import LLMConfig
from orchestrator.model import GateResult


@dataclass(frozen=True)
class NextNeed:
    """What one consumer of a step's output needs from it (next-step context injection)."""

    step_id: str
    agent: str
    needs: str | None = None
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "agent": self.agent, "needs": self.needs, "description": self.description}


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
