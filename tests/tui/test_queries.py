"""The store reads behind the screens (plain functions, no Textual)."""

from __future__ import annotations

from orchestrator.service import review
from orchestrator.service.runner import continue_run
from orchestrator.store import Store
from tests.tui.seed import Seeded
from tui.format import format_age, format_duration, step_status_words
from tui.queries import RunRow, filter_runs, load_run_detail, load_runs


def test_load_runs_puts_paused_runs_first_and_names_their_waiting_step(store: Store, seeded: Seeded) -> None:
    rows = load_runs(store).rows
    assert [(r.run_id, r.status, r.waiting) for r in rows] == [
        (seeded.paused_retryable, "paused", ("score",)),
        (seeded.triage_paused, "paused", ("fetch",)),
        (seeded.paused_twice, "paused", ("score",)),
        (seeded.succeeded, "succeeded", ()),
    ]


def test_filter_runs_by_status_and_part_of_the_workflow_name() -> None:
    rows = [RunRow("r1", "review-demo", "paused", ("s",), 0, 0), RunRow("r2", "triage-demo", "paused", (), 0, 0),
            RunRow("r3", "review-demo", "failed", (), 0, 0)]
    assert [r.run_id for r in filter_runs(rows, workflow="REVIEW")] == ["r1", "r3"]
    assert [r.run_id for r in filter_runs(rows, status="paused", workflow="triage")] == ["r2"]
    assert [r.run_id for r in filter_runs(rows)] == ["r1", "r2", "r3"]


def test_run_detail_lists_steps_in_topological_order_with_their_history(store: Store, seeded: Seeded) -> None:
    detail = load_run_detail(store, seeded.paused_twice)
    assert [(s.step_id, s.status, s.attempt, s.waiting) for s in detail.steps] == [
        ("fetch", "succeeded", 1, False), ("score", "gate_failed", 2, True), ("report", "pending", 0, False)]
    score = detail.step("score")
    assert score.upstream == ["fetch"]
    assert score.inputs["docs"]["topic"] == "safety gloves"  # the record pointer, resolved to fetch's output
    assert [r.decision for r in score.reviews] == ["retry"]
    assert [g.gate for g in score.gate_record.failed_gates] == ["range"]
    assert detail.step("report").upstream == ["score"]  # not run yet: its declared dependencies
    assert detail.waiting == ["score"]


def test_an_approved_step_keeps_showing_the_gates_and_duration_of_the_attempt_it_replaced(
        store: Store, seeded: Seeded) -> None:
    review.approve(store, seeded.paused_retryable, reviewer="carol")
    continue_run(store, seeded.paused_retryable)
    score = load_run_detail(store, seeded.paused_retryable).step("score")
    assert score.record.origin == "approved" and not score.record.gates
    assert score.gate_record is score.attempts[0]
    assert score.duration == score.attempts[0].duration


def test_formatting() -> None:
    assert [format_age(s) for s in (5, 125, 7300, 200000)] == ["5s", "2m", "2h", "2d"]
    assert [format_duration(s) for s in (None, 0.012, 12.34, 125)] == ["", "0.01s", "12.3s", "2m05s"]
    assert step_status_words("gate_failed", True) == "waiting for review"
    assert step_status_words("gate_failed", False, "reject") == "gate failed; rejected by a reviewer"
