"""The notification outbox on every backend: written with a run's end or not at all, claimed by one sender."""

from __future__ import annotations

import time

from orchestrator.store import Lease, NewNotification, NewRun, NewStepRecord, RunEnd, Store
from tests.store.conftest import Backend


def held_run(store: Store) -> Lease:
    wf = store.register_workflow("w", "1", {"name": "w"}, None, "hash")
    lease = Lease("", "host:1", "token", 60.0)
    run_id = store.create_run(NewRun(wf, "w", {}, owner="host:1"), lease=lease)
    return Lease(run_id, "host:1", "token", 60.0)


def note(run_id: str, event: str = "paused") -> NewNotification:
    return NewNotification(run_id, "w", event, {"url": "http://127.0.0.1:1/hook"}, {"event": event, "run_id": run_id})


def test_a_pause_writes_its_notifications_and_a_lost_lease_writes_none(store: Store):
    lease = held_run(store)
    stale = Lease(lease.run_id, "host:2", "other", 60.0)
    assert not store.end_lease(stale, "paused", notifications=[note(lease.run_id)])
    assert store.notifications() == []
    written = note(lease.run_id)
    assert store.end_lease(lease, "paused", notifications=[written])
    [stored] = store.notifications(run_id=lease.run_id)
    assert (stored.key, stored.event, stored.status, stored.tries) == (written.key, "paused", "pending", 0)
    assert stored.body == {"event": "paused", "run_id": lease.run_id}


def test_an_end_written_with_the_last_record_carries_its_notifications(store: Store):
    lease = held_run(store)
    wf_id = store.get_run(lease.run_id).workflow_id
    now = time.time()
    record = NewStepRecord(lease.run_id, wf_id, "a", "reasoning", "a", 1, "succeeded", now, now, output="1",
                           lease_token=lease.token)
    store.insert_step_records([record], end=RunEnd(lease, "succeeded", 1, [note(lease.run_id, "succeeded")]))
    assert [n.event for n in store.notifications()] == ["succeeded"]


def test_one_of_two_senders_claims_a_notification_and_only_it_records_the_result(backend: Backend):
    first, second = backend.connect(), backend.connect()
    lease = held_run(first)
    first.end_lease(lease, "paused", notifications=[note(lease.run_id)])
    now = time.time()
    won = first.claim_notifications("sender-a", now=now, claim_seconds=60)
    lost = second.claim_notifications("sender-b", now=now, claim_seconds=60)
    assert len(won) == 1 and lost == []
    assert not second.finish_notification(won[0].id, "sender-b", delivered=True, tries=1, error=None, retry_at=None,
                                          now=now)
    assert second.notification_claim_holders(now) == ["sender-a"]
    assert second.release_notification_claims("sender-a") == 1  # sender-a died
    [again] = second.claim_notifications("sender-b", now=now, claim_seconds=60)
    assert second.finish_notification(again.id, "sender-b", delivered=False, tries=1, error="HTTP 503",
                                      retry_at=now + 30, now=now)
    assert second.claim_notifications("sender-b", now=now, claim_seconds=60) == []  # not due yet
    [later] = first.claim_notifications("sender-a", now=now + 31, claim_seconds=60)
    assert first.finish_notification(later.id, "sender-a", delivered=True, tries=2, error=None, retry_at=None,
                                     now=now + 31)
    [done] = first.notifications()
    assert (done.status, done.tries, done.last_error, done.claimed_by) == ("delivered", 2, None, None)
    assert first.notifications(failed=True) == []


def test_a_claim_that_lapsed_is_taken_by_another_sender(store: Store):
    lease = held_run(store)
    store.end_lease(lease, "failed", notifications=[note(lease.run_id, "failed")])
    now = time.time()
    assert len(store.claim_notifications("stalled", now=now, claim_seconds=5)) == 1
    assert store.claim_notifications("other", now=now + 1, claim_seconds=5) == []
    [taken] = store.claim_notifications("other", now=now + 6, claim_seconds=5)
    assert taken.claimed_by == "other"
    assert store.finish_notification(taken.id, "other", delivered=False, tries=40, error="gave up", retry_at=None,
                                     now=now + 6)
    assert [(n.status, n.last_error) for n in store.notifications(failed=True)] == [("failed", "gave up")]
