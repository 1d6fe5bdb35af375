"""A workflow orchestrator for agentic AI with built-in checkpoint gates.

Names are imported lazily so ``orchestrator --help`` does not pay for the database layer.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    # defining workflows
    "Workflow",
    "WorkflowSpec",
    "StepSpec",
    "GateSpec",
    "load_workflow",
    # what steps and gates receive and return
    "StepContext",
    "NextNeed",
    "GateResult",
    # running
    "Store",
    "Executor",
    "RunResult",
    "start_run",
    "continue_run",
    # reviewing
    "approve",
    "edit",
    "retry",
    "reject",
    # errors
    "OrchestratorError",
    "SpecError",
]

_WHERE = {
    "Workflow": "orchestrator.pyapi",
    "WorkflowSpec": "orchestrator.model",
    "StepSpec": "orchestrator.model",
    "GateSpec": "orchestrator.model",
    "GateResult": "orchestrator.model",
    "load_workflow": "orchestrator.spec",
    "StepContext": "orchestrator.context",
    "NextNeed": "orchestrator.context",
    "Store": "orchestrator.store",
    "Executor": "orchestrator.executor",
    "RunResult": "orchestrator.executor",
    "start_run": "orchestrator.runner",
    "continue_run": "orchestrator.runner",
    "approve": "orchestrator.review",
    "edit": "orchestrator.review",
    "retry": "orchestrator.review",
    "reject": "orchestrator.review",
    "OrchestratorError": "orchestrator.errors",
    "SpecError": "orchestrator.errors",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
