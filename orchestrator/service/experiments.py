"""Experiments: one workflow version run on every example of a dataset version.

Each example becomes a run of kind ``experiment`` (left out of ``stats``, ``report`` and the default
``runs`` listing, which describe production traffic), linked to the experiment and its example. Runs
execute here, at most ``parallel`` at once, each on its own thread and event loop against the one
store, or are queued for workers (``queue``). Gates, the outcome evaluator and the backward trace of an
incorrect outcome work as in any run. A failing gate pauses the run as always, but nobody waits for a
review: the run ends ``paused`` (it counts as incorrect in a comparison) and stays there for inspection.

Steps that act on the world are simulated or blocked (:mod:`orchestrator.bind.side_effects`) unless
``rerun_side_effects``; with ``reuse="unchanged"`` an example taken from a stored run starts with that
run's records of the steps that did not change (:mod:`orchestrator.service.experiment_reuse`).
Every example is checked against the workflow's inputs before anything is stored.
"""

from __future__ import annotations

import functools
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.side_effects import without_side_effects
from orchestrator.bind.threads import DEFAULT_CONCURRENCY
from orchestrator.core.errors import InputError, OrchestratorError
from orchestrator.engine.event_loops import run_blocking
from orchestrator.engine.executor import Executor, new_lease, owner_token
from orchestrator.engine.outcomes import trace_incorrect_outcome
from orchestrator.engine.run_state import RunResult
from orchestrator.service.experiment_reuse import ReusePlan, SourceRuns, copy_reused
from orchestrator.spec.datasets import ExampleView, ExperimentRunLink, ExperimentView, NewExperiment
from orchestrator.spec.inputs import resolve_inputs
from orchestrator.store import Lease, NewRun, Store

KIND = "experiment"
"""The run kind of an experiment's runs."""

Reuse = Literal["unchanged", "none"]
REUSE_POLICIES = ("unchanged", "none")


@dataclass(frozen=True)
class ExperimentOptions:
    """How an experiment runs."""

    name: str | None = None
    """Unique; None: ``DATASET-WORKFLOW-xxxxxx``."""
    parallel: int = 4
    """Runs executing at once in this process."""
    queue: bool = False
    """Store the runs ``queued`` for workers instead of executing them here."""
    reuse: Reuse = "unchanged"
    rerun_side_effects: bool = False
    max_concurrency: int = DEFAULT_CONCURRENCY
    """Steps executing at once inside each run."""
    version: int | None = None
    """The dataset version to run (None: the latest)."""


@dataclass
class ExperimentResult:
    """An experiment as it ended here: each example's run and what reuse saved."""

    experiment: ExperimentView
    runs: list[tuple[ExampleView, str, str]] = field(default_factory=list)
    """(example, run id, status) in example order."""
    summary: dict[str, Any] = field(default_factory=dict)


ProgressHook = Callable[[int, int], None]
"""Told ``(finished, total)`` after each run ends."""


def _checked(options: ExperimentOptions) -> None:
    if options.reuse not in REUSE_POLICIES:
        raise InputError(f"--reuse must be one of {list(REUSE_POLICIES)}; got {options.reuse!r}")
    if options.parallel < 1:
        raise InputError(f"--parallel must be at least 1; got {options.parallel}")
    if options.queue and options.rerun_side_effects:
        raise InputError("--rerun-side-effects needs the runs executed here: workers never let an experiment run "
                         "act; leave out --queue")


