"""Fixing a pause at its cause: `edit`/`retry --step S` on any completed step of a paused or failed run.

The fixed step gets a new record (or runs again), every completed descendant is superseded (kept,
marked, never deleted) and runs again with the new upstream output, nothing else re-executes, and
steps with side effects are not repeated unless the reviewer says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import ReviewError
from orchestrator.engine.executor import new_lease
from orchestrator.service import review
from orchestrator.service.runner import continue_run, start_run
from orchestrator.store import NewReview, open_store
from tests.conftest import calls

FIXTURES = Path(__file__).parent.parent / "fixtures" / "workflows"
CAUSE = FIXTURES / "fix_cause.yaml"
SIDE_EFFECTS = FIXTURES / "fix_side_effects.yaml"
FAILING = FIXTURES / "fix_failed.yaml"
FIXED_CUSTOMER = {"id": "C-2", "name": "Bea"}


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps log each call to ``steps.log`` and each message sent to ``sent.log`` in ``tmp_path``."""
    monkeypatch.setenv("STEP_LOG", str(tmp_path / "steps.log"))
    monkeypatch.setenv("SENT_LOG", str(tmp_path / "sent.log"))


@pytest.fixture
def fixed(tmp_path: Path) -> Path:
    path = tmp_path / "fixed.json"
    path.write_text(json.dumps(FIXED_CUSTOMER))
    return path


def sent(tmp_path: Path) -> list[str]:
    path = tmp_path / "sent.log"
    return path.read_text().split() if path.exists() else []


class TestCriticPauseFixedAtItsCause:
    @pytest.mark.usefixtures("logs")
    def test_edit_of_the_verified_step_reruns_its_descendants_and_the_run_succeeds(self, durable_cli, fixed,
                                                                                   tmp_path):
        first = durable_cli("run", str(CAUSE))
        assert first.exit_code == 3, first.stderr
        run_id = re.search(r"run (r[0-9a-f]+) paused", first.stdout).group(1)  # type: ignore[union-attr]
        # the pause shows what the critic compared, side by side, and where to fix it
        for text in (first.stdout, durable_cli("show", run_id).stdout):
            assert "critic check_customer verified lookup_customer, make_invoice" in text
            assert re.search(r'"id": "C-1",.*"billed": "C-2",', text), text
            assert f"orchestrator edit {run_id} --step lookup_customer --output" in text
            assert f"orchestrator retry {run_id} --step lookup_customer" in text
        pause_record = next(s["record_id"] for s in durable_cli(
            "show", run_id, "--json").json()["steps"] if s["step_id"] == "check_customer")

        second = durable_cli("edit", run_id, "--step", "lookup_customer", "--output", str(fixed),
                             "--reviewer", "ann", "--comment", "wrong customer")
        assert second.exit_code == 0, second.stderr
        assert "superseded (kept, and run again now): draft_reply, make_invoice, check_customer" in second.stdout

        doc = durable_cli("show", run_id, "--json").json()
        assert doc["status"] == "succeeded"
        assert doc["output"] == {"billed": "C-2", "reply_to": "C-2"}
        steps = {s["step_id"]: s for s in doc["steps"]}
        assert steps["lookup_customer"]["origin"] == "edited" and steps["lookup_customer"]["output"] == FIXED_CUSTOMER
        assert steps["check_customer"]["gates"][0]["passed"] is True
        assert not any(s["superseded"] for s in doc["steps"])
        superseded = [a for a in doc["attempts"] if a["superseded"]]
        assert [(a["step_id"], a["attempt"]) for a in superseded] == [
            ("draft_reply", 1), ("make_invoice", 1), ("check_customer", 1)]
        [decision] = doc["reviews"]
        assert (decision["decision"], decision["step_id"], decision["reviewer"], decision["comment"]) == (
            "edit", "lookup_customer", "ann", "wrong customer")
        assert decision["record_id"] == pause_record  # bound to the pause it answers
        assert decision["superseded"] == [a["record_id"] for a in superseded]
        assert all(a["superseded_by"] is not None for a in superseded)
        # upstream of the fix nothing ran again; the fixed step took the edit instead of running
        assert calls(tmp_path / "steps.log") == ["read_ticket", "lookup_customer", "draft_reply", "make_invoice",
                                                 "check_customer", "draft_reply", "make_invoice", "check_customer",
                                                 "notify"]
        assert sent(tmp_path) == ["Bea"]
        assert "superseded by review" in durable_cli("show", run_id).stdout

    def test_retry_of_a_completed_step_on_a_failed_run_reruns_it_and_its_descendants(self, cli, tmp_path, step_log,
                                                                                     monkeypatch):
        rate = tmp_path / "rate"
        monkeypatch.setenv("RATE_FILE", str(rate))
        rate.write_text("0")  # a stale feed: the conversion downstream fails
        failed = cli("run", str(FAILING), "--json")
        assert failed.exit_code == 1
        run_id = failed.json()["run_id"]
        failed_record = next(s["record_id"] for s in failed.json()["steps"] if s["step_id"] == "convert")
        rate.write_text("1.5")  # the feed is fixed

        retried = cli("retry", run_id, "--step", "fetch_rate", "--comment", "feed was stale")
        assert retried.exit_code == 0, retried.stderr
        doc = cli("show", run_id, "--json").json()
        assert doc["status"] == "succeeded" and doc["error"] is None
        assert doc["output"] == {"converted": 15.0, "label": "amount 10"}
        assert [(a["step_id"], a["attempt"]) for a in doc["attempts"] if a["superseded"]] == [
            ("fetch_rate", 1), ("convert", 1)]
        [decision] = doc["reviews"]
        assert (decision["decision"], decision["step_id"], decision["record_id"]) == (
            "retry", "fetch_rate", failed_record)
        assert sorted(calls(step_log)) == sorted(["fetch_rate", "label", "convert", "fetch_rate", "convert", "total"])


