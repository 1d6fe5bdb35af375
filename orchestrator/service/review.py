"""Review decisions on paused steps: approve, edit, retry, reject; and fixes at a pause's cause.

The CLI and the TUI both call these functions, so a decision is the same whichever face made
it. Each decision is one transaction (review row + any new step records, the skipped records of
a rejection included + superseded marks + run status + the lease of its continuation), and a
unique constraint lets exactly one of two racing reviewers win. Approving or editing never
re-executes the paused step: it appends a record carrying the accepted output.

A pause is often caused upstream (a critic checking step 2 against step 4 fails because step 2
was wrong), so ``edit`` and ``retry`` also apply to any step that already completed in a paused
or failed run: the fix is bound to the pause (or failure) it answers, every completed
descendant of the fixed step is superseded (kept and marked, never deleted) and runs again when
the run continues, and nothing else re-executes.

A pause inside a child run is decided on the child that holds it, whether named from the parent by a
path (``research > retrieve``) or from the child (:mod:`orchestrator.service.review_tree`); a fix of a completed
step of a child whose output its parent took also supersedes the parent's records of the child's unit
and downstream (:func:`plan_tree_fix`).
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gates.base import evaluate as evaluate_gate
from orchestrator.bind.approvals import ApprovalStep, is_tool_pause
from orchestrator.bind.binding import BoundWorkflow
from orchestrator.core import jsonio
from orchestrator.core.errors import (
    EditRefusedError,
    LeaseHeldError,
    ReviewError,
    RunBusyError,
    SpecError,
    StoreMismatchError,
)
from orchestrator.engine.attempt import gate_row, idempotency_key, logged_calls
from orchestrator.engine.leases.holder import executed_by
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.engine.tree import StepTimeouts, child_pauses, is_child, open_pauses, root_of
from orchestrator.llm.client import LLMClient
from orchestrator.service.held_pauses import (
    HeldPause,
    downstream_held,
    end_children,
    held_pauses,
    side_effects_inside,
    wait_record,
)
from orchestrator.service.names import check_names
from orchestrator.service.rejection import plan_pause_rejection, plan_run_rejection
from orchestrator.service.review_tree import Target, holding_root, locate
from orchestrator.service.tool_decisions import check_arguments, review_of
from orchestrator.spec.context import CallLog, StepContext
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.records import RunView, StepRecordView, join_path, live_records, parse_unit, unit_name
from orchestrator.store import GateRow, Lease, NewDecision, NewReview, NewStepRecord, Store
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
    lease: Lease | None = None
    """The run's lease, claimed with the decision: the caller continues the run under it."""
    superseded: list[str] = field(default_factory=list)
    """Steps whose records a fix superseded: they run again when the run continues."""
    asked_run_id: str = ""
    """The run the reviewer named, when the decision landed in a child run below it (else ``run_id``)."""
    path: str = ""
    """The decided step as named from ``asked_run_id`` (``research > retrieve``; else ``step_id``)."""
    forced: bool = False
    """An edit stored past the checks that refused it (``--force``, or the review app's confirmation)."""
    rejected_instance: str = ""
    """The instance a rejection ended (in ``run_id``, which goes on), when it ended one rather than its run."""
    whole_run: bool = False
    """A rejection of the run as a whole (no step named)."""
    ended: list[str] = field(default_factory=list)
    """Runs a rejection ended, innermost first."""
    closed: list[str] = field(default_factory=list)
    """Other open pauses a rejection closed with the runs it ended, by path from their root."""

    @property
    def shown_run_id(self) -> str:
        return self.asked_run_id or self.run_id

    @property
    def shown_step(self) -> str:
        return self.path or self.step_id


def _named(decision: Decision, target: Target) -> Decision:
    """The decision as the reviewer named it (a path from the run asked about)."""
    if target.nested:
        decision.asked_run_id = target.asked
        decision.path = target.path or decision.step_id
    return decision


def _decided_meanwhile(store: Store, run_id: str, rec: StepRecordView) -> Callable[[], ReviewError | None]:
    """The refusal of a decision whose pause another reviewer answered while this one waited for the tree."""
    def check() -> ReviewError | None:
        winner = next((r for r in store.reviews(run_id) if r.record_id == rec.id), None)
        if winner is None:
            return None
        return ReviewError(f"step {rec.unit!r} of run {run_id} was already decided by another reviewer: "
                           f"{winner.decision} by {winner.reviewer}; see `orchestrator show {run_id}`")
    return check


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
    waiting = [r for r in live_records(store.step_records(run_id)).values()
               if r.status == "gate_failed" and r.id not in decided]
    # in the order the steps started (which follows the workflow's order), not the order
    # concurrent branches happened to finish, so messages and screens are stable; instances by index
    began: dict[str, float] = {}
    for r in waiting:
        began[r.step_id] = min(began.get(r.step_id, r.started_at), r.started_at)
    return sorted(waiting, key=lambda r: (began[r.step_id], r.step_id, -1 if r.index is None else r.index,
                                          -1 if r.iteration is None else r.iteration))


