"""A workflow whose steps that act on the world do not act: what an experiment executes.

An experiment re-runs a workflow on stored examples; sending the e-mails, filing the tickets or paying
the invoices of last month's runs again would be a disaster. As in replays, a step that declares
``side_effects: true`` (or an ``llm`` step with a tool marked ``approve: true``) calls its ``simulate``
dry run instead; without one it fails at once, naming itself (``blocked by STEP: ...``), and is not
retried. ``--rerun-side-effects`` lets an experiment act, on purpose.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from orchestrator.bind.approvals import gated_tools
from orchestrator.bind.binding import BoundStep, BoundWorkflow
from orchestrator.bind.invoke import StepFunction


class SideEffectBlocked(RuntimeError):
    """A side-effecting step without ``simulate`` was reached in an experiment run."""


class _NeverRaised(Exception):
    """The only exception a blocked step would retry on: it never is, so the block is not retried."""


def acts(step: BoundStep) -> bool:
    """Whether a step may act on the world: ``side_effects: true``, or a tool that needs approval."""
    return step.spec.side_effects or bool(gated_tools(step.spec))


def _blocker(step_id: str) -> StepFunction:
    def blocked(**_kwargs: Any) -> Any:
        raise SideEffectBlocked(f"blocked by {step_id}: a side-effecting step with no simulate; an experiment never "
                                "acts (give the step `simulate:`, or run with --rerun-side-effects)")

    return StepFunction(blocked, takes_ctx=False, is_async=False)


def without_side_effects(workflow: BoundWorkflow) -> BoundWorkflow:
    """``workflow`` with every acting step simulated or blocked, its child workflows' too."""
    changes: dict[str, BoundStep] = {}
    for sid, step in workflow.steps.items():
        if step.child is not None:
            child = without_side_effects(step.child)
            if child is not step.child:
                changes[sid] = replace(step, child=child)
            continue
        if not acts(step):
            continue
        if step.simulate is not None:
            changes[sid] = replace(step, function=step.simulate)
        else:
            changes[sid] = replace(step, function=_blocker(sid), retry_on=(_NeverRaised,))
    return workflow.with_steps(changes) if changes else workflow
