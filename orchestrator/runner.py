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


def enqueue_run(store: Store, spec: WorkflowSpec, given_inputs: dict[str, Any]) -> str:
    """Store a ``queued`` run for a worker to claim; inputs are checked now, not later."""
    inputs = resolve_inputs(spec, given_inputs)
    workflow_id = store.register_workflow(spec.name, str(spec.version), spec.definition(), spec.source)
    return store.create_run(workflow_id, spec.name, inputs, status="queued", owner=None)


def work(store: Store, *, once: bool = False, poll: float = 1.0, max_runs: int | None = None,
         max_concurrency: int = 8, on_event: EventHook | None = None,
         on_result: Callable[[RunResult], None] | None = None) -> int:
    """Claim and execute queued runs until the queue is empty (``once``) or ``max_runs`` are done.

    Several workers may share one database (PostgreSQL, or a SQLite file on one host): each run
    is claimed by exactly one of them. Paused runs whose review timed out are decided here too.
    """
    import time

    from orchestrator.executor import owner_token
    from orchestrator.review import apply_review_timeouts

    done = 0
    while max_runs is None or done < max_runs:
        run_id = store.claim_queued_run(owner_token())
        if run_id is None:
            for paused in store.list_runs(status="paused"):
                try:
                    spec, _ = spec_for_run(store, paused.run_id)
                    decided = apply_review_timeouts(store, paused.run_id, spec)
                except (SpecError, StoreMismatchError):
                    continue
                if decided and store.get_run(paused.run_id).status == "running":
                    store.set_run_status(paused.run_id, "queued", expect=["running"])
            if store.list_runs(status="queued", limit=1):
                continue
            if once:
                break
            time.sleep(poll)
            continue
        try:
            result = continue_run(store, run_id, max_concurrency=max_concurrency, on_event=on_event)
        except (SpecError, StoreMismatchError) as exc:
            store.set_run_status(run_id, "failed", error=str(exc), owner=None)
            result = RunResult(run_id, "failed", error=str(exc))
        done += 1
        if on_result is not None:
            on_result(result)
    return done
