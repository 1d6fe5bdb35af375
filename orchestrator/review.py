"""Review decisions on paused steps: approve, edit, retry, reject.

The CLI and the TUI both call these functions, so a decision is the same whichever face made
it. Each decision is one transaction (review row + any new step records, the skipped records of
a rejection included + run status), and a unique constraint lets exactly one of two racing
reviewers win. Approving or editing never
re-executes the paused step: it appends a record carrying the accepted output.
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from typing import Any

from gates.base import evaluate as evaluate_gate
from orchestrator import jsonio
from orchestrator.attempt import gate_row, idempotency_key
from orchestrator.binding import BoundWorkflow
from orchestrator.context import StepContext
from orchestrator.errors import ReviewError, SpecError, StoreMismatchError
from orchestrator.model import WorkflowSpec
from orchestrator.records import StepRecordView
from orchestrator.store import GateRow, NewReview, NewStepRecord, Store
from orchestrator.stored_workflow import load_run_workflow
from orchestrator.telemetry import get_tracer


@dataclass
class Decision:
    """What a review decision did, for the face that asked for it to report."""

    run_id: str
    step_id: str
    decision: str
    review_id: int
    continue_run: bool
    """True when the run should now be continued by the caller."""


def default_reviewer() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"


def continuable(store: Store, run_id: str) -> tuple[BoundWorkflow, int]:
    """The run's workflow, bound again; a decision that continues the run is refused (and nothing
    stored) when the run could not continue, e.g. its step function was renamed since."""
    try:
        return load_run_workflow(store, run_id)
    except (SpecError, StoreMismatchError) as exc:
        first = exc.problems[0] if isinstance(exc, SpecError) else exc
        raise ReviewError(f"run {run_id} cannot continue, so nothing was decided: {first}") from None


def announce(store: Store, decision: Decision, reviewer: str | None) -> Decision:
    """Add the decision to the run's trace as a ``review`` event, when tracing is configured."""
    tracer = get_tracer()
    if tracer.enabled:
        tracer.decision_event(decision.run_id, store.get_run(decision.run_id).trace_id, decision.decision,
                              decision.step_id, reviewer or default_reviewer())
        tracer.force_flush()
    return decision


def waiting_records(store: Store, run_id: str) -> list[StepRecordView]:
    """Gate-failed records with no decision yet: the steps a reviewer can act on."""
    decided = {r.record_id for r in store.reviews(run_id)}
    waiting = [r for r in store.step_records(run_id, latest_only=True)
               if r.status == "gate_failed" and r.id not in decided]
    # in the order the steps started (which follows the workflow's order), not the order
    # concurrent branches happened to finish, so messages and screens are stable
    return sorted(waiting, key=lambda r: (r.started_at, r.step_id))


def paused_record(store: Store, run_id: str, step: str | None) -> StepRecordView:
    """The one paused step a decision applies to, or a ReviewError saying why there is none."""
    run = store.get_run(run_id)
    if run.status != "paused":
        raise ReviewError(f"run {run_id} is {run.status}, not paused; there is nothing to decide")
    waiting = waiting_records(store, run_id)
    if not waiting:
        raise ReviewError(f"run {run_id} has no step waiting for review")
    if step is None:
        if len(waiting) > 1:
            raise ReviewError(f"run {run_id} has {len(waiting)} steps waiting: "
                              f"{[r.step_id for r in waiting]}; choose one with --step")
        return waiting[0]
    for rec in waiting:
        if rec.step_id == step:
            return rec
    raise ReviewError(f"step {step!r} of run {run_id} is not waiting for review; waiting: "
                      f"{[r.step_id for r in waiting]}")


def _accepted_record(rec: StepRecordView, workflow_id: int, origin: str, output_json: str,
                     gates: list[GateRow] | None = None) -> NewStepRecord:
    now = time.time()
    return NewStepRecord(
        run_id=rec.run_id, workflow_id=workflow_id, step_id=rec.step_id, step_type=rec.step_type, agent=rec.agent,
        attempt=rec.attempt, status="succeeded", origin=origin, started_at=now, ended_at=now,
        inputs=jsonio.dumps(rec.inputs) if rec.inputs is not None else None, output=output_json,
        consumed=jsonio.dumps([[c["record_id"], c["step_id"], c["delay"]] for c in rec.consumed])
        if rec.consumed else None,
        injected=jsonio.dumps(rec.injected) if rec.injected else None, gates=gates or [],
        llm=jsonio.dumps(rec.llm) if rec.llm else None)


def approve(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
            comment: str | None = None) -> Decision:
    """Accept the paused output as it is; the override is recorded for attribution."""
    rec = paused_record(store, run_id, step)
    _, workflow_id = continuable(store, run_id)
    new = _accepted_record(rec, workflow_id, "approved", jsonio.dumps(rec.output))
    review_id = store.decide(NewReview(run_id, rec.id, rec.step_id, decision="approve",
                                       reviewer=reviewer or default_reviewer(), comment=comment,
                                       output_before=rec.output, output_after=rec.output), new_records=[new])
    return announce(store, Decision(run_id, rec.step_id, "approve", review_id, True), reviewer)


