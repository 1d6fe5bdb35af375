"""Where the async API makes a run's store calls on the embedded SQLite store: on the caller's event loop
while the database is free (a hand-over to a thread and back costs more than the call), on a worker thread
whenever it would wait for a lock, so a locked database never holds the loop (see also
``test_api_locked_database.py``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.to_thread

from orchestrator import Workflow, open_store
from orchestrator.service.runner import start_run_async
from orchestrator.store import Store


async def inc(value: int) -> int:
    return value + 1


def chain(n: int) -> Workflow:
    wf = Workflow(f"chain-{n}", inputs={"x": "integer"}, output=f"s{n - 1}")
    wf.step(id="s0", inputs={"value": "$inputs.x"})(inc)
    for i in range(1, n):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"})(inc)
    return wf


def threads_writing_records(store: Store) -> list[str]:
    """The name of the thread of every ``INSERT INTO step_records`` the store's connection makes from now on."""
    names: list[str] = []

    def seen(statement: str) -> None:
        if statement.startswith("INSERT INTO step_records"):
            names.append(threading.current_thread().name)

    store.connection.set_trace_callback(seen)  # type: ignore[attr-defined]
    return names


def test_on_a_free_database_the_async_api_writes_every_record_on_the_callers_thread(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    writers = threads_writing_records(store)

    async def main() -> tuple[str, str, int]:
        result = await start_run_async(store, chain(20).bind(), {"x": 1})
        return threading.current_thread().name, result.status, result.output

    caller, status, output = anyio.run(main)
    store.close()

    assert (status, output) == ("succeeded", 21)
    assert writers == [caller] * 20


def test_a_record_written_while_another_connection_holds_the_write_lock_is_written_on_a_worker_thread(
        tmp_path: Path):
    db = tmp_path / "runs.db"
    store = open_store(f"sqlite:///{db}")
    writers = threads_writing_records(store)
    taken, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait(timeout=30)
        connection.execute("ROLLBACK")
        connection.close()

    async def locked_step(value: int) -> int:
        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        await anyio.to_thread.run_sync(taken.wait)
        threading.Timer(0.3, release.set).start()  # let go while the record waits for the lock
        return value + 1

    wf = Workflow("locked-once", inputs={"x": "integer"}, output="after")
    wf.step(id="before", inputs={"value": "$inputs.x"})(inc)
    wf.step(id="locked", inputs={"value": "before"})(locked_step)
    wf.step(id="after", inputs={"value": "locked"})(inc)

    async def main() -> tuple[str, str, int]:
        result = await start_run_async(store, wf.bind(), {"x": 1})
        return threading.current_thread().name, result.status, result.output

    caller, status, output = anyio.run(main)
    store.close()

    assert (status, output) == ("succeeded", 4)
    before, tried, waited, after = writers  # the locked record: tried on the loop, then made on a worker thread
    assert before == tried == after == caller != waited
