"""A workflow orchestrator for agentic AI with built-in checkpoint gates.

The public API, grouped by what you do with it. Names load on first use, so that
``orchestrator --help`` does not pay for the database layer; type checkers see every name's
real type through the ``TYPE_CHECKING`` imports below, which mirror ``EXPORTED_FROM`` exactly (a test
checks that they agree).

Public and private: a program may import what ``__all__`` below lists, the typed API in
:mod:`orchestrator.api`, and the gate protocol in ``gates``. Everything in the layer packages
(``core``, ``spec``, ``bind``, ``llm``, ``telemetry``, ``store``, ``engine``, ``attribution``,
``service``, ``cli``) is internal: it may move between releases without notice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.api import Orchestrator, RunDetail, RunList
    from orchestrator.bind.binding import BoundStep, BoundWorkflow, bind
    from orchestrator.bind.loader import load_workflow
    from orchestrator.bind.python_workflow import Workflow
    from orchestrator.core.errors import OrchestratorError, SpecError
    from orchestrator.engine.executor import Executor
    from orchestrator.engine.run_state import RunResult
    from orchestrator.llm.tools import ToolContext
    from orchestrator.service.review import approve, edit, reject, retry
    from orchestrator.service.runner import continue_run, start_run
    from orchestrator.spec.context import NextNeed, StepContext
    from orchestrator.spec.events import Event, RunFinished, RunStarted, StepFinished, StepStarted, Token
    from orchestrator.spec.model import GateResult, GateSpec, Repeat, StepSpec, ToolRef, WorkflowSpec
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
    "Token",
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
    "Workflow": "orchestrator.bind.python_workflow",
    "WorkflowSpec": "orchestrator.spec.model",
    "StepSpec": "orchestrator.spec.model",
    "GateSpec": "orchestrator.spec.model",
    "Repeat": "orchestrator.spec.model",
    "ToolRef": "orchestrator.spec.model",
    "GateResult": "orchestrator.spec.model",
    "load_workflow": "orchestrator.bind.loader",
    "bind": "orchestrator.bind.binding",
    "BoundWorkflow": "orchestrator.bind.binding",
    "BoundStep": "orchestrator.bind.binding",
    "StepContext": "orchestrator.spec.context",
    "NextNeed": "orchestrator.spec.context",
    "ToolContext": "orchestrator.llm.tools",
    "Store": "orchestrator.store",
    "open_store": "orchestrator.store",
    "Executor": "orchestrator.engine.executor",
    "RunResult": "orchestrator.engine.run_state",
    "start_run": "orchestrator.service.runner",
    "continue_run": "orchestrator.service.runner",
    "Event": "orchestrator.spec.events",
    "RunStarted": "orchestrator.spec.events",
    "StepStarted": "orchestrator.spec.events",
    "StepFinished": "orchestrator.spec.events",
    "Token": "orchestrator.spec.events",
    "RunFinished": "orchestrator.spec.events",
    "approve": "orchestrator.service.review",
    "edit": "orchestrator.service.review",
    "retry": "orchestrator.service.review",
    "reject": "orchestrator.service.review",
    "OrchestratorError": "orchestrator.core.errors",
    "SpecError": "orchestrator.core.errors",
}


def __getattr__(name: str) -> Any:
    if name in EXPORTED_FROM:
        return getattr(importlib.import_module(EXPORTED_FROM[name]), name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
