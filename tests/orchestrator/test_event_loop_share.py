"""A run shares its process's event loop: quick steps that never suspend still let the lease be
renewed and other work run, a quick sync step alone in flight still runs on a worker thread, and a
slow one alone in flight does not hold the loop while it runs."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from orchestrator import Workflow, open_store, start_run
from orchestrator.service.runner import start_run_async
from orchestrator.spec.context import StepContext


def where_am_i(value: int) -> str:
    return threading.current_thread().name


def test_a_chain_of_quick_sync_steps_runs_each_on_a_worker_thread_and_records_each_output(tmp_path):
    wf = Workflow("quick-sync-chain", inputs={"x": "integer"}, output="s49")
    wf.step(id="s0", inputs={"value": "$inputs.x"})(lambda value: value + 1)
    for i in range(1, 50):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"})(lambda value: value + 1)
    wf.step(id="where", inputs={"value": "s49"})(where_am_i)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")

    result = start_run(store, wf.bind(), {"x": 0})

    records = {r.step_id: r.output for r in store.step_records(result.run_id)}
    assert result.status == "succeeded"
    assert result.output == 50
    assert [records[f"s{i}"] for i in range(50)] == list(range(1, 51))
    assert records["where"] == "orchestrator step"


def test_a_failing_quick_sync_step_alone_in_flight_is_recorded_with_its_error(tmp_path):
    def boom(value: int) -> int:
        raise ValueError(f"bad value {value}")

    wf = Workflow("quick-sync-failure", inputs={"x": "integer"}, output="boom")
    wf.step(id="first", inputs={"value": "$inputs.x"})(lambda value: value + 1)
    wf.step(id="boom", inputs={"value": "first"})(boom)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")

    result = start_run(store, wf.bind(), {"x": 1})

    record = store.step_records(result.run_id)[-1]
    assert result.status == "failed"
    assert (record.step_id, record.status, record.error_type, record.error_message) == (
        "boom", "failed", "ValueError", "bad value 2")


def test_a_slow_sync_step_alone_in_flight_leaves_the_event_loop_free_meanwhile(tmp_path):
    """The step waits, on its thread, for the loop to run something after it started: were it holding
    the loop, the loop could not answer and the step would give up at its deadline."""
    started = threading.Event()
    loop_ran_meanwhile = threading.Event()

    def slow(value: int) -> bool:
        started.set()
        return loop_ran_meanwhile.wait(timeout=60)

    wf = Workflow("slow-sync", inputs={"x": "integer"}, output="slow")
    wf.step(id="quick", inputs={"value": "$inputs.x"})(lambda value: value + 1)
    wf.step(id="slow", inputs={"value": "quick"})(slow)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")

    async def main() -> tuple[str, object]:
        async def answer() -> None:
            while not started.is_set():
                await anyio.sleep(0.01)
            loop_ran_meanwhile.set()  # the loop runs this while the step is still in flight

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            result = await start_run_async(store, wf.bind(), {"x": 1})
            tg.cancel_scope.cancel()
        return result.status, result.output

    assert anyio.run(main) == ("succeeded", True)


@pytest.mark.xdist_group("sub_second_leases")  # shares a worker with tests/orchestrator/test_lease_keeper.py: why there
def test_a_long_chain_of_steps_that_never_suspend_keeps_its_lease_renewed(tmp_path, monkeypatch):
    """Leases of 0.3 s, renewed every 0.1 s; the chain runs for about a second without a step ever
    suspending. The last step reads the run as others see it: still running, not interrupted."""
    monkeypatch.setenv("ORCHESTRATOR_LEASE_SECONDS", "0.3")
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    def busy(value: int) -> int:
        time.sleep(0.02)  # inline: holds the loop's thread, as a CPU-bound step would
        return value + 1

    def seen_from_outside(value: int, ctx: StepContext) -> str:
        return open_store(url).get_run(ctx.run_id).status

    wf = Workflow("never-suspends", inputs={"x": "integer"}, output="seen")
    wf.step(id="s0", inputs={"value": "$inputs.x"}, inline=True)(busy)
    for i in range(1, 50):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"}, inline=True)(busy)
    wf.step(id="seen", inputs={"value": "s49"}, inline=True)(seen_from_outside)

    result = start_run(open_store(url), wf.bind(), {"x": 0})

    assert result.status == "succeeded"
    assert result.output == "running"
