"""Events for the program that runs a workflow: ``on_event=``, ``stream``/``astream`` and their resume twins.

Events come in the order they happen, from the run's start to its end (the last item is always the run's
``RunFinished``); instances, iterations and child runs are told apart by their fields; a consumer that reads
slowly gets a note of what it missed and never stalls the run; one that raises changes nothing stored.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from orchestrator import Orchestrator
from orchestrator.api import EventsDropped
from orchestrator.service.streaming import EventBuffer
from orchestrator.spec.events import RunFinished, RunStarted, StepFinished, StepStarted, Token
from tests.conftest import FIXTURES
from tests.flow.conftest import FLOW


@pytest.fixture
def orch(db_url: str):
    with Orchestrator(db_url) as o:
        yield o


def test_a_stream_tells_each_step_from_the_runs_start_to_its_end(orch: Orchestrator):
    items = list(orch.stream(FIXTURES / "ok.yaml"))
    assert isinstance(items[0], RunStarted) and isinstance(items[-1], RunFinished)
    run_id = items[0].run_id
    assert items[-1].status == "succeeded" == orch.get_run(run_id).status
    started = [e.step_id for e in items if isinstance(e, StepStarted)]
    finished = [e.step_id for e in items if isinstance(e, StepFinished)]
    assert started == finished == [s.step_id for s in orch.get_run(run_id).steps]
    for step in started:  # each step starts before it finishes
        assert items.index(next(e for e in items if isinstance(e, StepStarted) and e.step_id == step)) < \
            items.index(next(e for e in items if isinstance(e, StepFinished) and e.step_id == step))


def test_a_map_streams_each_instance_and_its_pause(orch: Orchestrator):
    items = list(orch.stream(FLOW / "map.yaml"))
    instances = sorted(e.index for e in items if isinstance(e, StepFinished) and e.step_id == "summarize"
                       and e.index is not None)
    assert instances == [0, 1, 2, 3, 4]
    waiting = [e for e in items if isinstance(e, StepFinished) and e.status == "gate_failed"]
    assert [e.unit for e in waiting] == ["summarize[3]"] and waiting[0].failed_gates == 1
    end = items[-1]
    assert isinstance(end, RunFinished) and end.status == "paused" and "summarize[3]" in end.paused_steps[0]


def test_a_loop_streams_its_iterations_in_order(orch: Orchestrator):
    items = list(orch.stream(FLOW / "loop.yaml"))
    iterations = [e.iteration for e in items if isinstance(e, StepFinished) and e.step_id == "draft"
                  and e.iteration is not None]
    assert iterations == sorted(iterations) and iterations[0] == 1 and len(iterations) >= 2
    assert isinstance(items[-1], RunFinished)


def test_a_child_run_streams_inside_its_parents_stream(orch: Orchestrator):
    items = list(orch.stream(FLOW / "tree_parent.yaml"))
    root = items[0]
    assert isinstance(root, RunStarted) and root.parent_run_id is None
    child = next(e for e in items if isinstance(e, RunStarted) and e.parent_run_id == root.run_id)
    assert child.parent_step == "research"
    child_end = next(i for i, e in enumerate(items) if isinstance(e, RunFinished) and e.run_id == child.run_id)
    research_done = next(i for i, e in enumerate(items) if isinstance(e, StepFinished) and e.step_id == "research")
    assert child_end < research_done  # the child ends before its parent's step is recorded
    assert isinstance(items[-1], RunFinished) and items[-1].run_id == root.run_id


def test_a_slow_consumer_never_stalls_the_run_and_is_told_what_it_missed(orch: Orchestrator):
    stream = orch.stream(FLOW / "map.yaml", {"count": 30}, buffer=2)
    first = next(stream)
    assert isinstance(first, RunStarted)
    for _ in range(600):  # the consumer reads nothing while the run goes on to its end
        if orch.get_run(first.run_id).status != "running":
            break
        time.sleep(0.05)
    assert orch.get_run(first.run_id).status == "paused"
    rest = list(stream)
    dropped = [e for e in rest if isinstance(e, EventsDropped)]
    assert len(dropped) == 1 and dropped[0].count > 0 and set(dropped[0].kinds) <= {"StepStarted", "StepFinished"}
    assert isinstance(rest[-1], RunFinished) and rest[-1].status == "paused"
    assert len(orch.get_run(first.run_id).steps) >= 3  # every record is stored, whatever the consumer missed


def test_a_flood_of_tokens_never_crowds_the_steps_events_out_of_the_buffer():
    buffer = EventBuffer(capacity=4)
    for i in range(6):  # a consumer that has read nothing yet: the tokens fill half the buffer, no more
        buffer.put(Token(run_id="r", step_id="reply", attempt=1, call=1, text=str(i)))
    buffer.put(StepFinished(run_id="r", step_id="reply", status="succeeded", attempt=1, duration=0.1))
    buffer.put(StepStarted(run_id="r", step_id="sign", attempt=1, started_at=0.0))
    buffer.put(StepFinished(run_id="r", step_id="sign", status="succeeded", attempt=1, duration=0.1))
    buffer.put(RunFinished(run_id="r", status="succeeded"))
    buffer.close()
    items = list(iter(buffer.get, None))
    [note] = [i for i in items if isinstance(i, EventsDropped)]
    assert note.kinds == {"Token": 4, "StepFinished": 1}
    assert [i.text for i in items if isinstance(i, Token)] == ["0", "1"]
    assert [type(i).__name__ for i in items if not isinstance(i, Token | EventsDropped)] == [
        "StepFinished", "StepStarted", "RunFinished"]


def test_a_listener_that_raises_changes_nothing_that_happened(orch: Orchestrator):
    seen: list[str] = []

    def broken(event: object) -> None:
        seen.append(type(event).__name__)
        raise RuntimeError("listener bug")

    run = orch.run(FIXTURES / "ok.yaml", on_event=broken)
    assert run.status == "succeeded" and all(s.status == "succeeded" for s in run.steps)
    assert seen[0] == "RunStarted" and seen[-1] == "RunFinished"


def test_resume_streams_the_continuation(orch: Orchestrator):
    paused = orch.run(FLOW / "map.yaml")
    assert paused.status == "paused"
    items = list(orch.resume_stream(paused.run_id))
    assert isinstance(items[0], RunStarted) and items[0].resumed and items[0].run_id == paused.run_id
    assert isinstance(items[-1], RunFinished) and items[-1].run_id == paused.run_id


def test_astream_yields_the_same_events_on_the_callers_loop(orch: Orchestrator):
    async def collect() -> list[object]:
        return [item async for item in orch.astream(FLOW / "map.yaml")]

    items = asyncio.run(collect())
    assert isinstance(items[0], RunStarted) and isinstance(items[-1], RunFinished)
    assert sorted(e.index for e in items if isinstance(e, StepFinished) and e.step_id == "summarize"
                  and e.index is not None) == [0, 1, 2, 3, 4]


def test_an_async_consumer_that_stops_early_leaves_no_execution_behind(orch: Orchestrator):
    async def first_two() -> str:
        stream = orch.astream(FLOW / "map.yaml")
        run_id = ""
        async for item in stream:
            run_id = item.run_id
            break
        await stream.aclose()
        return run_id

    run_id = asyncio.run(first_two())
    assert orch.get_run(run_id).status == "paused"  # it ran to its pause before the stream closed
