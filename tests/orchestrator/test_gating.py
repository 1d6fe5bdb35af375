"""Gates, on_gate_fail policies, review decisions, next-step context and critics.

The story throughout: a run stops at the step that went wrong instead of at the end, and a
person decides what happens next; nothing that already completed runs again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.core.errors import LeaseHeldError, ReviewError
from orchestrator.service import review
from orchestrator.service.runner import start_run
from orchestrator.service.worker import ReviewTimeouts
from orchestrator.store import NewReview, open_store
from tests.conftest import FIXTURES, REPO, calls


def _steps(doc):
    return {s["step_id"]: s for s in doc["steps"]}


def _paused_run(cli) -> str:
    result = cli("run", str(FIXTURES / "gated.yaml"), "--json")
    assert result.exit_code == 3
    return result.json()["run_id"]


class TestPausePolicy:
    def test_failing_gate_pauses_only_its_descendants(self, cli, step_log):
        result = cli("run", str(FIXTURES / "gated.yaml"), "--json")
        assert result.exit_code == 3
        doc = result.json()
        steps = _steps(doc)
        assert doc["status"] == "paused"
        assert doc["paused_steps"] == ["scored"]
        assert steps["scored"]["status"] == "gate_failed"
        assert steps["scored"]["gates"] == [{"gate": "range", "passed": False, "score": 0.0,
                                             "reason": "field 'score' = 0.1 is below min 0.5", "severity": "block",
                                             "details": steps["scored"]["gates"][0]["details"]}]
        assert steps["independent"]["status"] == "succeeded"  # the independent branch finished
        assert "after_scored" not in steps and "final" not in steps
        assert calls(step_log).count("score_of") == 1

    def test_show_displays_gate_results(self, cli):
        run_id = _paused_run(cli)
        shown = cli("show", run_id)
        assert shown.exit_code == 0
        assert "✗ scored / range: field 'score' = 0.1 is below min 0.5" in shown.stdout

    def test_runs_lists_the_paused_step(self, cli):
        run_id = _paused_run(cli)
        listed = cli("runs", "--status", "paused", "--json").json()
        assert [r["run_id"] for r in listed] == [run_id]
        table = cli("runs")
        assert "scored" in table.stdout


class TestOtherPolicies:
    def test_fail_policy_fails_the_run(self, cli):
        result = cli("run", str(FIXTURES / "gated_fail.yaml"), "--json")
        assert result.exit_code == 1
        doc = result.json()
        assert doc["status"] == "failed"
        assert _steps(doc)["scored"]["error"] == "GateFailed: field 'score' = 0.1 is below min 0.5"

    def test_warn_policy_records_and_continues(self, cli):
        result = cli("run", str(FIXTURES / "gated_warn.yaml"), "--json")
        assert result.exit_code == 0
        scored = _steps(result.json())["scored"]
        assert scored["status"] == "succeeded"
        assert scored["gates"][0]["passed"] is False

    def test_retry_policy_hands_feedback_to_the_next_attempt(self, cli, step_log):
        result = cli("run", str(FIXTURES / "gated_retry.yaml"), "--json")
        assert result.exit_code == 0
        doc = result.json()
        attempts = [a for a in doc["attempts"] if a["step_id"] == "scored"]
        assert [a["status"] for a in attempts] == ["failed", "succeeded"]
        assert _steps(doc)["scored"]["output"]["feedback"] == ["field 'score' = 0.1 is below min 0.5"]

    def test_bad_gate_configuration_is_a_validation_error(self, cli):
        result = cli("validate", str(FIXTURES / "bad_gate.yaml"), db=False)
        assert result.exit_code == 2
        assert "bad_gate.yaml:6: steps.src.gates[0]: step 'src' gate 'min_items': unknown parameter 'cout'" \
            in result.stderr
        result = cli("validate", str(FIXTURES / "unknown_gate.yaml"), db=False)
        assert "gate 'min_itemz': unknown gate (did you mean 'min_items'?)" in result.stderr


class TestDecisions:
    def test_approve_continues_without_rerunning_anything(self, cli, step_log, store):
        run_id = _paused_run(cli)
        before = calls(step_log)
        result = cli("approve", run_id, "--comment", "looks fine", "--reviewer", "ana", "--json")
        assert result.exit_code == 0
        doc = json.loads(result.stdout[result.stdout.index("{"):])
        assert doc["status"] == "succeeded"
        after = calls(step_log)[len(before):]
        assert "score_of" not in after and "start" not in after and "sleepy" not in after
        assert after.count("double") == 1 and after.count("add") == 1
        (rev,) = store.reviews(run_id)
        assert (rev.decision, rev.reviewer, rev.comment) == ("approve", "ana", "looks fine")
        assert rev.output_before == {"score": 0.1}
        assert _steps(doc)["scored"]["origin"] == "approved"

    def test_edit_replaces_the_output_when_it_passes_the_gates(self, cli, tmp_path, store, step_log):
        run_id = _paused_run(cli)
        (tmp_path / "fixed.json").write_text('{"score": 0.8}')
        result = cli("edit", run_id, "--output", str(tmp_path / "fixed.json"), "--json")
        assert result.exit_code == 0
        doc = json.loads(result.stdout[result.stdout.index("{"):])
        assert doc["output"] == 0.8 * 2 + 1
        assert _steps(doc)["scored"]["origin"] == "edited"
        assert _steps(doc)["scored"]["gates"][0]["passed"] is True
        (rev,) = store.reviews(run_id)
        assert (rev.decision, rev.output_before, rev.output_after, rev.forced) == \
            ("edit", {"score": 0.1}, {"score": 0.8}, False)
        assert calls(step_log).count("score_of") == 1

    def test_edit_that_fails_the_gates_changes_nothing(self, cli, tmp_path, store):
        run_id = _paused_run(cli)
        (tmp_path / "still_bad.json").write_text('{"score": 0.2}')
        before = store.count_rows()
        result = cli("edit", run_id, "--output", str(tmp_path / "still_bad.json"))
        assert result.exit_code == 2
        assert "fails its gates (range: field 'score' = 0.2 is below min 0.5)" in result.stderr
        assert store.count_rows() == before
        assert store.get_run(run_id).status == "paused"

    def test_edit_with_force_is_recorded_as_forced(self, cli, tmp_path, store):
        run_id = _paused_run(cli)
        (tmp_path / "still_bad.json").write_text('{"score": 0.2}')
        result = cli("edit", run_id, "--output", str(tmp_path / "still_bad.json"), "--force")
        assert result.exit_code == 0
        assert store.reviews(run_id)[0].forced is True
        assert "edit recorded for step 'scored' of run" in result.stdout
        assert "(forced past its failing checks)" in result.stdout

    def test_an_edit_its_gates_pass_is_not_said_to_be_forced(self, cli, tmp_path, store):
        run_id = _paused_run(cli)
        (tmp_path / "good.json").write_text('{"score": 0.9}')
        result = cli("edit", run_id, "--output", str(tmp_path / "good.json"), "--force")
        assert result.exit_code == 0
        assert store.reviews(run_id)[0].forced is False
        assert "forced" not in result.stdout

    def test_edit_with_invalid_json_is_exit_2(self, cli, tmp_path, store):
        run_id = _paused_run(cli)
        (tmp_path / "broken.json").write_text('{"score": ')
        result = cli("edit", run_id, "--output", str(tmp_path / "broken.json"))
        assert result.exit_code == 2
        assert "broken.json:1:11: invalid JSON" in result.stderr
        assert store.get_run(run_id).status == "paused"

    def test_retry_reruns_the_paused_step(self, cli, store, step_log):
        run_id = _paused_run(cli)
        result = cli("retry", run_id)
        assert result.exit_code == 3  # the deterministic step fails its gate again
        assert calls(step_log).count("score_of") == 2
        attempts = [r.attempt for r in store.step_records(run_id) if r.step_id == "scored"]
        assert attempts == [1, 2]
        assert store.get_run(run_id).status == "paused"

    def test_reject_ends_the_run_and_skips_the_rest(self, cli, store):
        run_id = _paused_run(cli)
        result = cli("reject", run_id, "--comment", "wrong vendor")
        assert result.exit_code == 1
        assert store.get_run(run_id).status == "rejected"
        latest = store.latest_records(run_id)
        assert latest["final"].status == "skipped" and latest["after_scored"].status == "skipped"
        assert store.reviews(run_id)[0].decision == "reject"

    def test_decision_on_a_run_that_is_not_paused_is_exit_2(self, cli):
        run_id = cli("run", str(FIXTURES / "ok.yaml"), "--json").json()["run_id"]
        for verb in ("approve", "retry", "reject"):
            result = cli(verb, run_id)
            assert result.exit_code == 2
            assert f"run {run_id} is succeeded, not paused; there is nothing to decide" in result.stderr

    def test_decision_on_an_unknown_step_is_exit_2(self, cli):
        run_id = _paused_run(cli)
        result = cli("approve", run_id, "--step", "final")
        assert result.exit_code == 2
        assert "step 'final' of run" in result.stderr and "waiting: ['scored']" in result.stderr

    def test_pause_survives_the_process_and_a_new_process_decides(self, db_url, tmp_path):
        env = {**os.environ, "PYTHONPATH": str(REPO), "STEP_LOG": str(tmp_path / "log")}
        first = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(FIXTURES / "gated.yaml"),
                                "--db", db_url, "--json"], env=env, capture_output=True, text=True, timeout=60)
        assert first.returncode == 3
        run_id = json.loads(first.stdout)["run_id"]
        second = subprocess.run([sys.executable, "-m", "orchestrator", "approve", run_id, "--db", db_url],
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert open_store(db_url).get_run(run_id).status == "succeeded"

    def test_approve_after_the_workflow_stopped_loading_decides_nothing_and_says_why(self, tmp_path, store, db_url):
        workflow = tmp_path / "gated.yaml"
        workflow.write_text((FIXTURES / "gated.yaml").read_text())
        (tmp_path / "steps.py").write_text((FIXTURES / "steps.py").read_text())
        env = {**os.environ, "PYTHONPATH": str(REPO), "STEP_LOG": str(tmp_path / "log")}
        orchestrator = [sys.executable, "-m", "orchestrator"]
        first = subprocess.run([*orchestrator, "run", str(workflow), "--db", db_url, "--json"], env=env,
                               capture_output=True, text=True, timeout=60)
        run_id = json.loads(first.stdout)["run_id"]
        (tmp_path / "steps.py").write_text((FIXTURES / "steps.py").read_text().replace("def double(", "def twice("))
        before = store.count_rows()
        result = subprocess.run([*orchestrator, "approve", run_id, "--db", db_url], env=env, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"run {run_id} cannot continue, so nothing was decided" in result.stderr
        assert "double" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert store.count_rows() == before and store.get_run(run_id).status == "paused"

    def test_two_racing_decisions_exactly_one_wins(self, durable_url):
        spec = load_workflow(FIXTURES / "gated.yaml")
        setup = open_store(durable_url)
        run_id = start_run(setup, spec, {}).run_id
        barrier = threading.Barrier(2)
        results: list[str] = []

        def decide(fn) -> None:
            s = open_store(durable_url)  # each reviewer has its own connection, as separate processes would
            barrier.wait()
            try:
                fn(s, run_id, comment="race")
                results.append("won")
            except (ReviewError, LeaseHeldError) as exc:  # refused: the pause was decided, or the winner's
                results.append(f"lost: {exc}")  # continuation already holds the run (a rejection needs it too)

        threads = [threading.Thread(target=decide, args=(fn,)) for fn in (review.approve, review.reject)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.split(":")[0] for r in results) == ["lost", "won"]
        assert len(setup.reviews(run_id)) == 1

    def test_database_refuses_a_second_review_of_one_record(self, store, db_url):
        spec = load_workflow(FIXTURES / "gated.yaml")
        run_id = start_run(store, spec, {}).run_id
        rec = review.paused_record(store, run_id, None)
        store.decide(NewReview(run_id, rec.id, rec.step_id, decision="approve", reviewer="a", comment=None,
                               output_before=rec.output))
        store.set_run_status(run_id, "paused")
        with pytest.raises(ReviewError, match="already decided by another reviewer"):
            store.decide(NewReview(run_id, rec.id, rec.step_id, decision="reject", reviewer="b", comment=None,
                                   output_before=rec.output))

    def test_review_timeout_applies_the_default_decision(self, cli, store):
        result = cli("run", str(FIXTURES / "gated_review_timeout.yaml"), "--json")
        assert result.exit_code == 0
        doc = result.json()
        assert doc["status"] == "succeeded"
        (rev,) = doc["reviews"]
        assert (rev["decision"], rev["reviewer"]) == ("approve", "review-timeout")

    def test_a_workers_review_timeout_approval_queues_the_run_in_the_same_write(self, store):
        """Approved and queued at once: a worker killed right after its decision leaves a run any worker
        claims, never one ``running`` with no lease that nobody would take over."""
        result = start_run(store, load_workflow(FIXTURES / "gated_review_timeout.yaml"), {})
        assert result.status == "paused"
        ReviewTimeouts(store).decide(now=time.time() + 60)  # a minute on: past the step's review_timeout (0.5 s)
        run = store.get_run(result.run_id)
        assert (run.status, run.lease_expires_at) == ("queued", None)
        assert [(r.decision, r.reviewer) for r in store.reviews(result.run_id)] == [("approve", "review-timeout")]

    def test_a_long_review_timeout_wait_says_what_it_waits_for_and_until_when(self, tmp_path, db_url):
        """The wait is announced before it begins, and a decision from another terminal, as the announcement
        suggests, ends it: the waiting process sees the run decided and stops waiting (its 600 s are not spent)."""
        workflow = tmp_path / "long_wait.yaml"
        workflow.write_text((FIXTURES / "gated_review_timeout.yaml").read_text().replace(
            "review_timeout: 0.5", "review_timeout: 600"))
        (tmp_path / "steps.py").write_text((FIXTURES / "steps.py").read_text())
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        waiting = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(workflow), "--db", db_url],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert waiting.stderr is not None
            seen: list[str] = []
            while not any("waiting for a review until" in line for line in seen):
                line = waiting.stderr.readline()
                assert line, f"the run ended without announcing its wait: {seen}"
                seen.append(line)
            run_id = open_store(db_url).list_runs()[0].run_id
            assert re.fullmatch(rf"run {run_id} paused at scored: waiting for a review until \S+\+00:00, when its "
                                r"review_timeout applies; decide now with `orchestrator review` or `orchestrator "
                                rf"approve\|edit\|retry\|reject {run_id}` from another terminal\n", seen[-1]), seen[-1]
            approved = subprocess.run([sys.executable, "-m", "orchestrator", "approve", run_id, "--reviewer", "ana",
                                       "--db", db_url], env=env, capture_output=True, text=True, timeout=120)
            assert approved.returncode == 0, approved.stderr
            waiting.wait(timeout=120)
        finally:
            waiting.kill()
            waiting.communicate()
        store = open_store(db_url)
        assert store.get_run(run_id).status == "succeeded"
        assert [(r.decision, r.reviewer) for r in store.reviews(run_id)] == [("approve", "ana")]


class TestContextAndCritics:
    def test_needs_of_consumers_are_injected_and_recorded(self, cli):
        doc = cli("run", str(FIXTURES / "needs.yaml"), "--json").json()
        echo = _steps(doc)["echo"]
        told = [{"step_id": "use", "agent": "use", "needs": "a dict with the number under 'value'",
                 "description": "what the consumer saw"}]
        assert echo["output"]["told"] == told  # the step function saw it as ctx.next_needs
        assert echo["injected"] == told  # and the record keeps what it was told

    def test_passing_critic_is_stored_as_a_gate_naming_the_verified_steps(self, cli):
        doc = cli("run", str(FIXTURES / "needs.yaml"), "--json").json()
        check = _steps(doc)["check"]
        assert check["gates"][0]["gate"] == "critic" and check["gates"][0]["passed"] is True
        assert check["gates"][0]["details"]["verifies"] == ["echo", "use"]
        assert {c["step_id"] for c in check["consumed"]} == {"echo", "use"}

    def test_failing_critic_pauses_before_its_dependents(self, cli):
        result = cli("run", str(FIXTURES / "critic_fails.yaml"), "--json")
        assert result.exit_code == 3
        doc = result.json()
        assert doc["paused_steps"] == ["check"]
        assert "publish" not in _steps(doc)
        shown = cli("show", doc["run_id"]).stdout
        assert "check / critic (verifies echo, use): 3 != 4" in shown
