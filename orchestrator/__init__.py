"""A workflow orchestrator for agentic AI with built-in checkpoint gates.

The public API, grouped by what you do with it. Names load on first use, so that
``orchestrator --help`` does not pay for the database layer; type checkers see every name's
real type through the ``TYPE_CHECKING`` imports below, which mirror ``EXPORTED_FROM`` exactly (a test
checks that they agree).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.api import Orchestrator, RunDetail, RunList
    from orchestrator.binding import BoundStep, BoundWorkflow, bind
    from orchestrator.context import NextNeed, StepContext
    from orchestrator.errors import OrchestratorError, SpecError
    from orchestrator.events import Event, RunFinished, RunStarted, StepFinished, StepStarted
    from orchestrator.executor import Executor
    from orchestrator.llm.tools import ToolContext
    from orchestrator.model import GateResult, GateSpec, Repeat, StepSpec, ToolRef, WorkflowSpec
    from orchestrator.pyapi import Workflow
    from orchestrator.review import approve, edit, reject, retry
    from orchestrator.runner import continue_run, start_run
    from orchestrator.runstate import RunResult
    from orchestrator.spec import load_workflow
    from orchestrator.store import Store, open_store

__all__ = [
    # the typed API: everything the CLI does
    "Orchestrator",
    "RunDetail",
    "RunList",
    # defining workflows
    "Workflow",
    "WorkflowSpec",
    "StepSpec",
    "GateSpec",
    "Repeat",
    "ToolRef",
    "load_workflow",
    "bind",
    "BoundWorkflow",
    "BoundStep",
    # what steps and gates receive and return
    "StepContext",
    "ToolContext",
    "NextNeed",
    "GateResult",
    # running
    "Store",
    "open_store",
    "Executor",
    "RunResult",
    "start_run",
    "continue_run",
    "Event",
    "RunStarted",
    "StepStarted",
    "StepFinished",
    "RunFinished",
    # reviewing
    "approve",
    "edit",
    "retry",
    "reject",
    # errors
    "OrchestratorError",
    "SpecError",
]

EXPORTED_FROM: dict[str, str] = {
    "Orchestrator": "orchestrator.api",
    "RunDetail": "orchestrator.api",
    "RunList": "orchestrator.api",
    "Workflow": "orchestrator.pyapi",
    "WorkflowSpec": "orchestrator.model",
    "StepSpec": "orchestrator.model",
    "GateSpec": "orchestrator.model",
    "Repeat": "orchestrator.model",
    "ToolRef": "orchestrator.model",
    "GateResult": "orchestrator.model",
    "load_workflow": "orchestrator.spec",
    "bind": "orchestrator.binding",
    "BoundWorkflow": "orchestrator.binding",
    "BoundStep": "orchestrator.binding",
    "StepContext": "orchestrator.context",
    "NextNeed": "orchestrator.context",
    "ToolContext": "orchestrator.llm.tools",
    "Store": "orchestrator.store",
    "open_store": "orchestrator.store",
    "Executor": "orchestrator.executor",
    "RunResult": "orchestrator.runstate",
    "start_run": "orchestrator.runner",
    "continue_run": "orchestrator.runner",
    "Event": "orchestrator.events",
    "RunStarted": "orchestrator.events",
    "StepStarted": "orchestrator.events",
    "StepFinished": "orchestrator.events",
    "RunFinished": "orchestrator.events",
    "approve": "orchestrator.review",
    "edit": "orchestrator.review",
    "retry": "orchestrator.review",
    "reject": "orchestrator.review",
    "OrchestratorError": "orchestrator.errors",
    "SpecError": "orchestrator.errors",
}


def __getattr__(name: str) -> Any:
    if name in EXPORTED_FROM:
        return getattr(importlib.import_module(EXPORTED_FROM[name]), name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