def paused_record(store: Store, run_id: str, step: str | None) -> StepRecordView:
    """The one paused step a decision applies to, or a ReviewError saying why there is none."""
    run = store.get_run(run_id)
    if run.status == "running" and waiting_records(store, run_id):
        run = wait_until_paused_again(store, run_id)
    if run.status != "paused" and not (run.status == "interrupted" and waiting_records(store, run_id)):
        hint = "; to fix a step that completed, name it with --step" if run.status == "failed" else ""
        raise ReviewError(f"run {run_id} is {run.status}, not paused; there is nothing to decide{hint}")
    waiting = waiting_records(store, run_id)
    if not waiting:
        raise ReviewError(f"run {run_id} has no step waiting for review")
    if step is None:
        if len(waiting) > 1:
            raise ReviewError(f"run {run_id} has {len(waiting)} steps waiting: "
                              f"{[r.unit for r in waiting]}; choose one with --step")
        return waiting[0]
    for rec in waiting:
        if rec.unit == step:
            return rec
    # a step (or instance) named whose instances (or iterations) wait: say which to name
    parts = [r for r in waiting if r.unit.startswith(step) and r.unit[len(step):][:1] in ("[", "#")
             and r.step_id == step.partition("[")[0]]
    if parts:
        loops = parts[0].iteration is not None and parts[0].unit.startswith(step + "#")
        kind, part = ("runs again until its condition holds", "iteration") if loops else ("runs once per item",
                                                                                           "instance")
        units = [r.unit for r in parts]
        raise ReviewError(f"step {step!r} of run {run_id} {kind}; name the {part} waiting for review: {units} "
                          f"(e.g. --step '{units[0]}')")
    raise ReviewError(f"step {step!r} of run {run_id} is not waiting for review; waiting: "
                      f"{[r.unit for r in waiting]} (edit and retry also take any completed step)")


DECISION_WAIT_SECONDS = 30.0
"""How long a decision on one pause waits while the run is continued by a decision on another pause
(several paused instances of a map, decided at once by several reviewers): that continuation pauses the
run again within moments, at the pauses still open."""


def decide_paused(store: Store, review: NewReview, *, new_records: Sequence[NewStepRecord] = (),
                  lease: Lease | None = None, run_status: str = "running",
                  wait: float = DECISION_WAIT_SECONDS) -> int:
    """Store a decision on a waiting record; while another decision's continuation runs the run (it is
    ``running``, not ``paused``), try again until it pauses again. A decision on the same record as another
    is refused at once (the database's unique constraint referees)."""
    deadline = time.monotonic() + wait
    delay = 0.02
    # with a lease to claim, the decision may also take a run whose continuation died (running, its lease
    # expired: shown as interrupted): it continues the run, as a resume would
    statuses = ("paused", "running") if lease is not None else ("paused",)
    while True:
        try:
            return store.decide(review, new_records=new_records, lease=lease, run_status=run_status,
                                from_statuses=statuses)
        except RunBusyError:
            if time.monotonic() >= deadline or store.get_run(review.run_id).status not in ("running", "paused",
                                                                                           "interrupted"):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def wait_until_paused_again(store: Store, run_id: str, wait: float = DECISION_WAIT_SECONDS) -> RunView:
    """A run with open pauses that is running is being continued by a decision on another of its pauses
    (instances of a map): it pauses again at the others within moments, so wait for that."""
    deadline = time.monotonic() + wait
    delay = 0.02
    run = store.get_run(run_id)
    while run.status == "running" and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
        run = store.get_run(run_id)
    return run


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
        llm=jsonio.dumps(rec.llm) if rec.llm else None, item_index=rec.index,
        iteration=rec.iteration)


def approve(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
            comment: str | None = None, lease: Lease | None = None, run_status: str = "running") -> Decision:
    """Accept the paused output as it is; the override is recorded for attribution.

    ``lease`` (here and in ``edit``/``retry``): claimed with the decision, in its transaction, for
    the caller's continuation of the run (``continue_run(..., lease=decision.lease)``).
    ``run_status``: ``queued`` hands the run to any worker, in the decision's transaction.
    """
    check_names(reviewer=reviewer, step=step)
    target = locate(store, run_id, step)
    run_id = target.run_id
    rec = paused_record(store, run_id, target.step)
    _, workflow_id = continuable(store, run_id)
    # a tool call runs when the step goes on; nothing but the decision is stored now
    if is_tool_pause(rec.error_type, rec.step_type):
        return _decide_tool_call(store, rec, target, "approve", reviewer, comment, rec.output, lease, run_status)
    new = _accepted_record(rec, workflow_id, "approved", jsonio.dumps(rec.output))
    with holding_root(store, run_id, lease, _decided_meanwhile(store, run_id, rec)) as held:
        review_id = decide_paused(store, NewReview(run_id, rec.id, rec.unit, decision="approve",
                                                   reviewer=reviewer or default_reviewer(), comment=comment,
                                                   output_before=rec.output, output_after=rec.output),
                                  new_records=[new], lease=held, run_status=run_status)
    return announce(store, _named(Decision(run_id, rec.unit, "approve", review_id, True, held), target), reviewer)


def check_edit(workflow: BoundWorkflow, store: Store, run_id: str, rec: StepRecordView, output: Any) -> list[GateRow]:
    """Evaluate the step's gates on a proposed output; the shared check of CLI and TUI edits."""
    try:
        plain = jsonio.output_to_plain(output)
    except jsonio.NotSerializableError as exc:
        raise ReviewError(f"the edited output cannot be stored as JSON: {exc}") from None
    step = workflow.step(rec.step_id)
    upstream = {sid: r.output for sid, r in live_records(store.step_records(run_id)).items() if r.status == "succeeded"}
    calls = CallLog("validation")
    ctx = StepContext(run_id=run_id, step_id=step.id, workflow=workflow.name, agent=step.spec.agent_name,
                      step_type=step.spec.type, attempt=rec.attempt, idempotency_key=idempotency_key(run_id, rec.unit),
                      upstream=upstream, workflow_inputs=store.get_run(run_id).inputs,
                      llm_defaults=workflow.spec.llm, calls=calls, llm=LLMClient(workflow.spec.llm, calls),
                      index=rec.index)
    rows = []
    for gate in step.gates:
        with calls.owned_by("validation", gate.label):
            ev = evaluate_gate(gate.check, gate.label, plain, ctx)
        rows.append(gate_row(gate.label, ev.result, ev.duration, gate.severity))
    store.add_model_calls(run_id, rec.id, logged_calls(ctx))  # paid for whether the edit is accepted or not
    return rows


