"""A run that needs a person tells someone: the workflow's ``notify:`` targets get a notification, at least once.

Each test starts its receiver on 127.0.0.1 and checks what it received: the JSON body, the Idempotency-Key and
the HMAC-SHA256 signature (verified here), the Slack-compatible body, a command target's stdin. Delivery is
from an outbox written with the pause: a receiver down when the run paused gets the notification on a later
round, a process killed before delivering leaves it to a worker, and two workers deliver it once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.notifications import NotificationSender, SendSettings
from orchestrator.service.runner import start_run
from orchestrator.service.worker import work
from orchestrator.store import open_store
from tests.orchestrator.notify_receiver import Receiver, refusing_port

FAST = SendSettings(attempts=3, backoff=0.001, max_backoff=0.002, retry_after=60.0, timeout=5.0, wait=5.0)
"""Tries without real waits between them; a later round is asked about with a later ``now``, not slept for."""

STEPS = '''
import json, os, sys

def ask(x: int) -> int:
    return x

def needs_a_person(output):
    return (False, "needs a person")

def after(value: int) -> int:
    return value + 1
'''


def workflow_file(tmp_path: Path, notify: str, *, gate: bool = True) -> Path:
    (tmp_path / "steps.py").write_text(STEPS)
    gates = '\n    gates: [{gate: "steps:needs_a_person"}]' if gate else ""
    path = tmp_path / "wf.yaml"
    path.write_text(f"name: notified\ninputs: {{x: integer}}\n{notify}\nsteps:\n  - id: ask\n    run: steps:ask\n"
                    f"    inputs: {{x: $inputs.x}}{gates}\n  - id: after\n    run: steps:after\n"
                    "    inputs: {value: ask}\n")
    return path


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture(autouse=True)
def no_environment_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ORCHESTRATOR_NOTIFY_URL", "ORCHESTRATOR_NOTIFY_EVENTS", "ORCHESTRATOR_NOTIFY_LINK",
                 "ORCHESTRATOR_NOTIFY_SECRET", "ORCHESTRATOR_NOTIFY_WAIT"):
        monkeypatch.delenv(name, raising=False)


def test_a_pause_is_delivered_once_with_its_body_an_idempotency_key_and_a_signature(
        tmp_path: Path, receiver: Receiver, db_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOOK_SECRET", "s3cret")
    wf = workflow_file(tmp_path, f'notify:\n  - url: {receiver.url}\n    secret_env: HOOK_SECRET\n'
                                 '    link: "https://review.example.com/runs/{run_id}"')
    with open_store(db_url) as store:
        result = start_run(store, load_workflow(wf), {"x": 1})
        assert result.status == "paused"
        assert len(receiver.requests) == 1  # the process that ran it sent it before returning
        request = receiver.requests[0]
        body = request.body
        assert body["event"] == "paused" and body["run_id"] == result.run_id and body["workflow"] == "notified"
        assert body["unit"] == "ask" and body["reason"] == "needs a person" and body["status"] == "paused"
        assert body["review_command"] == f"orchestrator approve {result.run_id} --step ask"
        assert body["link"] == f"https://review.example.com/runs/{result.run_id}"
        expected = "sha256=" + hmac.new(b"s3cret", request.raw, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(request.headers["x-orchestrator-signature"], expected)
        [stored] = store.notifications()
        assert request.headers["idempotency-key"] == stored.key == body["id"]
        assert (stored.status, stored.tries, stored.last_error) == ("delivered", 1, None)
        assert NotificationSender(store, FAST).send_due(now=time.time() + 86400).delivered == []
    assert len(receiver.requests) == 1


def test_a_receiver_down_when_the_run_paused_gets_it_once_it_is_back(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch):
    down, port = refusing_port()
    wf = workflow_file(tmp_path, f"notify: http://127.0.0.1:{port}/hook")
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_WAIT", "0")  # the run's process leaves it to a sender
    with open_store(db_url) as store:
        run_id = start_run(store, load_workflow(wf), {"x": 1}).run_id
        sender = NotificationSender(store, FAST)
        assert sender.send_due().pending  # three tries, all refused
        [note] = store.notifications(failed=True)
        assert (note.status, note.tries) == ("pending", 3) and "refused" in (note.last_error or "").lower()
        down.close()
        receiver = Receiver(port=port).start()
        try:
            assert sender.send_due().delivered == []  # not due again yet: no request
            assert receiver.requests == []
            report = sender.send_due(now=note.next_try_at)
            assert report.delivered == [note.key]
            assert [r.body["run_id"] for r in receiver.requests] == [run_id]
            assert receiver.requests[0].headers["idempotency-key"] == note.key
            [done] = store.notifications()
            assert (done.status, done.tries, done.last_error) == ("delivered", 4, None)
        finally:
            receiver.stop()


def test_retries_within_a_round_deliver_after_errors_and_a_refusal_is_given_up(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch):
    flaky = Receiver(answers=[503, 500]).start()
    refusing = Receiver(answers=[404]).start()
    wf = workflow_file(tmp_path, f"notify: [{flaky.url}, {refusing.url}]")
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_WAIT", "0")
    try:
        with open_store(db_url) as store:
            start_run(store, load_workflow(wf), {"x": 1})
            report = NotificationSender(store, FAST).send_due()
            assert len(report.delivered) == 1 and len(report.failed) == 1
            by_target = {n.target["url"]: n for n in store.notifications()}
            assert (by_target[flaky.url].status, by_target[flaky.url].tries) == ("delivered", 3)
            assert (by_target[refusing.url].status, by_target[refusing.url].tries) == ("failed", 1)
            assert by_target[refusing.url].last_error == "HTTP 404 Not Found"
            assert len({r.headers["idempotency-key"] for r in flaky.requests}) == 1
    finally:
        flaky.stop()
        refusing.stop()


def test_two_workers_deliver_a_notification_once(tmp_path: Path, receiver: Receiver, db_url: str,
                                                 monkeypatch: pytest.MonkeyPatch):
    wf = workflow_file(tmp_path, f"notify: {receiver.url}")
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_WAIT", "0")
    with open_store(db_url) as store:
        for x in range(3):
            start_run(store, load_workflow(wf), {"x": x})
    stores = [open_store(db_url), open_store(db_url)]
    start = threading.Barrier(2)

    def one_worker(store) -> None:
        start.wait()
        work(store, once=True, poll=0.01, notify=FAST)

    threads = [threading.Thread(target=one_worker, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        keys = [r.headers["idempotency-key"] for r in receiver.requests]
        assert len(keys) == 3 and len(set(keys)) == 3
        assert {n.status for n in stores[0].notifications()} == {"delivered"}
    finally:
        for s in stores:
            s.close()


def test_a_slack_target_gets_a_text_body(tmp_path: Path, receiver: Receiver, db_url: str):
    wf = workflow_file(tmp_path, f"notify:\n  - slack: {receiver.url}\n    events: [paused, succeeded]")
    with open_store(db_url) as store:
        run_id = start_run(store, load_workflow(wf), {"x": 1}).run_id
    [request] = receiver.requests
    assert set(request.body) == {"text"}
    text = request.body["text"]
    assert run_id in text and "*notified*" in text and "`ask`" in text and "needs a person" in text
    assert f"orchestrator approve {run_id} --step ask" in text


def test_a_command_target_reads_the_body_on_stdin_and_a_failing_one_is_retried_later(
        tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch):
    script = tmp_path / "page.py"
    script.write_text(textwrap.dedent('''
        import os, sys
        data = sys.stdin.read()
        if os.environ.get("PAGER_DOWN"):
            sys.exit("pager unreachable")
        with open(sys.argv[1], "a") as fh:
            fh.write(data + "\\n")
    '''))
    received = tmp_path / "paged.jsonl"
    wf = workflow_file(tmp_path, f"notify:\n  - command: [{sys.executable}, {script}, {received}]\n"
                                 "    events: [succeeded]", gate=False)
    monkeypatch.setenv("PAGER_DOWN", "1")
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_WAIT", "0")
    with open_store(db_url) as store:
        run_id = start_run(store, load_workflow(wf), {"x": 1}).run_id
        assert NotificationSender(store, FAST).send_due().pending
        [note] = store.notifications(failed=True)
        assert note.status == "pending" and note.last_error and "pager unreachable" in note.last_error
        monkeypatch.delenv("PAGER_DOWN")
        assert NotificationSender(store, FAST).send_due(now=note.next_try_at).delivered == [note.key]
    [line] = received.read_text().splitlines()
    body = json.loads(line)
    assert (body["event"], body["run_id"], body["status"], body["id"]) == ("succeeded", run_id, "succeeded", note.key)


def test_environment_targets_apply_to_every_workflow_and_a_bad_one_is_refused(
        tmp_path: Path, receiver: Receiver, cli, monkeypatch: pytest.MonkeyPatch):
    wf = workflow_file(tmp_path, "")
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_URL", receiver.url)
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_EVENTS", "paused,failed")
    assert cli("run", str(wf), "--input", "x=1").exit_code == 3
    assert [r.body["event"] for r in receiver.requests] == ["paused"]
    listed = cli("notifications", "--json").json()
    assert [(n["event"], n["status"], n["tries"], n["target"]) for n in listed] == [
        ("paused", "delivered", 1, f"webhook {receiver.url}")]
    assert cli("notifications", "--failed", "--json").json() == []
    monkeypatch.setenv("ORCHESTRATOR_NOTIFY_URL", "not-a-url")
    refused = cli("run", str(wf), "--input", "x=1")
    assert refused.exit_code == 2 and "ORCHESTRATOR_NOTIFY_URL" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(cli("runs", "--json").json()) == 1  # the refused run stored nothing


@pytest.mark.parametrize(("notify", "line", "message"), [
    ("notify:\n  - url: ftp://example.com/hook", 4, "notify[0].url: url 'ftp://example.com/hook' is not an http"),
    ("notify:\n  - url: https://example.com/hook\n    events: [paused, finished]", 5, "notify[0].events[1]"),
    ("notify: https://", 3, "names no host"),
    ("notify:\n  - url: https://example.com\n    link: 'https://x/{run}'", 5, "link 'https://x/{run}' uses {run}"),
    ("notify:\n  - events: [failed]", 4, "exactly one of url, slack and command"),
])
def test_a_bad_notify_target_is_a_validate_error_naming_file_and_line(tmp_path: Path, cli, notify: str, line: int,
                                                                      message: str):
    wf = workflow_file(tmp_path, notify)
    result = cli("validate", str(wf), db=False)
    assert result.exit_code == 2
    assert f"{wf}:{line}:" in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_process_killed_before_delivering_leaves_the_notification_to_a_worker(tmp_path: Path, db_url: str):
    receiver = Receiver(hold=True).start()  # the first request is never answered
    try:
        wf = workflow_file(tmp_path, f"notify: {receiver.url}")
        env = {**os.environ, "ORCHESTRATOR_DB": db_url, "PYTHONPATH": os.getcwd()}
        env.pop("ORCHESTRATOR_NOTIFY_URL", None)
        process = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(wf), "--input", "x=1"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert receiver.arrived.wait(60), "the run's process never tried to deliver"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        with open_store(db_url) as store:
            [note] = store.notifications()
            assert note.status == "pending" and note.claimed_by  # paused, claimed, never recorded as delivered
            assert store.list_runs()[0].status == "paused"
            receiver.release()
            work(store, once=True, poll=0.01, notify=FAST)  # sees the claimant is gone and sends it again
            [done] = store.notifications()
        assert done.status == "delivered"
        assert [r.headers["idempotency-key"] for r in receiver.requests] == [note.key, note.key]
    finally:
        receiver.stop()


def test_a_timed_out_review_is_told_to_the_targets_that_want_it(tmp_path: Path, receiver: Receiver, db_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch):
    from orchestrator.service.worker import ReviewTimeouts

    wf = workflow_file(tmp_path, f"notify:\n  - url: {receiver.url}\n    events: [review_timeout]")
    wf.write_text(wf.read_text().replace("    gates:", "    review_timeout: 60\n    gates:"))
    with open_store(db_url) as store:
        run_id = start_run(store, load_workflow(wf), {"x": 1}).run_id
        assert receiver.requests == []  # paused: not an event this target wants
        ReviewTimeouts(store).decide(now=time.time() + 120)  # an idle worker, two minutes later
        assert NotificationSender(store, FAST).send_due().delivered
    [request] = receiver.requests
    body = request.body
    assert (body["event"], body["run_id"], body["unit"], body["status"]) == ("review_timeout", run_id, "ask",
                                                                              "rejected")
    assert body["reason"] == "no review in time: rejected automatically"


def test_the_python_api_takes_notify_and_refuses_a_bad_target():
    from orchestrator.bind.python_workflow import Workflow
    from orchestrator.core.errors import SpecError

    wf = Workflow("py_notified", notify="https://hooks.example.com/x")

    @wf.step
    def only() -> int:
        return 1

    assert [t.url for t in wf.spec.notify] == ["https://hooks.example.com/x"]
    bad = Workflow("py_bad", notify=[{"slack": "hooks.slack.com/x"}])

    @bad.step
    def one() -> int:
        return 1

    with pytest.raises(SpecError, match=r"notify\[0\]\.slack: url 'hooks.slack.com/x' is not an http"):
        _ = bad.spec
