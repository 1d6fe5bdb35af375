"""One entry point per question, shared by the CLI and the TUI.

- :func:`attribute` computes and stores an attribution record with any method;
- :func:`trace_view` returns the latest backward trace of a run, computing one if there is none;
- :func:`fork_run` forks a new run from any step of a stored one.
"""

from __future__ import annotations

import time
from typing import Any

from orchestrator.attribution.replay import MISSING, Evaluation, ReplayEngine, model_calls, stored_cost
from orchestrator.attribution.result import METHODS, AttributionResult, require_evaluator, save
from orchestrator.attribution.trace import select_outcome, trace_run
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.core.errors import InputError
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.spec.records import AttributionView, RunView
from orchestrator.store import Store


def ensure_explainable(store: Store, run: RunView) -> None:
    """A trace explains an outcome: refuse a run that has none yet, saying how to get one."""
    if store.outcomes(run.run_id) or run.status in ("failed", "rejected"):
        return
    if run.status in ("paused", "running", "queued"):
        raise InputError(f"run {run.run_id} is {run.status} and has no outcome to explain yet; trace it once it "
                         "has finished (a failed or rejected run needs no label)")
    raise InputError(f"run {run.run_id} ({run.status}) has no outcome to explain: workflow {run.workflow!r} has no "
                     f"evaluator score for it and nobody labelled it; label it with `orchestrator label "
                     f"{run.run_id} --incorrect` (or add `outcome: module:callable` to the workflow)")


def attribute(store: Store, run_id: str, method: str = "trace", *, by: str = "step", samples: int | None = None,
              seed: int | None = 0, workflow: BoundWorkflow | None = None, store_result: bool = True,
              outcome_id: int | None = None, otel: str | None = None) -> AttributionResult:
    """Compute one attribution record for a run's outcome and (by default) store it.

    ``method`` is ``trace``, ``counterfactual``, ``shapley`` or ``difference``; ``by`` (``step`` or
    ``agent``) applies to shapley and difference; ``samples`` forces permutation sampling. ``otel`` (else the
    OTEL_EXPORTER_OTLP_* settings) exports each replay run as a trace of its own.
    Raises InputError (exit 2) for an unknown method, a method that needs an evaluator on a
    workflow without one, or a run that is still running; NotFoundError for an unknown run.
    """
    from orchestrator.attribution.counterfactual import counterfactual
    from orchestrator.attribution.credit import BY, difference_attribution, shapley_attribution

    if method not in METHODS:
        raise InputError(f"--method must be one of {list(METHODS)}; got {method!r}")
    if by not in BY:
        raise InputError(f"--by must be one of {list(BY)}; got {by!r}")
    if by != "step" and method not in ("shapley", "difference"):
        raise InputError(f"--by {by} applies to shapley and difference; {method} attributes steps")
    if samples is not None and method != "shapley":
        raise InputError("--samples applies to --method shapley")
    run = store.get_run(run_id)
    started = time.perf_counter()
    if method == "trace":
        ensure_explainable(store, run)
        return trace_run(store, run_id, outcome_id=outcome_id, spec=workflow.spec if workflow else None,
                         store_result=store_result)
    if workflow is None:
        workflow = load_run_workflow(store, run_id)[0]
    require_evaluator(workflow)
    engine = ReplayEngine(store, run_id, workflow=workflow, otel=otel)
    if method == "counterfactual":
        result = counterfactual(store, run_id, engine=engine)
    elif method == "shapley":
        result = shapley_attribution(store, run_id, by=by, samples=samples, seed=seed, engine=engine)
    else:
        result = difference_attribution(store, run_id, by=by, engine=engine)
    outcome = select_outcome(store.outcomes(run_id), outcome_id)
    result.outcome_id = outcome.id if outcome is not None else None
    result.evidence["outcome"] = outcome.to_json() if outcome is not None else None
    result.evidence["duration_s"] = round(time.perf_counter() - started, 3)
    stored = engine.stored_runs()  # child runs' replays too: what they called and stored is this method's cost
    result.evidence.update(model_calls(store, stored))
    result.evidence["stored"] = stored_cost(store, stored)
    if store_result:
        save(store, result)
    return result


def latest_attribution(store: Store, run_id: str, method: str | None = "trace") -> AttributionView | None:
    """The newest stored attribution record of a run (of ``method``, or of any method with None)."""
    views = [v for v in store.attributions(run_id) if method is None or v.method == method]
    return views[-1] if views else None


def trace_view(store: Store, run_id: str, *, recompute: bool = False) -> AttributionView:
    """The latest backward trace of a run; one is computed and stored when there is none."""
    run = store.get_run(run_id)
    if not recompute:
        found = latest_attribution(store, run_id, "trace")
        if found is not None:
            return found
    ensure_explainable(store, run)
    result = trace_run(store, run_id)
    return stored_view(store, result)


def stored_view(store: Store, result: AttributionResult) -> AttributionView:
    """The stored record of a result, as every face prints it."""
    for view in reversed(store.attributions(result.run_id)):
        if view.id == result.attribution_id:
            return view
    raise LookupError(f"attribution {result.attribution_id} of run {result.run_id} is not stored")


def fork_run(store: Store, run_id: str, from_step: str, output: Any = MISSING, *,
             workflow: BoundWorkflow | None = None, otel: str | None = None) -> Evaluation:
    """Fork a new run (kind ``replay``) from ``from_step``; the original run is not modified. ``otel`` (else
    the OTEL_EXPORTER_OTLP_* settings) exports the fork as a trace of its own."""
    engine = ReplayEngine(store, run_id, workflow=workflow, otel=otel)
    return engine.fork(from_step, output)