@dataclass(frozen=True)
class CheckedEdit:
    """The gates' results on an edited output of one record, as a refusal found them (EditRefusedError.checked)."""

    record_id: int
    output_json: str
    rows: list[GateRow]

    def applies_to(self, rec: StepRecordView, output: Any) -> bool:
        """Whether these are the results on ``output`` as the edit of ``rec``."""
        try:
            return self.record_id == rec.id and self.output_json == jsonio.dumps(jsonio.output_to_plain(output))
        except jsonio.NotSerializableError:
            return False


def edit(store: Store, run_id: str, output: Any, *, step: str | None = None, reviewer: str | None = None,
         comment: str | None = None, force: bool = False, rerun_side_effects: bool = False,
         lease: Lease | None = None, checked: object = None) -> Decision:
    """Replace the paused output, or (``step`` naming a completed step) fix that step's output and
    supersede its descendants. It must pass all of the step's blocking gates unless ``force``.

    ``checked``: the ``checked`` of the EditRefusedError this same edit raised before (the review app asks
    whether to force it): its gate results are stored instead of evaluating the gates a second time.

    ``step`` may be a path into a child run (``research > retrieve``): a completed step of a child whose
    output its parent took supersedes the parent's records of the child's unit and downstream too."""
    check_names(reviewer=reviewer, step=step)
    target = locate(store, run_id, step)
    run_id, step = target.run_id, target.step
    tree: TreeFix | None = None
    if is_tree_fix(store, run_id, step):
        assert step is not None
        tree = plan_tree_fix(store, run_id, step, rerun_step=False)
        guard_side_effects(tree.bottom, rerun_side_effects, tree.side_effects)
        workflow, workflow_id = tree.workflows[0], tree.workflow_id
        rec, plan = tree.bottom.record, None
    elif is_fix(store, run_id, step):
        assert step is not None
        workflow, workflow_id = continuable(store, run_id)
        plan = plan_fix(store, run_id, step, workflow, rerun_step=False)
        guard_side_effects(plan, rerun_side_effects)
        rec = plan.record
    else:
        rec = paused_record(store, run_id, step)
        workflow, workflow_id = continuable(store, run_id)
        plan = None
        # a tool call runs with the edited arguments when the step goes on
        if is_tool_pause(rec.error_type, rec.step_type):
            proposal = check_arguments(workflow, rec, output)
            return _decide_tool_call(store, rec, target, "edit", reviewer, comment, proposal, lease)
        if rec.step_type == "approval":
            return _edit_proposal(store, workflow, workflow_id, rec, target, output, reviewer, comment, force, lease)
    if isinstance(checked, CheckedEdit) and checked.applies_to(rec, output):
        rows = checked.rows
    else:
        rows = check_edit(workflow, store, run_id, rec, output)
    plain = jsonio.output_to_plain(output)
    output_json = jsonio.dumps(plain)
    failing = [r for r in rows if not r.passed and r.severity == "block"]
    if failing and not force:
        reasons = "; ".join(f"{r.gate}: {r.reason}" for r in failing)
        raise EditRefusedError(f"the edited output of step {rec.unit!r} fails its gates ({reasons}); "
                               "nothing was changed (use --force to accept it anyway)",
                               [f"{r.gate}: {r.reason}" for r in failing],
                               CheckedEdit(rec.id, output_json, rows))
    new = _accepted_record(rec, workflow_id, "edited", output_json, rows)
    review = NewReview(run_id, rec.id, rec.unit, decision="edit", reviewer=reviewer or default_reviewer(),
                       comment=comment, output_before=rec.output, output_after=plain, forced=bool(failing) and force)
    answered = plan.answers if plan is not None else tree.bottom.answers if tree is not None else rec
    with holding_root(store, run_id, lease, _decided_meanwhile(store, run_id, answered)) as held:
        if tree is not None:
            decision = _store_tree_fix(store, tree, review, [new], rerun_side_effects, held)
        elif plan is None:
            review_id = decide_paused(store, review, new_records=[new], lease=held)
            decision = Decision(run_id, rec.unit, "edit", review_id, True, held)
        else:
            decision = _store_fix(store, plan, review, [new], rerun_side_effects, held)
    return announce(store, _named(replace(decision, forced=review.forced), target), reviewer)


def _decide_tool_call(store: Store, rec: StepRecordView, target: Target, decision: str, reviewer: str | None,
                      comment: str | None, output_after: Any, lease: Lease | None,
                      run_status: str = "running") -> Decision:
    """Store a decision on a tool call an LLM step paused at (only the review: the step goes on from the
    conversation stored with the pause when the run continues, under the lease claimed here)."""
    with holding_root(store, rec.run_id, lease, _decided_meanwhile(store, rec.run_id, rec)) as held:
        review_id = decide_paused(store, review_of(rec, decision, reviewer or default_reviewer(), comment,
                                                   output_after), lease=held, run_status=run_status)
    return announce(store, _named(Decision(rec.run_id, rec.unit, decision, review_id, True, held), target),
                    reviewer)