class TestSideEffectsAreNotRepeatedSilently:
    def test_a_fix_that_would_repeat_a_side_effect_lists_it_and_changes_nothing(self, cli, store, fixed, tmp_path,
                                                                                monkeypatch):
        monkeypatch.setenv("SENT_LOG", str(tmp_path / "sent.log"))
        run_id = cli("run", str(SIDE_EFFECTS), "--json").json()["run_id"]
        assert sent(tmp_path) == ["Ann"]  # the notification went out before the critic paused
        before = store.count_rows()
        refused = cli("edit", run_id, "--step", "lookup_customer", "--output", str(fixed))
        assert refused.exit_code == 2
        assert len(refused.stderr.strip().splitlines()) == 1
        assert "side effects that already ran: send" in refused.stderr and "--rerun-side-effects" in refused.stderr
        assert store.count_rows() == before and store.get_run(run_id).status == "paused"
        assert not any(r.superseded for r in store.step_records(run_id))

        accepted = cli("edit", run_id, "--step", "lookup_customer", "--output", str(fixed), "--rerun-side-effects")
        assert accepted.exit_code == 0, accepted.stderr
        assert sent(tmp_path) == ["Ann", "Bea"]
        [decision] = store.reviews(run_id)
        assert decision.rerun_side_effects is True
        assert store.get_run(run_id).status == "succeeded"

    def test_retry_of_the_side_effecting_step_itself_is_guarded_too(self, cli, store, tmp_path, monkeypatch):
        monkeypatch.setenv("SENT_LOG", str(tmp_path / "sent.log"))
        run_id = cli("run", str(SIDE_EFFECTS), "--json").json()["run_id"]
        before = store.count_rows()
        refused = cli("retry", run_id, "--step", "send")
        assert refused.exit_code == 2 and "send" in refused.stderr
        assert store.count_rows() == before


