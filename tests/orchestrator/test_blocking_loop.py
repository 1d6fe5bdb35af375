"""Blocking entry points reuse one event loop per thread, so state bound to a loop survives between runs."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from orchestrator import Workflow, open_store, start_run

seen_loops: list[asyncio.AbstractEventLoop] = []
"""The loops themselves, kept alive so two of them never share an id."""
seen_threads: list[int] = []
shared: dict[str, asyncio.Lock] = {}  # noqa: TID251 - what user code binds to a loop, on purpose

wf = Workflow("loop-reuse", inputs={"x": "integer"}, output="hop")


@wf.step(inputs={"x": "$inputs.x"})
async def bound(x: int) -> int:
    seen_loops.append(asyncio.get_running_loop())
    lock = shared.setdefault("lock", asyncio.Lock())  # noqa: TID251 - bound to the loop of its first use
    async with lock:
        return x + 1


@wf.step(inputs={"value": "bound"})
def hop(value: int) -> int:
    seen_threads.append(threading.get_ident())
    return value * 2


def test_consecutive_runs_in_one_thread_share_a_loop():
    seen_loops.clear(), seen_threads.clear(), shared.clear()
    store = open_store("memory://")
    first = start_run(store, wf.bind(), {"x": 1})
    second = start_run(store, wf.bind(), {"x": 2})
    assert (first.status, first.output, second.status, second.output) == ("succeeded", 4, "succeeded", 6)
    assert seen_loops[0] is seen_loops[1]  # an asyncio.Lock made in the first run still works in the second
    assert len(seen_threads) == 2 and threading.get_ident() not in seen_threads  # sync steps still leave the loop


def test_each_thread_runs_on_its_own_loop():
    seen_loops.clear(), shared.clear()
    store = open_store("memory://")
    results = []

    def one(x: int) -> None:
        shared.pop("lock", None)
        results.append(start_run(store, wf.bind(), {"x": x}).status)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
        t.join()
    assert results == ["succeeded", "succeeded"]
    assert seen_loops[0] is not seen_loops[1]


stopper = Workflow("interrupted", inputs={"x": "integer"}, output="waits")


@stopper.step(inputs={"x": "$inputs.x"})
def presses_ctrl_c(x: int) -> int:
    signal.raise_signal(signal.SIGINT)  # delivered to the main thread, as a terminal's Ctrl-C is
    return x


@stopper.step(inputs={"x": "presses_ctrl_c"})
async def waits(x: int) -> int:
    await asyncio.sleep(30)
    return x


def test_ctrl_c_cancels_the_run_hands_its_lease_back_and_leaves_ctrl_c_as_it_was(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    with pytest.raises(KeyboardInterrupt):
        start_run(store, stopper.bind(), {"x": 1})
    (run,) = store.list_runs()
    assert run.status == "interrupted"  # handed back at once, resumable now rather than after the lease
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert start_run(store, wf.bind(), {"x": 1}).status == "succeeded"  # the thread's loop still serves