def _edit_proposal(store: Store, workflow: BoundWorkflow, workflow_id: int, rec: StepRecordView, target: Target,
                   output: Any, reviewer: str | None, comment: str | None, force: bool,
                   lease: Lease | None) -> Decision:
    """An approval step's edit: the edited proposal is its output, checked only by its ``output_schema``
    (a person is its check; it has no gates)."""
    try:
        plain = jsonio.output_to_plain(output)
    except jsonio.NotSerializableError as exc:
        raise ReviewError(f"the edited output cannot be stored as JSON: {exc}") from None
    proposal = workflow.step(rec.step_id).function.fn
    errors = proposal.schema_errors(plain) if isinstance(proposal, ApprovalStep) else []
    if errors and not force:
        raise EditRefusedError(f"the edited output of approval step {rec.unit!r} does not fit its output_schema "
                               f"({'; '.join(errors)}); nothing was changed (use --force to accept it anyway)",
                               [f"output_schema: {error}" for error in errors])
    new = _accepted_record(rec, workflow_id, "edited", jsonio.dumps(plain))
    review = NewReview(rec.run_id, rec.id, rec.unit, decision="edit", reviewer=reviewer or default_reviewer(),
                       comment=comment, output_before=rec.output, output_after=plain, forced=bool(errors))
    with holding_root(store, rec.run_id, lease, _decided_meanwhile(store, rec.run_id, rec)) as held:
        review_id = decide_paused(store, review, new_records=[new], lease=held)
    return announce(store, _named(Decision(rec.run_id, rec.unit, "edit", review_id, True, held,
                                           forced=review.forced), target), reviewer)


def retry(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
          comment: str | None = None, rerun_side_effects: bool = False, lease: Lease | None = None) -> Decision:
    """Run the paused step again, handing it the failed gate verdicts as ``ctx.gate_feedback``; or
    (``step`` naming a completed step) run that step and its descendants again; a path into a child run
    (``research > retrieve``) as for :func:`edit`."""
    check_names(reviewer=reviewer, step=step)
    target = locate(store, run_id, step)
    run_id, step = target.run_id, target.step
    if is_tree_fix(store, run_id, step):
        assert step is not None
        tree = plan_tree_fix(store, run_id, step, rerun_step=True)
        guard_side_effects(tree.bottom, rerun_side_effects, tree.side_effects)
        review = NewReview(run_id, tree.bottom.record.id, step, decision="retry",
                           reviewer=reviewer or default_reviewer(), comment=comment,
                           output_before=tree.bottom.record.output)
        with holding_root(store, run_id, lease, _decided_meanwhile(store, run_id, tree.bottom.answers)) as held:
            decision = _store_tree_fix(store, tree, review, [], rerun_side_effects, held)
        return announce(store, _named(decision, target), reviewer)
    if is_fix(store, run_id, step):
        assert step is not None
        workflow, _ = continuable(store, run_id)
        plan = plan_fix(store, run_id, step, workflow, rerun_step=True)
        guard_side_effects(plan, rerun_side_effects)
        review = NewReview(run_id, plan.record.id, step, decision="retry", reviewer=reviewer or default_reviewer(),
                           comment=comment, output_before=plan.record.output)
        with holding_root(store, run_id, lease, _decided_meanwhile(store, run_id, plan.answers)) as held:
            decision = _store_fix(store, plan, review, [], rerun_side_effects, held)
        return announce(store, _named(decision, target), reviewer)
    rec = paused_record(store, run_id, step)
    continuable(store, run_id)
    with holding_root(store, run_id, lease, _decided_meanwhile(store, run_id, rec)) as held:
        review_id = decide_paused(store, NewReview(run_id, rec.id, rec.unit, decision="retry",
                                                   reviewer=reviewer or default_reviewer(), comment=comment,
                                                   output_before=rec.output), lease=held)
    return announce(store, _named(Decision(run_id, rec.unit, "retry", review_id, True, held), target), reviewer)


# -- fixing a completed step: the cause of a pause or failure downstream ---------------------------

FIXABLE_RUNS = ("paused", "failed")
"""Run states in which a completed step may be edited or retried."""


@dataclass
class FixPlan:
    """What fixing one completed step would do, worked out before anything is stored."""

    step: str
    run_status: str
    record: StepRecordView
    """The step's live record: the output being replaced or re-computed."""
    answers: StepRecordView
    """The pause (or failure) the fix is bound to: a waiting or failed record downstream of the step."""
    superseded: list[StepRecordView]
    """Live records that will no longer count (in workflow order): the step's descendants, and the
    step itself for a retry."""
    side_effects: list[str]
    """Steps among them with ``side_effects: true`` that already ran: a fix would run them again."""
    held: list[HeldPause] = field(default_factory=list)
    """Units downstream waiting inside their child runs: the fix ends those children, and the units run again."""


def is_fix(store: Store, run_id: str, step: str | None) -> bool:
    """Whether an edit or retry of ``step`` fixes a completed step of a paused or failed run, rather
    than deciding a waiting pause (or being refused as a decision on a run with no pause)."""
    if step is None:
        return False
    status = store.get_run(run_id).status
    if status not in FIXABLE_RUNS:
        return False
    return status != "paused" or all(r.unit != step for r in waiting_records(store, run_id))


