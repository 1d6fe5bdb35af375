"""Reuse what did not change: an experiment run starts with its source run's records of unchanged steps.

When an example came from a stored run, the steps of the new workflow version that are identical to
the source run's (same version hash, :mod:`orchestrator.bind.step_versions`) and whose upstream steps
are all reused too see exactly the inputs they saw then: the workflow inputs are the example's (equal
to the source run's) and every input they read comes from a reused step. Their recorded outputs are
copied into the new run (``origin: reused``, gate verdicts included) before it executes, and the
executor, which never executes a completed step again, goes on from the first step that changed, as
``replay --from`` does. A step that branches off independently of every change is reused as well.

Only a step whose live record succeeded as executed (not a person's edit or approval: the new run has
nobody to approve it) is reused, and only a plain step: a ``for_each`` map, a ``repeat:`` loop and a
``workflow:`` step execute again (their units are many records, or a child run).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bind.binding import BoundWorkflow
from orchestrator.bind.step_versions import step_hashes
from orchestrator.core import jsonio
from orchestrator.core.errors import OrchestratorError
from orchestrator.engine.stored_workflow import load_run_workflow
from orchestrator.spec.records import StepRecordView, live_records
from orchestrator.store import GateRow, NewStepRecord, Store

REUSABLE_ORIGINS = ("executed", "reused")
"""Records whose output the step itself produced (not a person's edit or approval)."""


@dataclass
class ReusePlan:
    """The source run's records an experiment run starts with, and what they cost when they ran."""

    source_run_id: str
    records: list[StepRecordView] = field(default_factory=list)
    model_calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    note: str | None = None
    """Why nothing is reused, when the source run cannot serve (missing, other inputs, no longer loads)."""

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(r.step_id for r in self.records)


class SourceRuns:
    """Plans reuse from source runs for one new workflow version, with each source workflow version's step
    hashes computed once (thousands of examples usually come from a handful of versions)."""

    def __init__(self, store: Store, workflow: BoundWorkflow) -> None:
        self.store = store
        self.workflow = workflow
        self.hashes = step_hashes(workflow)
        self.source_hashes: dict[int, dict[str, str] | None] = {}

    def hashes_of(self, run_id: str, workflow_id: int) -> dict[str, str] | None:
        if workflow_id not in self.source_hashes:
            try:
                self.source_hashes[workflow_id] = step_hashes(load_run_workflow(self.store, run_id)[0])
            except OrchestratorError:  # its workflow no longer loads: nothing of it can be compared
                self.source_hashes[workflow_id] = None
        return self.source_hashes[workflow_id]

    def plan(self, source_run_id: str, inputs: dict[str, Any]) -> ReusePlan:
        """The records of ``source_run_id`` an experiment run on ``inputs`` may start with."""
        plan = ReusePlan(source_run_id)
        try:
            source = self.store.get_run(source_run_id)
        except OrchestratorError:
            plan.note = f"source run {source_run_id} is not stored"
            return plan
        if source.workflow != self.workflow.name:
            plan.note = f"source run {source_run_id} ran workflow {source.workflow!r}"
            return plan
        if jsonio.dumps(source.inputs) != jsonio.dumps(inputs):
            plan.note = f"source run {source_run_id} had other inputs"
            return plan
        before = self.hashes_of(source_run_id, source.workflow_id)
        if before is None:
            plan.note = f"the workflow of source run {source_run_id} no longer loads"
            return plan
        live = live_records(self.store.step_records(source_run_id))
        reused: set[str] = set()
        for sid in self.workflow.order:
            step = self.workflow.steps[sid]
            record = live.get(sid)
            if (record is None or record.status != "succeeded" or record.origin not in REUSABLE_ORIGINS
                    or step.child is not None or step.spec.for_each is not None or step.spec.repeat is not None
                    or before.get(sid) != self.hashes[sid] or not set(step.dependencies) <= reused):
                continue
            reused.add(sid)
            plan.records.append(record)
        if plan.records:
            ids = {r.id for r in plan.records}
            for call in self.store.model_calls([source_run_id]):
                if call.record_id in ids:
                    plan.model_calls += 1
                    plan.tokens += call.input_tokens + call.output_tokens
                    plan.cost += call.cost or 0.0
            plan.seconds = sum(r.duration for r in plan.records)
        return plan


def copy_reused(store: Store, run_id: str, workflow: BoundWorkflow, workflow_id: int, plan: ReusePlan) -> None:
    """Insert the plan's records into the new run before it executes, upstream first: links to upstream
    records point at the copies, gate verdicts come along, and each says ``origin: reused``."""
    now = time.time()
    step_of_record = {r.id: r.step_id for r in plan.records}
    new_ids: dict[str, int] = {}
    for record in plan.records:
        inputs = None
        if record.inputs is not None:
            inputs = {}
            for param, value in record.inputs.items():
                if isinstance(value, dict) and "$record" in value and step_of_record.get(value["$record"]) in new_ids:
                    value = {**value, "$record": new_ids[step_of_record[value["$record"]]]}
                inputs[param] = value
        step = workflow.steps[record.step_id]
        consumed = [[new_ids[d], d, 0.0] for d in step.dependencies if d in new_ids]
        gates = [GateRow(gate=g.gate, passed=g.passed, score=g.score, reason=g.reason,
                         details=jsonio.dumps(g.details) if g.details else None, severity=g.severity,
                         duration=g.duration) for g in record.gates]
        new_ids[record.step_id] = store.insert_step_record(NewStepRecord(
            run_id=run_id, workflow_id=workflow_id, step_id=record.step_id, step_type=record.step_type,
            agent=record.agent, attempt=1, status="succeeded", started_at=now, ended_at=now,
            inputs=jsonio.dumps(inputs) if inputs is not None else None, output=jsonio.dumps(record.output),
            consumed=jsonio.dumps(consumed) if consumed else None,
            injected=jsonio.dumps(record.injected) if record.injected else None,
            llm=jsonio.dumps(record.llm) if record.llm else None, origin="reused", gates=gates))
