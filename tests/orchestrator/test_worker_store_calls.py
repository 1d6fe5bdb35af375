"""Where a worker makes a run's store calls: on its event loop for an embedded database (SQLite, whose calls
cost less than a hand-over to a thread), on worker threads for a server (PostgreSQL), or where its options
say."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import enqueue_run
from orchestrator.service.worker import Worker, WorkOptions
from orchestrator.store import Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.conftest import FIXTURES


class ThreadRecordingStore(DelegatingStore):
    """A store that notes, for every step record written, whether the event loop's (main) thread wrote it."""

    def __init__(self, store: Store) -> None:
        self.url = store.url
        self.store = store
        self.on_main_thread: list[bool] = []

    def target(self) -> Store:
        return self.store

    def insert_step_records(self, records: Sequence[Any], **kwargs: Any) -> list[int]:
        self.on_main_thread.append(threading.current_thread() is threading.main_thread())
        return self.store.insert_step_records(records, **kwargs)

    def close(self) -> None:
        self.store.close()


def drain_one_run(url: str, off_loop: bool | None) -> ThreadRecordingStore:
    store = concrete(ThreadRecordingStore)(open_store(url))
    enqueue_run(store, load_workflow(FIXTURES / "ok.yaml"), {})
    worker = Worker(store, WorkOptions(once=True, store_calls_off_loop=off_loop))
    anyio.run(worker.run, False)
    assert worker.summary.executed == 1
    store.close()
    return store


def test_a_worker_on_sqlite_writes_its_records_on_its_loop(db_url: str, step_log):
    recorded = drain_one_run(db_url, None)
    assert recorded.on_main_thread and all(recorded.on_main_thread)


def test_a_worker_on_postgresql_writes_its_records_off_its_loop(postgres_url: str, step_log):
    recorded = drain_one_run(postgres_url, None)
    assert recorded.on_main_thread and not any(recorded.on_main_thread)


@pytest.mark.parametrize("off_loop", [True, False])
def test_the_workers_option_decides_where_store_calls_are_made(db_url: str, off_loop: bool, step_log):
    recorded = drain_one_run(db_url, off_loop)
    assert recorded.on_main_thread and all(on_main is not off_loop for on_main in recorded.on_main_thread)