def plan_fix(store: Store, run_id: str, step: str, workflow: BoundWorkflow, *, rerun_step: bool) -> FixPlan:
    """The fix of completed ``step``; a ReviewError (exit 2, nothing stored) says why there is none."""
    run = store.get_run(run_id)
    step_id, index, iteration = _checked_unit(run_id, step, workflow)
    if run.status not in FIXABLE_RUNS:
        raise ReviewError(f"run {run_id} is {run.status}; a completed step can be edited or retried only in a "
                          "paused or failed run")
    live = live_records(store.step_records(run_id))
    rec = _completed_record(live, run_id, step)
    if run.status == "paused":
        kind, open_records = "pause", waiting_records(store, run_id)
    else:
        kind = "failure"
        open_records = sorted((r for r in live.values() if r.status == "failed"), key=lambda r: (r.started_at, r.id))
    below = workflow.descendants([step_id])
    loop = unit_name(step_id, index) if iteration is not None else None

    def affected(unit: str) -> bool:
        """Downstream of the fix; an iteration's fix also answers its own loop's later iterations."""
        sid, idx, it = parse_unit(unit)
        return sid in below or (loop is not None and unit_name(sid, idx) == loop and it is not None
                                and iteration is not None and it > iteration)

    # an iteration's fix also answers its own loop's pause (a later iteration's, or its repeat gate's)
    answers = next((r for r in open_records if r.step_id in below
                    or (loop is not None and _later_in_loop(r, loop, iteration))), None)
    # a pause held inside a child run of a unit downstream is answered as a plain one (its child ends)
    held = downstream_held(held_pauses(store, run_id, live), affected)
    if answers is None and held:
        answers = held[0].first
    if answers is None:
        where = ", ".join([repr(r.unit) for r in open_records]
                          + [repr(p.path) for h in held_pauses(store, run_id, live) for p in h.pauses]) or "no step"
        raise ReviewError(f"step {step!r} is not upstream of the {kind} of run {run_id} (at {where}), so fixing it "
                          "cannot answer it; decide that step instead")
    superseded, side_effects = _downstream(live, workflow, step, rerun_step=rerun_step)
    side_effects += [path for h in held for path in side_effects_inside(store, h)]
    return FixPlan(step, run.status, rec, answers, superseded, side_effects, held)


def _checked_unit(run_id: str, step: str, workflow: BoundWorkflow) -> tuple[str, int | None, int | None]:
    """The unit's step, index and iteration; a ReviewError when the workflow has no such unit."""
    try:
        step_id, index, iteration = parse_unit(step)
    except ValueError as exc:
        raise ReviewError(f"run {run_id}: {exc}") from None
    if step_id not in workflow.steps:
        raise ReviewError(f"run {run_id} has no step {step_id!r}; its steps: {list(workflow.order)}")
    if index is not None and not workflow.step(step_id).spec.mapped:
        raise ReviewError(f"step {step_id!r} of run {run_id} has no for_each, so it has no instance {step!r}")
    if iteration is not None and not workflow.step(step_id).spec.loops:
        raise ReviewError(f"step {step_id!r} of run {run_id} has no repeat, so it has no iteration {step!r}")
    return step_id, index, iteration


def _completed_record(live: dict[str, StepRecordView], run_id: str, step: str) -> StepRecordView:
    """The step's live record, which a fix replaces; a ReviewError when the step has not completed."""
    rec = live.get(step)
    if rec is None or rec.status != "succeeded":
        state = "has not run" if rec is None else f"is {rec.status}"
        hint = f" (`orchestrator resume {run_id}` runs it again)" if rec is not None and rec.status == "failed" else ""
        raise ReviewError(f"step {step!r} of run {run_id} {state}, not completed, so there is no output to "
                          f"edit or retry{hint}")
    return rec


def _downstream(live: dict[str, StepRecordView], workflow: BoundWorkflow, unit: str, *,
                rerun_step: bool) -> tuple[list[StepRecordView], list[str]]:
    """The live records a fix of ``unit`` supersedes (in workflow order), and those of steps with side
    effects that already ran among them.

    Every record of a step downstream (its instances too); an instance's fix also supersedes the list its
    step collected (it holds the old output), never the sibling instances; an iteration's fix supersedes the
    later iterations of its loop and the loop's result, so the loop goes on from the fixed iteration."""
    step_id, index, iteration = parse_unit(unit)
    below = workflow.descendants([step_id])
    loop = unit_name(step_id, index) if iteration is not None else None
    affected = [r for r in live.values() if r.step_id in below
                or (index is not None and r.unit == step_id) or (rerun_step and r.unit == unit)
                or (loop is not None and _later_in_loop(r, loop, iteration))]
    position = {sid: i for i, sid in enumerate(workflow.order)}
    superseded = sorted(affected, key=lambda r: (position[r.step_id], -1 if r.index is None else r.index,
                                                 -1 if r.iteration is None else r.iteration))
    side_effects = [r.unit for r in superseded if workflow.step(r.step_id).spec.side_effects
                    and r.status in ("succeeded", "gate_failed")]
    return superseded, side_effects


def _later_in_loop(rec: StepRecordView, loop: str, iteration: int | None) -> bool:
    """Whether ``rec`` belongs to the loop ``loop`` after iteration ``iteration``: a later iteration, or the
    loop's own record (its result)."""
    if unit_name(rec.step_id, rec.index) != loop:
        return False
    return rec.iteration is None or (iteration is not None and rec.iteration > iteration)


def guard_side_effects(plan: FixPlan, rerun_side_effects: bool, side_effects: Sequence[str] | None = None) -> None:
    """Steps that acted on the world are not repeated silently: the reviewer must say so. ``side_effects``:
    those of a whole tree's fix, by path (else the plan's own)."""
    found = plan.side_effects if side_effects is None else side_effects
    if found and not rerun_side_effects:
        raise ReviewError(f"fixing step {plan.step!r} would run again steps with side effects that already ran: "
                          f"{', '.join(found)}; nothing was changed (pass --rerun-side-effects to re-run them)")


