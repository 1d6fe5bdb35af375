"""Group commit: steps that finish together reach the store in one transaction, each record exactly once,
a step's consumers start only after its record is committed, and a run's last record carries its end."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from orchestrator import Workflow, continue_run, open_store, start_run
from orchestrator.store import NewStepRecord, RunEnd, Store
from orchestrator.store.delegating import DelegatingStore

WIDTH = 20


class BatchLog(DelegatingStore):
    """The store as the executor writes to it, noting which records arrived together."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.url = store.url
        self.batches: list[list[str]] = []
        self.ends: list[str] = []
        """Run ends committed with a record."""

    def target(self) -> Store:
        return self.store

    def insert_step_records(self, records: Sequence[NewStepRecord], *, end: RunEnd | None = None) -> list[int]:
        self.batches.append([r.step_id for r in records])
        if end is not None:
            self.ends.append(end.status)
        return self.store.insert_step_records(records, end=end)


async def nap(value: int) -> int:
    await asyncio.sleep(0.05)
    return value


def boom(value: int) -> int:
    raise ValueError("no")


async def count(**values: int) -> int:
    return len(values)


def fan_out(*, failing: bool = False) -> Workflow:
    wf = Workflow("group-commit-fan", inputs={"x": "integer"}, output="join")
    for i in range(WIDTH):
        wf.step(id=f"nap{i:02d}", inputs={"value": "$inputs.x"})(nap)
    if failing:  # boom fails while the other naps are in flight; join waits for it, so never runs
        wf.step(id="boom", inputs={"value": "nap00"})(boom)
    wf.step(id="join", inputs={f"v{i}": f"nap{i:02d}" for i in range(WIDTH)},
            after=["boom"] if failing else [])(count)
    return wf


def test_a_fan_out_commits_its_steps_in_fewer_transactions_than_steps(tmp_path):
    store = BatchLog(open_store(f"sqlite:///{tmp_path / 'runs.db'}?synchronous=full"))
    result = start_run(store, fan_out().bind(), {"x": 1})
    assert (result.status, result.output) == ("succeeded", WIDTH)
    naps = [b for b in store.batches if b[0].startswith("nap")]
    assert sorted(s for b in naps for s in b) == [f"nap{i:02d}" for i in range(WIDTH)]  # each exactly once
    assert len(naps) < WIDTH
    records = store.step_records(result.run_id)
    assert len(records) == WIDTH + 1 and len({r.id for r in records}) == WIDTH + 1
    join = next(r for r in records if r.step_id == "join")
    nap_ids = {r.step_id: r.id for r in records if r.step_id.startswith("nap")}
    assert {c["step_id"]: c["record_id"] for c in join.consumed} == nap_ids


def test_a_chain_commits_each_record_on_its_own(tmp_path):
    wf = Workflow("group-commit-chain", inputs={"x": "integer"}, output="b")
    wf.step(id="a", inputs={"value": "$inputs.x"})(nap)
    wf.step(id="b", inputs={"value": "a"})(nap)
    store = BatchLog(open_store(f"sqlite:///{tmp_path / 'runs.db'}"))
    result = start_run(store, wf.bind(), {"x": 3})
    assert (result.status, result.output) == ("succeeded", 3)
    assert store.batches == [["a"], ["b"]]
    assert store.ends == ["succeeded"]  # the last record carries the run's end: one transaction, not two
    assert store.get_run(result.run_id).status == "succeeded"


def test_a_step_failing_beside_a_group_is_recorded_and_the_others_kept(durable_url):
    store = open_store(durable_url)
    result = start_run(store, fan_out(failing=True).bind(), {"x": 1})
    assert result.status == "failed" and result.failed_steps == ["boom"]
    statuses = {r.step_id: r.status for r in store.step_records(result.run_id)}
    assert statuses.pop("boom") == "failed"
    assert statuses == {f"nap{i:02d}": "succeeded" for i in range(WIDTH)}  # every one in flight kept


def test_a_run_ending_paused_or_failed_writes_its_end_on_its_own(tmp_path):
    wf = Workflow("group-commit-fail", inputs={"x": "integer"}, output="b")
    wf.step(id="a", inputs={"value": "$inputs.x"})(nap)
    wf.step(id="b", inputs={"value": "a"})(boom)
    store = BatchLog(open_store(f"sqlite:///{tmp_path / 'runs.db'}"))
    result = start_run(store, wf.bind(), {"x": 3})
    assert result.status == "failed" and store.ends == []
    run = store.get_run(result.run_id)
    assert run.status == "failed" and "ValueError: no" in (run.error or "")


def positive(output: int) -> float:
    """The evaluator: a positive output is correct."""
    return 1.0 if output > 0 else 0.0


class StopAfterLastStep(BaseException):
    """What a quitting TUI raises from its event hook: the execution stops where it is."""


def test_a_run_with_an_evaluator_stopped_after_its_last_record_is_resumed_and_scored_once(tmp_path):
    wf = Workflow("scored", inputs={"x": "integer"}, output="last", outcome=positive)
    wf.step(id="first", inputs={"value": "$inputs.x"})(nap)
    wf.step(id="last", inputs={"value": "first"})(nap)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")

    def stop_after_last(event) -> None:
        if type(event).__name__ == "StepFinished" and event.step_id == "last":
            raise StopAfterLastStep()

    try:
        start_run(store, wf.bind(), {"x": 3}, on_event=stop_after_last)
    except* StopAfterLastStep:  # raised in the step's task, so it arrives grouped
        pass
    (run,) = store.list_runs()
    assert run.status == "interrupted" and store.outcomes(run.run_id) == []  # not ended unscored
    result = continue_run(store, run.run_id)
    assert (result.status, result.output) == ("succeeded", 3)
    assert [(o.source, o.value) for o in store.outcomes(run.run_id)] == [("evaluator", 1.0)]
    assert [r.step_id for r in store.step_records(run.run_id)] == ["first", "last"]  # nothing ran twice