def run_experiment(store: Store, workflow: BoundWorkflow, dataset: str,
                   options: ExperimentOptions = ExperimentOptions(), *,
                   on_progress: ProgressHook | None = None) -> ExperimentResult:
    """Run ``workflow`` on every example of ``dataset`` (a version of it) and store the experiment.

    InputError (exit 2), with nothing stored, for an unknown or empty dataset, a taken name, bad options, or
    an example whose inputs the workflow refuses (named by its position in the dataset)."""
    _checked(options)
    view = store.dataset(dataset)
    examples = store.examples(dataset, version=options.version)
    if not examples:
        raise InputError(f"dataset {dataset!r} (version {options.version or view.version}) has no examples")
    inputs = []
    for example in examples:
        try:
            inputs.append(resolve_inputs(workflow.spec, example.inputs))
        except InputError as exc:
            raise InputError(f"dataset {dataset!r} example {example.position}: {exc}") from None
    name = options.name or f"{dataset}-{workflow.name}-{secrets.token_hex(3)}"
    workflow_id = store.register_workflow(workflow.name, str(workflow.spec.version), dict(workflow.definition),
                                          workflow.source, workflow.content_hash)
    params = {"reuse": options.reuse, "parallel": options.parallel, "queue": options.queue,
              "rerun_side_effects": options.rerun_side_effects}
    experiment = store.create_experiment(NewExperiment(name, dataset, options.version or view.version, workflow_id,
                                                       workflow.name, params))
    executed = workflow if options.rerun_side_effects else without_side_effects(workflow)
    sources = SourceRuns(store, workflow) if options.reuse == "unchanged" else None
    runner = _Runner(store, executed, workflow_id, experiment.name, sources, options)
    result = ExperimentResult(experiment)
    if options.queue:
        for example, given in zip(examples, inputs, strict=True):
            run_id = runner.prepare(example, given, status="queued")
            result.runs.append((example, run_id, "queued"))
            if on_progress is not None:
                on_progress(len(result.runs), len(examples))
    else:
        done = 0
        lock = threading.Lock()

        def one(pair: tuple[ExampleView, dict[str, Any]]) -> tuple[ExampleView, str, str]:
            nonlocal done
            example, given = pair
            try:
                run_id, status = runner.execute(example, given)
            finally:
                with lock:
                    done += 1
                    if on_progress is not None:
                        on_progress(done, len(examples))
            return example, run_id, status

        with ThreadPoolExecutor(max_workers=options.parallel, thread_name_prefix="orchestrator experiment") as pool:
            result.runs = list(pool.map(one, zip(examples, inputs, strict=True)))
    from orchestrator.service.comparison import experiment_summary

    result.summary = experiment_summary(store, experiment.name)
    store.finish_experiment(experiment.name, "queued" if options.queue else "finished", result.summary)
    result.experiment = store.experiment(experiment.name)
    return result


class _Runner:
    """Creates and executes the run of one example; shared by the threads of one experiment."""

    def __init__(self, store: Store, workflow: BoundWorkflow, workflow_id: int, experiment: str,
                 sources: SourceRuns | None, options: ExperimentOptions) -> None:
        self.store = store
        self.workflow = workflow
        self.workflow_id = workflow_id
        self.experiment = experiment
        self.sources = sources
        self.options = options
        self.lock = threading.Lock()

    def plan(self, example: ExampleView, inputs: dict[str, Any]) -> ReusePlan | None:
        if self.sources is None or example.source_run_id is None:
            return None
        with self.lock:  # the per-version hash cache is shared
            return self.sources.plan(example.source_run_id, inputs)

    def prepare(self, example: ExampleView, inputs: dict[str, Any], *, status: str,
                lease: Lease | None = None) -> str:
        """Create the example's run (queued, or held under ``lease``), start it with the reused records, link it."""
        plan = self.plan(example, inputs)
        run_id = self.store.create_run(NewRun(self.workflow_id, self.workflow.name, inputs, status=status, kind=KIND,
                                              owner=owner_token() if lease is not None else None,
                                              reference=example.reference), lease=lease)
        if plan is not None:
            copy_reused(self.store, run_id, self.workflow, self.workflow_id, plan)
        self.store.link_experiment_runs(self.experiment, [ExperimentRunLink(
            example.id, run_id, reused_steps=plan.steps if plan else (),
            saved_model_calls=plan.model_calls if plan else 0, saved_tokens=plan.tokens if plan else 0,
            saved_cost=plan.cost if plan else 0.0, saved_seconds=plan.seconds if plan else 0.0)])
        return run_id

    def execute(self, example: ExampleView, inputs: dict[str, Any]) -> tuple[str, str]:
        """Run the example to its end or first pause; (run id, status). A run that cannot even start is
        stored as failed with the reason, so the experiment still accounts for its example."""
        lease = new_lease()
        run_id = self.prepare(example, inputs, status="running", lease=lease)
        lease = replace(lease, run_id=run_id)
        try:
            executor = Executor(self.store, self.workflow, max_concurrency=self.options.max_concurrency,
                                workflow_id=self.workflow_id)
            result: RunResult = run_blocking(functools.partial(executor.resume, lease))
        except OrchestratorError as exc:
            self.store.set_run_status(run_id, "failed", error=str(exc), holder=None)
            return run_id, "failed"
        trace_incorrect_outcome(self.store, self.workflow, result, None)
        return run_id, result.status