def _store_fix(store: Store, plan: FixPlan, review: NewReview, new_records: list[NewStepRecord],
               rerun_side_effects: bool, lease: Lease | None) -> Decision:
    """One transaction: the review bound to the pause it answers, the new record, the superseded
    marks, the run out of its paused/failed state and, when given, the lease of its continuation."""
    review.record_id = plan.answers.id
    review.step_id = plan.step
    review.rerun_side_effects = rerun_side_effects
    run = store.get_run(review.run_id)
    attempts = {r.unit: r.attempt for r in store.step_records(review.run_id)}
    waits = [wait_record(store, run, h, attempts.get(h.unit, 0) + 1) for h in plan.held]
    ended = [d for h in plan.held for d in end_children(store, h, plan.step, review.run_id)]
    fix = NewDecision(review, new_records, lease=lease, supersede=[r.id for r in plan.superseded],
                      from_statuses=(plan.run_status,), superseded_records=waits)
    review_id = store.decide_all([fix, *ended])[0]
    return Decision(review.run_id, plan.step, review.decision, review_id, True, lease,
                    [r.unit for r in plan.superseded] + [h.unit for h in plan.held])


# -- fixing a completed step of a child run whose output its parent already took ---------------------


@dataclass
class FixLevel:
    """One run above the fixed child step: its records of the child's unit and downstream are superseded."""

    run_id: str
    status: str
    """The run's state before the fix."""
    unit: str
    """Its unit that started the run below (``research``, ``per_ticket[3]``)."""
    answers: StepRecordView
    """What its review is bound to: the pause (or failure) the fix answers, in the top run; the unit's own
    record in a run between (a child run that had succeeded)."""
    superseded: list[StepRecordView]
    held: list[HeldPause] = field(default_factory=list)
    """Units downstream of ``unit`` waiting inside their own child runs (top run): ended, and run again."""


@dataclass
class TreeFix:
    """A fix of a completed step of a child run that had succeeded, its output taken by its parent: the
    child's own part (``bottom``, bound to the fixed record) and each run above up to the one whose pause
    or failure it answers."""

    bottom: FixPlan
    levels: list[FixLevel]
    """Innermost first; the last one holds the pause (or failure) answered."""
    workflows: list[BoundWorkflow]
    workflow_id: int
    side_effects: list[str]
    """Steps with side effects that already ran, in all the runs, by path from the top run."""

    def paths(self, level: int, units: Sequence[str]) -> list[str]:
        """Units of the run at ``level`` (0: the child, 1..: ``levels``) named from the top run."""
        prefix = [lv.unit for lv in reversed(self.levels[level:])]
        return [join_path(*prefix, unit) for unit in units]


def is_tree_fix(store: Store, run_id: str, step: str | None) -> bool:
    """Whether an edit or retry of ``step`` fixes a completed step of a child run that succeeded (its parent
    took its output): the fix reaches up into the parent."""
    if step is None:
        return False
    run = store.get_run(run_id)
    return is_child(run) and run.status == "succeeded"


def plan_tree_fix(store: Store, run_id: str, step: str, *, rerun_step: bool) -> TreeFix:
    """The fix of ``step`` of succeeded child run ``run_id`` through the runs above it; a ReviewError
    (nothing stored) when no pause or failure above is downstream of it."""
    workflow, workflow_id = continuable(store, run_id)
    _checked_unit(run_id, step, workflow)
    live = live_records(store.step_records(run_id))
    rec = _completed_record(live, run_id, step)
    superseded, side_effects = _downstream(live, workflow, step, rerun_step=rerun_step)
    bottom = FixPlan(step, "succeeded", rec, rec, superseded, side_effects)
    levels: list[FixLevel] = []
    side: list[tuple[int, list[str]]] = [(0, side_effects)]
    run = store.get_run(run_id)
    while True:
        assert run.parent_run_id is not None and run.parent_step is not None
        unit, parent = run.parent_step, store.get_run(run.parent_run_id)
        parent_workflow, _ = continuable(store, parent.run_id)
        parent_live = live_records(store.step_records(parent.run_id))
        mine = parent_live.get(unit)
        if mine is None:
            raise ReviewError(f"run {parent.run_id} has not taken the output of its child run {run.run_id} "
                              f"(step {unit!r}); resume it first (`orchestrator resume {parent.run_id}`)")
        affected, effects = _downstream(parent_live, parent_workflow, unit, rerun_step=True)
        side.append((len(levels) + 1, effects))
        if parent.status in FIXABLE_RUNS:
            open_records = waiting_records(store, parent.run_id) if parent.status == "paused" else sorted(
                (r for r in parent_live.values() if r.status == "failed"), key=lambda r: (r.started_at, r.id))
            ids = {r.id for r in affected}
            answers = next((r for r in open_records if r.id in ids), None)
            below = parent_workflow.descendants([parse_unit(unit)[0]])
            inside = held_pauses(store, parent.run_id, parent_live)
            held = [h for h in inside if parse_unit(h.unit)[0] in below]
            if answers is None and held:
                answers = held[0].first
            if answers is None:
                where = ", ".join([repr(r.unit) for r in open_records]
                                  + [repr(p.path) for h in inside for p in h.pauses]) or "no step"
                raise ReviewError(f"step {step!r} of child run {run_id} is not upstream of the "
                                  f"{'pause' if parent.status == 'paused' else 'failure'} of run {parent.run_id} "
                                  f"(at {where}), so fixing it cannot answer it; decide that step instead")
            effects += [path for h in held for path in side_effects_inside(store, h)]
            levels.append(FixLevel(parent.run_id, parent.status, unit, answers, affected, held))
            break
        if parent.status != "succeeded" or not is_child(parent):
            raise ReviewError(f"run {parent.run_id} is {parent.status}; a completed step of its child run can be "
                              "edited or retried only while the run is paused or failed")
        levels.append(FixLevel(parent.run_id, parent.status, unit, mine, affected))
        run = parent
    fix = TreeFix(bottom, levels, [workflow], workflow_id, [])
    fix.side_effects = [path for level, units in side for path in fix.paths(level, units)]
    return fix