class TestFixesThatDoNotApply:
    @pytest.mark.parametrize("step, message", [
        ("nope", "has no step 'nope'"),
        ("send", "step 'send' of run {run} has not run, not completed"),
    ])
    @pytest.mark.parametrize("verb", ["edit", "retry"])
    def test_a_step_not_in_the_run_or_not_completed_is_exit_2_and_stores_nothing(self, cli, store, fixed, verb,
                                                                                  step, message):
        run_id = cli("run", str(CAUSE), "--json").json()["run_id"]
        before = store.count_rows()
        extra = ["--output", str(fixed)] if verb == "edit" else []
        result = cli(verb, run_id, "--step", step, *extra)
        assert result.exit_code == 2
        assert message.format(run=run_id) in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert store.count_rows() == before and store.get_run(run_id).status == "paused"

    def test_the_failed_step_itself_is_not_completed(self, cli, store, fixed, tmp_path, monkeypatch):
        monkeypatch.setenv("RATE_FILE", str(tmp_path / "rate"))
        (tmp_path / "rate").write_text("0")
        run_id = cli("run", str(FAILING), "--json").json()["run_id"]
        result = cli("edit", run_id, "--step", "convert", "--output", str(fixed))
        assert result.exit_code == 2
        assert "step 'convert' of run" in result.stderr and f"orchestrator resume {run_id}" in result.stderr

    def test_a_succeeded_run_has_nothing_to_fix(self, cli, fixed, tmp_path, monkeypatch):
        monkeypatch.setenv("RATE_FILE", str(tmp_path / "rate"))
        (tmp_path / "rate").write_text("2")
        run_id = cli("run", str(FAILING), "--json").json()["run_id"]
        result = cli("retry", run_id, "--step", "fetch_rate")
        assert result.exit_code == 2 and "is succeeded, not paused" in result.stderr


class TestTheDecisionAndItsLeaseAreOneTransaction:
    def test_a_decision_whose_continuation_cannot_take_the_lease_stores_nothing(self, durable_url):
        store = open_store(durable_url)
        run_id = start_run(store, load_workflow(CAUSE), {}).run_id
        other = new_lease(run_id)
        assert store.acquire_lease(other, statuses=("paused",))  # another process holds the run...
        store.set_run_status(run_id, "paused")  # ...while it still shows as paused
        before = store.count_rows()
        with pytest.raises(ReviewError, match="no longer paused"):
            review.edit(store, run_id, FIXED_CUSTOMER, step="lookup_customer", lease=new_lease(run_id))
        assert store.count_rows() == before
        assert not any(r.superseded for r in store.step_records(run_id))
        assert store.get_run(run_id).status == "paused"

    def test_a_fix_holds_the_lease_for_its_continuation(self, durable_url):
        store = open_store(durable_url)
        run_id = start_run(store, load_workflow(CAUSE), {}).run_id
        mine = new_lease(run_id)
        decision = review.edit(store, run_id, FIXED_CUSTOMER, step="lookup_customer", lease=mine)
        assert decision.lease == mine and decision.superseded == ["draft_reply", "make_invoice", "check_customer"]
        run = store.get_run(run_id)
        assert (run.status, run.owner) == ("running", mine.holder)
        assert not store.acquire_lease(new_lease(run_id), statuses=("running",))  # nobody else can start it
        assert [r.step_id for r in store.step_records(run_id) if r.superseded] == [
            "draft_reply", "make_invoice", "check_customer"]
        assert continue_run(store, run_id, lease=mine).status == "succeeded"

    def test_superseding_a_record_twice_is_refused(self, durable_url):
        store = open_store(durable_url)
        run_id = start_run(store, load_workflow(CAUSE), {}).run_id
        records = {r.step_id: r for r in store.step_records(run_id)}
        pause = records["check_customer"]
        review.edit(store, run_id, FIXED_CUSTOMER, step="lookup_customer")
        store.set_run_status(run_id, "paused")
        again = NewReview(run_id, records["lookup_customer"].id, "lookup_customer", decision="retry",
                          reviewer="bob", comment=None, output_before=None)
        before = store.count_rows()
        with pytest.raises(ReviewError):
            store.decide(again, supersede=[pause.id])
        assert store.count_rows() == before
