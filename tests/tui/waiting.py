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


async def settle(pilot) -> None:
    """Wait until every worker (store reads, decisions, continuations) has finished."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
