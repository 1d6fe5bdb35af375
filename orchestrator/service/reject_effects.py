"""What a rejection will do, said before a reviewer confirms it.

A rejection means different things for different pauses (see :func:`orchestrator.service.review.reject`):
at a pause of a mapped instance, or inside an instance's child run, it ends that instance and the run goes
on; at another failed gate or approval step it ends the run, and the runs above it when the pause is inside a
child, and cannot be undone; at a tool call it only refuses that call (the model is told so and its step goes
on).
A face that asks for confirmation shows this text, so the question says exactly what confirming does.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.bind.approvals import pause_kind
from orchestrator.service.rejection import ended_instance_on
from orchestrator.service.review import paused_record
from orchestrator.service.review_tree import locate
from orchestrator.spec.records import split_path
from orchestrator.store import Store


@dataclass(frozen=True)
class RejectEffect:
    """A confirmation's title and body for rejecting one pause."""

    title: str
    body: str
    ends_run: bool
    """False for a refused tool call: the run goes on."""


def reject_effect(store: Store, run_id: str, step: str | None = None) -> RejectEffect:
    """What rejecting the pause ``step`` of ``run_id`` (a unit, a path into a child run, or None for the run's
    only pause) will do; a ReviewError when there is no such pause, as the rejection itself would raise."""
    target = locate(store, run_id, step)
    rec = paused_record(store, target.run_id, target.step)
    where = (target.path or rec.unit) if target.nested else rec.unit
    kind = pause_kind(rec.error_type, rec.step_type)
    if kind == "tool_call":
        tool = rec.output.get("tool") if isinstance(rec.output, dict) else None
        return RejectEffect(
            f"Reject the call of tool {tool!r} in run {run_id}?",
            f"The tool is not called. The model of step {where} is told the call was refused (your comment is "
            "its reason) and the step goes on; the run continues.", ends_run=False)
    undo = "This cannot be undone."
    skipped = "steps that never ran are recorded as skipped."
    instance = ended_instance_on(where)
    if instance is not None:
        what = "its proposal is not carried out, " if kind == "approval" else ""
        return RejectEffect(
            f"Reject {where} of run {run_id}?",
            f"Instance {instance} ends as rejected ({what}its consumers read null) and the run goes on with the "
            f"others. {undo}", ends_run=False)
    if target.nested:
        outer = split_path(where)[0]
        what = "its proposal is not carried out and " if kind == "approval" else ""
        return RejectEffect(
            f"Reject run {run_id}?",
            f"Step {where} waits inside a child run: {what}the child run ends as rejected, and so does every run "
            f"above it, this one at step {outer}; {skipped} {undo}", ends_run=True)
    if rec.iteration is not None:
        return RejectEffect(
            f"Reject run {run_id}?",
            f"The whole run ends as rejected at iteration {where}, not only this iteration; the results of the "
            f"others are kept and {skipped} {undo}", ends_run=True)
    if kind == "approval":
        return RejectEffect(
            f"Reject run {run_id}?",
            f"The proposal of approval step {where} is not carried out: the run ends as rejected there; "
            f"{skipped} {undo}", ends_run=True)
    return RejectEffect(f"Reject run {run_id}?",
                        f"The run ends as rejected at step {where}; {skipped} {undo}", ends_run=True)
