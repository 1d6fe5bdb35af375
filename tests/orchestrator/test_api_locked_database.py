"""The async API leaves the caller's event loop free while the database makes it wait: with another
connection holding SQLite's write lock, a run (or a decision's continuation) waits for the lock on
a worker thread while the caller's other tasks keep their schedule; it then finishes as usual."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from orchestrator import Orchestrator
from tests.conftest import FIXTURES

GATED = FIXTURES / "gated.yaml"
"""x defaults to 1, which pauses at `scored` (score 0.1 < 0.5); x=9 succeeds."""

TICK = 0.05
HOLD = 2.0
ALLOWED_LATENESS = 0.1


class WriteLock:
    """Another connection holding the database's write lock (``BEGIN IMMEDIATE``) for ``HOLD`` seconds,
    on a thread of its own; ``held_from``/``held_until`` are the monotonic times it held it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.taken = threading.Event()
        self.held_from = 0.0
        self.held_until = 0.0

    def hold(self) -> None:
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            self.held_from = time.monotonic()
            self.taken.set()
            time.sleep(HOLD)
            self.held_until = time.monotonic()
            connection.execute("ROLLBACK")
        finally:
            connection.close()


async def lateness_while_locked(db: Path, call: Callable[[], Awaitable[str]]) -> tuple[str, list[float], float]:
    """Run ``call()`` while another connection holds the write lock and a ticker sleeps ``TICK`` in a loop;
    returns what ``call`` returned, how late each tick due while the lock was held woke up, and when
    ``call`` returned (monotonic)."""
    lock = WriteLock(db)
    ticks: list[tuple[float, float]] = []  # (due, woke)
    result = ""
    returned_at = 0.0

    async def ticker() -> None:
        while True:
            due = time.monotonic() + TICK
            await anyio.sleep(TICK)
            ticks.append((due, time.monotonic()))

    async def caller() -> None:
        nonlocal result, returned_at
        result = await call()
        returned_at = time.monotonic()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, lock.hold)
        await anyio.to_thread.run_sync(lock.taken.wait)
        tg.start_soon(ticker)
        await caller()
        tg.cancel_scope.cancel()
    late = [woke - due for due, woke in ticks if lock.held_from <= due <= lock.held_until]
    assert lock.held_until > 0, "the lock was held for its whole time"
    assert returned_at >= lock.held_until, "the call had to wait for the lock"
    return result, late, returned_at


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


async def test_arun_waits_for_a_locked_database_without_holding_the_callers_loop(db: Path, anyio_backend):
    with Orchestrator(f"sqlite:///{db}") as orch:
        async def run() -> str:
            return (await orch.arun(GATED, {"x": 9})).status

        status, late, _ = await lateness_while_locked(db, run)

    assert status == "succeeded"
    assert len(late) >= HOLD / TICK / 2, "the ticker ran while the database was locked"
    assert max(late) < ALLOWED_LATENESS


@pytest.mark.parametrize(("twin", "ends"), [("aapprove", "succeeded"), ("aretry", "paused"), ("aresume", "paused")])
async def test_a_paused_run_continued_on_a_locked_database_leaves_the_callers_loop_free(db: Path, twin: str, ends: str,
                                                                                          anyio_backend):
    with Orchestrator(f"sqlite:///{db}", reviewer="ann") as orch:
        paused = await orch.arun(GATED)
        assert paused.status == "paused"

        async def continue_it() -> str:
            return (await getattr(orch, twin)(paused.run_id)).status

        status, late, _ = await lateness_while_locked(db, continue_it)
        stored = orch.get_run(paused.run_id)

    assert status == stored.status == ends
    assert len(late) >= HOLD / TICK / 2
    assert max(late) < ALLOWED_LATENESS
