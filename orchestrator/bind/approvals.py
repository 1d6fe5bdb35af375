"""Pauses that wait for a person's approval rather than for a failed gate's review.

Two things pause for approval: a ``type: approval`` step (its inputs are the proposal) and an
``llm`` step whose model called a tool marked ``approve: true`` (the call is the proposal). Both
are stored like any pause, a ``gate_failed`` record waiting for a decision, marked with
``error_type`` :data:`AWAITING_APPROVAL` so that nothing counts them as failed checks: they have no
gate verdict, add nothing to a step's gate failures in ``stats`` and give attribution no signal.

An approved, edited or rejected *tool call* does not end its step the way a decision on a gate
does: the step runs again from the conversation stored with the pause (:class:`ToolResume`) and
its tool loop goes on where it stopped. Pure data and functions: no store, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.spec.records import AWAITING_APPROVAL as AWAITING_APPROVAL
from orchestrator.spec.records import PauseKind as PauseKind
from orchestrator.spec.records import pause_kind as pause_kind

if TYPE_CHECKING:
    from orchestrator.spec.model import StepSpec

APPROVAL_MESSAGE = "waiting for approval"
"""The record's ``error_message`` for an approval step; a tool call's names the tool."""

TOOL_CHECKPOINT = "ToolCallCheckpoint"
"""``error_type`` of the ``running`` record an LLM step writes around an approved tool call: the loop's
state before the call runs (``phase: executing``) and after it ran, with its result (``phase: executed``)."""


def is_approval(error_type: str | None) -> bool:
    """Whether a waiting record waits for an approval rather than for a review of failed gates."""
    return error_type == AWAITING_APPROVAL


def is_tool_pause(error_type: str | None, step_type: str) -> bool:
    """Whether a waiting record is an LLM step's pause at a tool call (its output is the proposed call, not
    anything the step produced), rather than an approval step's (whose proposal is its output)."""
    return is_approval(error_type) and step_type != "approval"


def gated_tools(step: StepSpec) -> list[str]:
    """The names of a step's tools marked ``approve: true`` (its function's name: what the model calls)."""
    return [t.ref.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for t in step.tool_refs() if t.approve]


def waiting_words(step_type: str, error_type: str | None) -> str:
    """How faces name a waiting record: ``waiting for approval`` or ``waiting for review``."""
    if not is_approval(error_type):
        return "waiting for review"
    return "waiting for approval" if step_type == "approval" else "waiting for approval of a tool call"


class ApprovalStep:
    """The work of a ``type: approval`` step: its inputs, as one mapping, are the proposal it pauses with.

    ``output_schema`` (a pydantic model class, a JSON Schema dict or None) is what an edited proposal
    must fit; the step has no gates, since a person is its check.
    """

    def __init__(self, step_id: str, output_schema: Any = None) -> None:
        self.step_id = step_id
        self.output_schema = output_schema

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        return dict(inputs)

    def schema_errors(self, value: Any) -> list[str]:
        """Why ``value`` does not fit the step's ``output_schema`` (empty: it fits, or there is none)."""
        from orchestrator.bind.output_schema import schema_errors

        return schema_errors(self.output_schema, value)


@dataclass(frozen=True)
class ToolResume:
    """Where an LLM step's tool loop continues: the state stored with its pause or checkpoint, and the
    decision on the call it paused at (None when it continues from a checkpoint after the call ran).

    ``state`` holds ``conversation`` (the messages so far, the assistant's tool calls included),
    ``pending`` (the calls of that turn not yet answered, the one proposed first), ``round`` and ``turn``
    (the loop's position) and, on a checkpoint, ``phase``.
    """

    state: dict[str, Any]
    decision: str | None = None
    """``approve``, ``edit`` or ``reject``; None: no decision applies (a checkpoint)."""
    arguments: Any = None
    """The reviewer's arguments, on ``edit``."""
    reason: str | None = None
    """The reviewer's reason, on ``reject`` (returned to the model as the tool's result)."""

    @property
    def interrupted(self) -> bool:
        """Whether the process stopped while the approved call ran: whether it took effect is unknown."""
        return self.decision is None and self.state.get("phase") == "executing"


def edited_arguments(edited: Any) -> Any:
    """The arguments an ``edit`` of a tool call's proposal gives: the edited ``arguments`` when the edit
    is a whole proposal (``{"tool": ..., "arguments": {...}}``), else the edited value itself."""
    if isinstance(edited, dict) and "arguments" in edited and set(edited) <= {"tool", "arguments", "call_id", "note"}:
        return edited["arguments"]
    return edited


def proposal_mismatches(edited: Any, tool: str | None, call_id: str | None) -> list[str]:
    """Why an edit given as a whole proposal does not answer the waiting call (empty: it does).

    An edit replaces the waiting call's arguments and nothing else: a proposal that names another tool
    or another call id would otherwise run the waiting tool with arguments meant for something else.
    Edits of the arguments alone, and proposals that leave ``tool`` and ``call_id`` out, always answer it."""
    if not isinstance(edited, dict) or edited_arguments(edited) is edited:
        return []
    problems = []
    if "tool" in edited and edited["tool"] != tool:
        problems.append(f"names tool {edited['tool']!r}, but the waiting call is of tool {tool!r}")
    if "call_id" in edited and edited["call_id"] != call_id:
        problems.append(f"names call id {edited['call_id']!r}, but the waiting call's id is {call_id!r}")
    return problems


def tool_resume(rec_output: Any, llm: dict[str, Any] | None, decision: str | None, *, output_after: Any = None,
                comment: str | None = None) -> ToolResume | None:
    """The resume of a tool pause (a decided ``gate_failed`` record) or a checkpoint (``running``), from
    what the record stored; None when it stored no loop state (written by another version)."""
    state = (llm or {}).get("loop") if decision is not None else rec_output
    if not isinstance(state, dict) or "conversation" not in state:
        return None
    if decision == "edit":
        return ToolResume(state, "edit", arguments=edited_arguments(output_after))
    if decision == "reject":
        return ToolResume(state, "reject", reason=comment or "rejected without a reason")
    return ToolResume(state, decision)


class ToolApprovalPending(Exception):
    """Raised out of an LLM step whose model called a tool marked ``approve: true``: the step pauses with
    ``proposal`` (the call); the loop's state to continue from is in the attempt's LLM record (``loop``)."""

    def __init__(self, tool: str, proposal: dict[str, Any]) -> None:
        super().__init__(f"a call of tool {tool!r} waits for approval")
        self.tool = tool
        self.proposal = proposal
