"""Bringing the analytics summary up to date on PostgreSQL blocks no writer.

A summary must wait for the transactions in flight that may commit records below the ids it
summarises. It used to take ``LOCK TABLE ... IN SHARE MODE`` for that: the lock request queued
behind the open writer, and every new writer queued behind the request, so a one-row UPDATE waited
as long as the slowest transaction (4.85 s in the review). Now the summary waits without a lock.
"""

from __future__ import annotations

import threading

import psycopg

from orchestrator.store import open_store
from tests.pg_cluster import wait_for
from tests.store.rows import add_run, add_workflow, step


def test_a_writer_is_not_held_back_while_stats_waits_for_an_open_transaction(postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        wf = add_workflow(store)
        run_id = add_run(store, wf)
        store.insert_step_record(step(run_id, wf, "a"))
        dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as open_writer, psycopg.connect(dsn, autocommit=True) as other_writer:
            open_writer.execute("INSERT INTO step_records (run_pk, workflow_id, step_id, step_type, agent, attempt, "
                                "status, started_at, ended_at, origin) SELECT run_pk, workflow_id, 'b', step_type, "
                                "agent, 1, 'succeeded', started_at, ended_at, origin FROM step_records LIMIT 1")
            counted: list[object] = []
            reader = threading.Thread(target=lambda: counted.append(store.step_period_counts("wf")))
            reader.start()
            waiting = ("SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                       "AND (query LIKE 'LOCK TABLE%' OR query LIKE '%FROM pg_locks WHERE locktype = ''virtualxid''%')")
            wait_for(lambda: counted or other_writer.execute(waiting).fetchone(), "the summary to wait for the writer")
            other_writer.execute("SET lock_timeout = '3s'")
            other_writer.execute("UPDATE step_records SET agent = agent WHERE step_id = 'a'")  # not queued
            assert reader.is_alive() or counted  # (the summary may be waiting for the open writer, or done)
            open_writer.commit()
            reader.join(timeout=30)
            assert counted, "the summary never finished"
        assert sorted(row.step_id for row in store.step_period_counts("wf")) == ["a", "b"]
    finally:
        store.close()

