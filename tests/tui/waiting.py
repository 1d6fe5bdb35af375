"""Waiting for the review app's workers in pilot tests."""

from __future__ import annotations

from collections.abc import Callable


async def wait_for(pilot, condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds."""
    waited = 0.0
    while not condition():
        if waited >= timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        await pilot.pause(0.05)
        waited += 0.05


async def settle(pilot, rounds: int = 50) -> None:
    """Wait until every worker (store reads, decisions, continuations) has finished.

    An exclusive worker (a reload) is cancelled by design when a newer one starts; waiting on it
    raises WorkerCancelled, so the wait starts over on the workers that are still meant to finish.
    """
    from textual.worker import WorkerCancelled

    for _ in range(rounds):
        live = [worker for worker in pilot.app.workers if not worker.is_cancelled]
        try:
            await pilot.app.workers.wait_for_complete(live)
            break
        except WorkerCancelled:
            continue
    else:
        raise AssertionError(f"workers kept being cancelled and restarted for {rounds} rounds")
    await pilot.pause()