def check_edit(workflow: BoundWorkflow, store: Store, run_id: str, rec: StepRecordView, output: Any) -> list[GateRow]:
    """Evaluate the step's gates on a proposed output; the shared check of CLI and TUI edits."""
    try:
        plain = jsonio.to_plain(output)
    except jsonio.NotSerializableError as exc:
        raise ReviewError(f"the edited output cannot be stored as JSON: {exc}") from None
    step = workflow.step(rec.step_id)
    upstream = {r.step_id: r.output for r in store.step_records(run_id, latest_only=True) if r.status == "succeeded"}
    ctx = StepContext(run_id=run_id, step_id=step.id, workflow=workflow.name, agent=step.spec.agent_name,
                      step_type=step.spec.type, attempt=rec.attempt, idempotency_key=idempotency_key(run_id, step.id),
                      upstream=upstream, workflow_inputs=store.get_run(run_id).inputs,
                      llm_defaults=workflow.spec.llm)
    rows = []
    for gate in step.gates:
        ev = evaluate_gate(gate.check, gate.label, plain, ctx)
        rows.append(gate_row(gate.label, ev.result, ev.duration, gate.severity))
    return rows


def edit(store: Store, run_id: str, output: Any, *, step: str | None = None, reviewer: str | None = None,
         comment: str | None = None, force: bool = False) -> Decision:
    """Replace the paused output. It must pass all of the step's blocking gates unless ``force``."""
    rec = paused_record(store, run_id, step)
    workflow, workflow_id = continuable(store, run_id)
    rows = check_edit(workflow, store, run_id, rec, output)
    failing = [r for r in rows if not r.passed and r.severity == "block"]
    if failing and not force:
        reasons = "; ".join(f"{r.gate}: {r.reason}" for r in failing)
        raise ReviewError(f"the edited output of step {rec.step_id!r} fails its gates ({reasons}); "
                          "nothing was changed (use --force to accept it anyway)")
    plain = jsonio.to_plain(output)
    new = _accepted_record(rec, workflow_id, "edited", jsonio.dumps(plain), rows)
    review_id = store.decide(NewReview(run_id, rec.id, rec.step_id, decision="edit",
                                       reviewer=reviewer or default_reviewer(), comment=comment,
                                       output_before=rec.output, output_after=plain, forced=bool(failing) and force),
                             new_records=[new])
    return announce(store, Decision(run_id, rec.step_id, "edit", review_id, True), reviewer)


def retry(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
          comment: str | None = None) -> Decision:
    """Run the paused step again, handing it the failed gate verdicts as ``ctx.gate_feedback``."""
    rec = paused_record(store, run_id, step)
    continuable(store, run_id)
    review_id = store.decide(NewReview(run_id, rec.id, rec.step_id, decision="retry",
                                       reviewer=reviewer or default_reviewer(), comment=comment,
                                       output_before=rec.output))
    return announce(store, Decision(run_id, rec.step_id, "retry", review_id, True), reviewer)


def reject(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
           comment: str | None = None) -> Decision:
    """End the run as ``rejected``; steps that never ran are recorded as skipped."""
    rec = paused_record(store, run_id, step)
    run = store.get_run(run_id)
    spec = WorkflowSpec.model_validate(store.workflow_definition(run.workflow_id)[0])
    have = {r.step_id for r in store.step_records(run_id, latest_only=True)}
    now = time.time()
    skipped = [NewStepRecord(run_id=run_id, workflow_id=run.workflow_id, step_id=s.id, step_type=s.type,
                             agent=s.agent_name, attempt=0, status="skipped", started_at=now, ended_at=now,
                             error_type="Rejected", error_message=f"run rejected at step {rec.step_id!r}")
               for s in spec.steps if s.id not in have]
    review_id = store.decide(NewReview(run_id, rec.id, rec.step_id, decision="reject",
                                       reviewer=reviewer or default_reviewer(), comment=comment,
                                       output_before=rec.output), new_records=skipped, run_status="rejected")
    return announce(store, Decision(run_id, rec.step_id, "reject", review_id, False), reviewer)


def apply_review_timeouts(store: Store, run_id: str, spec: WorkflowSpec, *, now: float | None = None) -> list[Decision]:
    """Decide pauses that waited longer than their step's ``review_timeout`` (reviewer ``review-timeout``)."""
    now = time.time() if now is None else now
    decisions: list[Decision] = []
    if store.get_run(run_id).status != "paused":
        return decisions
    for rec in waiting_records(store, run_id):
        step = spec.step(rec.step_id)
        if step.review_timeout is None or rec.ended_at + step.review_timeout > now:
            continue
        comment = f"no decision within {step.review_timeout:g} s"
        fn = approve if step.on_review_timeout == "approve" else reject
        try:
            decisions.append(fn(store, run_id, step=rec.step_id, reviewer="review-timeout", comment=comment))
        except ReviewError:
            continue  # a human decided meanwhile
        if fn is reject:
            break
    return decisions


def next_review_deadline(store: Store, run_id: str, spec: WorkflowSpec) -> float | None:
    """When the earliest pending review times out, or None when some pause waits indefinitely."""
    deadlines = []
    for rec in waiting_records(store, run_id):
        step = spec.step(rec.step_id)
        if step.review_timeout is None:
            return None
        deadlines.append(rec.ended_at + step.review_timeout)
    return min(deadlines) if deadlines else None
