"""Decisions on a tool call an LLM step paused at (a tool marked ``approve: true``).

Unlike a decision on a failed gate, none of them ends the step: approve, edit and reject are each
stored as a review of the pause (nothing else), and the step runs again from the conversation
stored with the pause: the call runs with its arguments (approve) or the edited ones (edit), or
the model reads the reviewer's reason as the tool's answer (reject), and the tool loop goes on.
So a rejected call continues the run rather than rejecting it; ``retry`` asks the model afresh.
"""

from __future__ import annotations

from typing import Any

from orchestrator.bind.approvals import edited_arguments, proposal_mismatches
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.core import jsonio
from orchestrator.core.errors import ReviewError
from orchestrator.spec.records import StepRecordView
from orchestrator.store import Lease, NewReview


def check_arguments(workflow: BoundWorkflow, rec: StepRecordView, edited: Any) -> Any:
    """The edited arguments of the paused call, as plain JSON, once the tool's own parameters accept them;
    a ReviewError (nothing stored) says what does not fit."""
    from pydantic import ValidationError

    from orchestrator.llm.tools import describe_tool

    try:
        arguments = jsonio.output_to_plain(edited_arguments(edited))
    except jsonio.NotSerializableError as exc:
        raise ReviewError(f"the edited arguments cannot be stored as JSON: {exc}") from None
    name = rec.output.get("tool") if isinstance(rec.output, dict) else None
    call_id = rec.output.get("call_id") if isinstance(rec.output, dict) else None
    problems = proposal_mismatches(edited, name, call_id)
    if problems:
        raise ReviewError(f"the edit of the call waiting in step {rec.unit!r} {' and '.join(problems)}; an edit "
                          "changes only the arguments of the waiting call (name its tool and call id, or leave "
                          "them out); nothing was changed")
    tools = getattr(workflow.step(rec.step_id).function.fn, "tools", ())
    spec = next((s for s in map(describe_tool, tools) if s.name == name), None)
    if spec is None:
        raise ReviewError(f"step {rec.unit!r} no longer has a tool named {name!r}; nothing was changed")
    try:
        spec.arguments_model.model_validate(arguments)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        raise ReviewError(f"the edited arguments of the call of tool {name!r} in step {rec.unit!r} do not fit "
                          f"the tool: {errors}; nothing was changed") from None
    return {"tool": name, "arguments": arguments, "call_id": call_id}


def review_of(rec: StepRecordView, decision: str, reviewer: str, comment: str | None,
              output_after: Any = None) -> NewReview:
    return NewReview(rec.run_id, rec.id, rec.unit, decision=decision, reviewer=reviewer, comment=comment,
                     output_before=rec.output, output_after=output_after)


def continuing(lease: Lease | None) -> dict[str, Any]:
    """The keyword arguments of a decision that continues the run (under ``lease`` when given)."""
    return {"lease": lease, "run_status": "running"}
