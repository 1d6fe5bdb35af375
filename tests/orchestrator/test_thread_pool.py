"""The sync-step pool's quick hand-off keeps working after more sync calls than it has threads ran at
once: its count of idle threads does not drift (before, one call past the limit left the pool thinking a
thread was busy for ever, and the hand-off stayed off for the life of the process)."""

from __future__ import annotations

import asyncio
import threading

from orchestrator.bind.threads import CallHistory, DaemonPool

THREADS = 4
CALLS = 10
"""More calls at once than the pool has threads: the rest wait in its queue."""


async def returned_without_yielding(pool: DaemonPool, history: CallHistory) -> bool:
    """Whether a quick call came back through the hand-off: without the event loop running anything else."""
    turned: list[bool] = []
    asyncio.get_running_loop().call_soon(turned.append, True)
    await pool.run(lambda: None, history=history)
    return not turned


async def burst_then_quick_calls(pool: DaemonPool) -> tuple[int, int]:
    release = threading.Event()
    burst = [asyncio.ensure_future(pool.run(release.wait)) for _ in range(CALLS)]
    await asyncio.sleep(0)  # every call of the burst is handed to the pool
    release.set()
    assert await asyncio.gather(*burst) == [True] * CALLS
    history = CallHistory()
    tries = 0
    while tries < 200:  # the hand-off waits at most 1 ms: on a busy machine a call may miss it
        tries += 1
        if await returned_without_yielding(pool, history):
            return tries, pool.threads
        await asyncio.sleep(0)
    return 0, pool.threads


def test_the_quick_hand_off_works_after_more_calls_than_threads_ran_at_once():
    tries, threads = asyncio.run(burst_then_quick_calls(DaemonPool(max_threads=THREADS)))
    assert tries > 0, "no quick call was handed back directly in 200 tries"
    assert threads == THREADS