def _store_tree_fix(store: Store, fix: TreeFix, review: NewReview, new_records: list[NewStepRecord],
                    rerun_side_effects: bool, lease: Lease | None) -> Decision:
    """Each run above, top first (its superseded records, bound to the pause it answers: the referee of
    racing fixes), then the child's fix (bound to the fixed record), each run claimed under the decision's
    lease, all in one transaction: a process killed meanwhile leaves every run as it was. The top run is the
    tree's root or is held through it, so no other process continues any of them in between."""
    if lease is None:
        raise ReviewError(f"fixing step {fix.bottom.step!r} of child run {review.run_id} continues its tree, which "
                          "needs the tree's lease; nothing was changed")
    paths = [join_path(*[lv.unit for lv in reversed(fix.levels[:i + 1])], fix.bottom.step)
             for i in range(len(fix.levels))]
    above = [NewDecision(NewReview(level.run_id, level.answers.id, path, decision=review.decision,
                                   reviewer=review.reviewer, comment=review.comment,
                                   output_before=level.answers.output, rerun_side_effects=rerun_side_effects),
                         lease=replace(lease, run_id=level.run_id), supersede=[r.id for r in level.superseded],
                         from_statuses=(level.status, "running"), superseded_records=_wait_records(store, level))
             for level, path in reversed(list(zip(fix.levels, paths, strict=True)))]
    ended = [d for level, path in zip(fix.levels, paths, strict=True) for h in level.held
             for d in end_children(store, h, path, level.run_id)]
    review.record_id = fix.bottom.record.id
    review.step_id = fix.bottom.step
    review.rerun_side_effects = rerun_side_effects
    child = NewDecision(review, new_records, lease=replace(lease, run_id=review.run_id),
                        supersede=[r.id for r in fix.bottom.superseded], from_statuses=("succeeded",))
    review_id = store.decide_all([*above, child, *ended])[len(above)]
    superseded = fix.paths(0, [r.unit for r in fix.bottom.superseded])
    for i, level in enumerate(fix.levels, start=1):
        superseded += fix.paths(i, [r.unit for r in level.superseded] + [h.unit for h in level.held])
    return Decision(review.run_id, fix.bottom.step, review.decision, review_id, True, lease, superseded)


def _wait_records(store: Store, level: FixLevel) -> list[NewStepRecord]:
    """The level's records of its units' waits inside the child runs the fix ends (written superseded)."""
    if not level.held:
        return []
    run = store.get_run(level.run_id)
    attempts = {r.unit: r.attempt for r in store.step_records(level.run_id)}
    return [wait_record(store, run, h, attempts.get(h.unit, 0) + 1) for h in level.held]


@dataclass
class CriticPause:
    """A critic waiting for review, with the outputs of the steps it verified: where a fix belongs."""

    step_id: str
    reason: str
    verified: list[tuple[str, StepRecordView | None]]
    """Each verified step with its live record (None when it has none)."""


def critic_pauses(store: Store, run_id: str) -> list[CriticPause]:
    """The run's waiting critics: a critic's pause is usually caused by a step it verified."""
    if store.get_run(run_id).status != "paused":
        return []
    live = live_records(store.step_records(run_id))
    pauses = []
    for rec in waiting_records(store, run_id):
        if rec.step_type != "critic":
            continue
        verdict = next((g for g in rec.gates if g.gate == "critic"), None)
        verifies = [str(s) for s in verdict.details.get("verifies", [])] if verdict is not None else []
        reason = verdict.reason if verdict is not None else rec.error_message or ""
        pauses.append(CriticPause(rec.step_id, reason, [(sid, live.get(sid)) for sid in verifies]))
    return pauses


def reject(store: Store, run_id: str, *, step: str | None = None, reviewer: str | None = None,
           comment: str | None = None, lease: Lease | None = None, run_status: str = "running") -> Decision:
    """Reject a pause (``step``, a unit or a path into a child run), or the run as a whole (no ``step``).

    How far a rejected pause reaches (:mod:`orchestrator.service.rejection`): a pause of a mapped instance, or
    one inside an instance's child run, ends that instance ``rejected`` (consumers read null from it) and the
    run goes on, under ``lease`` (claimed here when not given; ``run_status`` ``queued`` hands it to any worker
    instead); any other pause ends its run, and with a child its parent, up to an instance or the root. The run
    as a whole ends rejected, and with it any run above it, by the same rule. Every pause below a run that
    ends is closed with it, in the decision's transaction. Steps that never ran are recorded as skipped.

    A rejected *tool call* (an LLM step paused at a tool that needs approval) does not end anything: the model
    reads ``comment`` as the tool's answer and the step goes on, as after an approval. Without ``step``, a run
    whose only pause is a tool call rejects that call."""
    from orchestrator.engine.executor import new_lease

    check_names(reviewer=reviewer, step=step)
    who = reviewer or default_reviewer()
    if step is None:
        pauses = open_pauses(store, run_id)
        only = pauses[0] if len(pauses) == 1 else None
        if only is not None and is_tool_pause(only.record.error_type, only.record.step_type):
            step = only.path
    target = locate(store, run_id, step) if step is not None else Target(run_id, run_id, None, None)
    answered: StepRecordView | None = None
    if step is None:
        _paused_tree(store, run_id)
        plan = plan_run_rejection(store, run_id, who, comment)
    else:
        rec = paused_record(store, target.run_id, target.step)
        if is_tool_pause(rec.error_type, rec.step_type):
            continuable(store, target.run_id)
            if lease is None and run_status == "running":
                lease = new_lease(target.run_id)
            return _decide_tool_call(store, rec, target, "reject", reviewer, comment, None, lease, run_status)
        plan = plan_pause_rejection(store, rec, NewReview(rec.run_id, rec.id, rec.unit, decision="reject",
                                                           reviewer=who, comment=comment, output_before=rec.output))
        answered = rec
    unit = answered.unit if answered is not None else ""
    going_on = plan.going_on
    if going_on is None:
        _refuse_held_root(store, plan.ended[-1])
        review_ids = store.decide_all(plan.decisions)
        decision = Decision(plan.ended[0], unit, "reject", next((i for i in review_ids if i), 0), False)
    else:
        assert plan.continues is not None
        continuable(store, plan.continues)
        if lease is None and run_status == "running":
            lease = new_lease(plan.continues)
        elif lease is not None:  # the run that goes on may be above the one named (an instance's child rejected)
            lease = replace(lease, run_id=plan.continues)
        decided = _decided_meanwhile(store, answered.run_id, answered) if answered is not None else _nobody
        with holding_root(store, plan.continues, lease, decided) as held:
            going_on.lease, going_on.run_status = held, run_status
            going_on.from_statuses = ("paused", "running") if held is not None else ("paused",)
            review_ids = _decide_all_paused(store, plan.decisions)
        decision = Decision(plan.continues, unit, "reject", next((i for i in review_ids if i), 0), True, held,
                            rejected_instance=plan.instance)
    decision.ended, decision.closed = plan.ended, plan.closed
    if step is None:
        decision.whole_run = True
        decision.asked_run_id = run_id
    return announce(store, _named(decision, target), reviewer)


