"""The workflow a stored run was started with, bound again: the one loader for resume, review and replay.

A run stores its workflow definition and source path, so any process can pick it up: a Python
source file is imported again (its functions are the objects the definition refers to), and a
YAML definition is re-bound next to its source file. When the file changed since the run
started, the run continues under the definition it was started with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.bind.binding import BoundWorkflow, bind
from orchestrator.bind.loader import child_loader, python_workflows
from orchestrator.core.errors import SpecError, StoreMismatchError
from orchestrator.spec.model import WorkflowSpec
from orchestrator.store.base import RunStore


def load_run_workflow(store: RunStore, run_id: str) -> tuple[BoundWorkflow, int]:
    """The bound workflow of a stored run and its stored workflow id.

    A Python file may define several workflows (a parent and the child workflows it runs): the one
    whose definition is the stored one is taken, with its objects. Child workflows of ``workflow:``
    steps are bound from their files as they are now (a child run already started continues under the
    definition stored with it)."""
    run = store.get_run(run_id)
    definition, source = store.workflow_definition(run.workflow_id)
    stored = WorkflowSpec.model_validate(definition)
    objects: Mapping[str, Any] = {}
    if source and Path(source).suffix == ".py" and Path(source).exists():
        for found in python_workflows(Path(source)).values():
            current = found if isinstance(found, WorkflowSpec) else found.spec
            if current.definition() == definition:
                stored, objects = current, ({} if isinstance(found, WorkflowSpec) else found.objects)
                break
    try:
        return bind(stored, source=source, objects=objects, path=source or f"<stored workflow {run.workflow}>",
                    load_child=child_loader(os.path.dirname(source) if source else None)), run.workflow_id
    except SpecError as exc:
        if source and Path(source).suffix == ".py":
            raise StoreMismatchError(f"run {run_id} was started with a different version of {run.workflow!r} "
                                     f"that no longer loads: {exc.problems[0]}") from None
        raise
