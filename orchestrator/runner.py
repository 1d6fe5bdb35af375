"""Start, resume and continue runs: the functions every face (CLI, TUI, worker) calls.

A stored run carries its workflow definition and source path, so any process can pick it up:
the definition is re-validated and its callables are resolved again next to the source file.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from orchestrator.errors import ReviewError, SpecError, StoreMismatchError
from orchestrator.executor import EventHook, Executor, RunResult
from orchestrator.inputs import resolve_inputs
from orchestrator.model import WorkflowSpec
from orchestrator.spec import check_spec, load_workflow
from orchestrator.store import Store


def spec_for_run(store: Store, run_id: str) -> tuple[WorkflowSpec, int]:
    """The workflow a run was started with, bound to callables again (for resume and review)."""
    run = store.get_run(run_id)
    definition, source = store.workflow_definition(run.workflow_id)
    if source and Path(source).suffix == ".py" and Path(source).exists():
        spec = load_workflow(source)
    else:
        spec = WorkflowSpec.model_validate(definition)
        spec._source = source
        problems = check_spec(spec, path=source or f"<stored workflow {run.workflow}>")
        if problems:
            raise SpecError(problems)
    if spec.definition() != definition:
        # The Python file changed since the run started: resume under the stored definition.
        stored = WorkflowSpec.model_validate(definition)
        stored._source = source
        problems = check_spec(stored, path=source or run.workflow)
        if problems:
            raise StoreMismatchError(f"run {run_id} was started with a different version of {run.workflow!r} "
                                     f"that no longer loads: {problems[0]}")
        spec = stored
    return spec, run.workflow_id


def start_run(store: Store, spec: WorkflowSpec, given_inputs: dict[str, Any], *, max_concurrency: int = 8,
              on_event: EventHook | None = None, run_id_hook: Callable[[str], None] | None = None) -> RunResult:
    """Convert inputs, create the run and execute it to its end or first pause."""
    inputs = resolve_inputs(spec, given_inputs)
    executor = Executor(store, spec, max_concurrency=max_concurrency, on_event=on_event)
    return anyio.run(lambda: executor.start(inputs, run_id_hook=run_id_hook))


def _live_owner(owner: str | None) -> str | None:
    """The owner token if it names another live process on this host, else None."""
    if not owner or ":" not in owner:
        return None
    host, _, pid_text = owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return None
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return owner
    return owner


def continue_run(store: Store, run_id: str, *, max_concurrency: int = 8,
                 on_event: EventHook | None = None) -> RunResult:
    """Resume a run from its stored records (after a crash, a pause or a review decision).

    A run still marked ``running`` by a live process on this host is refused, so two processes
    never execute the same run; one whose process died (SIGKILL, power loss) is taken over.
    """
    run = store.get_run(run_id)
    if run.status == "running":
        owner = _live_owner(store.run_owner(run_id))
        if owner is not None:
            raise ReviewError(f"run {run_id} is being executed by process {owner}; "
                              "wait for it to finish or stop that process first")
    spec, workflow_id = spec_for_run(store, run_id)
    executor = Executor(store, spec, max_concurrency=max_concurrency, on_event=on_event, workflow_id=workflow_id)
    return anyio.run(executor.resume, run_id)