def _nobody() -> ReviewError | None:
    return None


def _paused_tree(store: Store, run_id: str) -> None:
    """A ReviewError unless the run waits for a decision (its own pause or one inside its child runs)."""
    run = store.get_run(run_id)
    if run.status == "running" and open_pauses(store, run_id):
        run = wait_until_paused_again(store, run_id)
    if run.status in ("paused", "failed", "interrupted") and open_pauses(store, run_id):
        return  # a failed run may still hold pauses inside its child runs: rejecting it closes them
    if run.status != "paused":
        raise ReviewError(f"run {run_id} is {run.status}, not paused; there is nothing to decide")


def _refuse_held_root(store: Store, top: str) -> None:
    """A rejection that ends the tree up to ``top`` waits for no executor: refused while one holds it."""
    root = root_of(store, top)
    if root.status == "running":
        raise LeaseHeldError(f"run {root.run_id}, the root of the tree, is "
                             f"{executed_by(root.owner, root.lease_expires_at)}; nothing was decided (decide once it "
                             "pauses again)")


def _decide_all_paused(store: Store, decisions: list[NewDecision], wait: float = DECISION_WAIT_SECONDS) -> list[int]:
    """:func:`decide_paused` for a decision that changes several runs of a tree at once."""
    deadline = time.monotonic() + wait
    delay = 0.02
    while True:
        try:
            return store.decide_all(decisions)
        except RunBusyError:
            statuses = {store.get_run(d.target_run_id).status for d in decisions}
            if time.monotonic() >= deadline or not statuses & {"running", "interrupted"}:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def apply_review_timeouts(store: Store, run_id: str, spec: WorkflowSpec, *, now: float | None = None,
                          lease: Lease | None = None) -> list[Decision]:
    """Decide pauses that waited longer than their step's ``review_timeout`` (reviewer ``review-timeout``):
    the run's own, and those inside its child runs (``research > retrieve``) by the child step's.

    An approval claims ``lease`` with the decision, for the caller to continue the run under it; without
    one, it queues the run for any worker in the decision's transaction. Either way no process killed
    right after the decision leaves the run ``running`` with no lease, which nobody would ever take over."""
    now = time.time() if now is None else now
    decisions: list[Decision] = []
    if store.get_run(run_id).status != "paused":
        return decisions
    inside = StepTimeouts(store)
    due = [(rec.unit, spec.step(rec.step_id), rec) for rec in waiting_records(store, run_id)]
    due += [(pause.path, inside.step(pause), pause.record) for pause in child_pauses(store, run_id)]
    for unit, step, rec in due:
        if step.review_timeout is None or rec.ended_at + step.review_timeout > now:
            continue
        comment = f"no decision within {step.review_timeout:g} s"
        try:
            if step.on_review_timeout == "approve":
                decisions.append(approve(store, run_id, step=unit, reviewer="review-timeout", comment=comment,
                                         lease=lease, run_status="running" if lease is not None else "queued"))
            else:  # a refused tool call, or an ended instance: the run goes on; else the rejection ends it
                decided = reject(store, run_id, step=unit, reviewer="review-timeout", comment=comment, lease=lease,
                                 run_status="running" if lease is not None else "queued")
                decisions.append(decided)
                if not decided.continue_run:
                    break
        except ReviewError:
            continue  # a human decided meanwhile
    return decisions


def next_review_deadline(store: Store, run_id: str, spec: WorkflowSpec) -> float | None:
    """When the earliest pending review times out, or None when some pause waits indefinitely."""
    deadlines = []
    inside = StepTimeouts(store)
    for step, rec in [*((spec.step(r.step_id), r) for r in waiting_records(store, run_id)),
                      *((inside.step(p), p.record) for p in child_pauses(store, run_id))]:
        if step.review_timeout is None:
            return None
        deadlines.append(rec.ended_at + step.review_timeout)
    return min(deadlines) if deadlines else None
