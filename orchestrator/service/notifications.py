"""Deliver the notification outbox: at least once, with retries and back-off, never blocking a run.

The executor writes each notification in the transaction of the pause or end that causes it
(:mod:`orchestrator.engine.notices`). A :class:`NotificationSender` delivers them:

- in the process that ran the run, once the run has ended or paused, for at most ``wait`` seconds (the
  CLI's command waits that long at most; what is not delivered by then stays pending);
- in every worker, on its idle poll and after each run it executes.

A sender claims a row first (a conditional update: of several workers exactly one gets it; the claim lasts
longer than the tries it makes), then tries it up to ``attempts`` times with exponential back-off
(tenacity), then records how it went: delivered, pending again from a later time (back-off doubling per
round, so a receiver down for a minute is told when it is back), or failed for good after ``give_up_after``
tries (or at once when the receiver refuses it with a 4xx). A sender killed before it records the result leaves
its claim to lapse; a worker on the same machine sees that the claiming process is gone and takes it at once.
Delivery is **at least once**: a receiver that answered but whose answer was lost, or a claim that lapsed
during a very slow delivery, may be told twice, with the same ``Idempotency-Key`` header.

Each request carries ``Idempotency-Key`` and, when a secret is set (the target's ``secret_env``, else
``ORCHESTRATOR_NOTIFY_SECRET``), ``X-Orchestrator-Signature: sha256=<hex HMAC-SHA256 of the body>``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from orchestrator.core import jsonio
from orchestrator.core.errors import InputError
from orchestrator.engine.leases.holder import holder_is_gone, this_holder
from orchestrator.engine.notices import RunNotices
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.notify import NotifyTarget, slack_text
from orchestrator.spec.records import NotificationView
from orchestrator.store import Store
from orchestrator.store.base import NotificationStore

log = logging.getLogger("orchestrator.notifications")

SECRET_ENV = "ORCHESTRATOR_NOTIFY_SECRET"
SIGNATURE_HEADER = "X-Orchestrator-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class SendSettings:
    """How hard a sender tries. Tests shrink the waits; operators rarely need to."""

    attempts: int = 3
    """Tries per claim, the first included."""
    backoff: float = 0.5
    """The first wait between two tries of a claim, doubling up to ``max_backoff``."""
    max_backoff: float = 5.0
    retry_after: float = 15.0
    """How long a notification whose tries all failed waits for the next claim, doubling per round up to
    ``max_retry_after``: with the defaults a receiver back within a minute gets it within about 30 s more."""
    max_retry_after: float = 600.0
    give_up_after: int = 40
    """Tries in all before a notification is marked failed (about five hours with the defaults)."""
    timeout: float = 10.0
    """Seconds one request (or command) may take."""
    wait: float = 5.0
    """How long the process that ran a run waits for its notifications at the end (``ORCHESTRATOR_NOTIFY_WAIT``)."""
    batch: int = 20
    """Notifications claimed at once."""

    @property
    def claim_seconds(self) -> float:
        """A claim outlasts every try of it and the waits between them, with room to record the result."""
        waits = sum(min(self.backoff * 2 ** i, self.max_backoff) for i in range(self.attempts - 1))
        return float(self.attempts * self.timeout + waits + 30.0)

    def next_try(self, tries: int) -> float:
        """Seconds before the next round of a notification tried ``tries`` times so far."""
        rounds = max(1, -(-tries // self.attempts))
        return float(min(self.retry_after * 2.0 ** (rounds - 1), self.max_retry_after))

    @classmethod
    def from_environment(cls) -> SendSettings:
        """The defaults, with ``ORCHESTRATOR_NOTIFY_WAIT`` (seconds, 0 leaves everything to workers)."""
        text = os.environ.get("ORCHESTRATOR_NOTIFY_WAIT")
        if not text:
            return cls()
        try:
            wait = float(text)
        except ValueError:
            raise InputError(f"ORCHESTRATOR_NOTIFY_WAIT={text!r} is not a number of seconds") from None
        if not 0 <= wait <= 3600:
            raise InputError(f"ORCHESTRATOR_NOTIFY_WAIT={text!r} must be between 0 and 3600 seconds")
        return cls(wait=wait)


class DeliveryError(Exception):
    """A try that did not deliver; ``permanent`` when trying again cannot help (the receiver refused it)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def signature(secret: str, body: bytes) -> str:
    """The ``X-Orchestrator-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of the body under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(note: NotificationView, *, timeout: float) -> None:
    """One try at delivering a notification to its target; DeliveryError saying why it did not arrive."""
    try:
        target = NotifyTarget.model_validate(note.target)
    except ValueError as exc:  # a stored target this version no longer accepts: trying again cannot help
        raise DeliveryError(f"the stored target is not valid: {exc}", permanent=True) from None
    if target.command is not None:
        run_command(target.command, jsonio.dumps(note.body).encode(), note.key, timeout)
        return
    payload = note.body if target.url is not None else {"text": slack_text(note.body)}
    body = jsonio.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "orchestrator-notify",
               IDEMPOTENCY_HEADER: note.key, "X-Orchestrator-Event": note.event}
    secret = os.environ.get(target.secret_env or SECRET_ENV)
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    post(target.url or target.slack or "", body, headers, timeout)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
    import urllib.error  # here: a run that notifies nobody never loads the HTTP client (and ssl)
    import urllib.request

    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        refused = 400 <= exc.code < 500 and exc.code not in (408, 409, 425, 429)
        raise DeliveryError(f"HTTP {exc.code} {exc.reason}", permanent=refused) from None
    except urllib.error.URLError as exc:  # refused, no such host, a TLS failure, a timeout while connecting
        reason = exc.reason
        raise DeliveryError(str(getattr(reason, "strerror", None) or reason or "unreachable")) from None
    except TimeoutError:
        raise DeliveryError(f"no answer within {timeout:g} s") from None
    except OSError as exc:  # the connection dropped mid-answer
        raise DeliveryError(str(exc.strerror or exc)) from None


def run_command(argv: list[str], body: bytes, key: str, timeout: float) -> None:
    """Run a command target with the notification's JSON on stdin (and its key in ``ORCHESTRATOR_NOTIFICATION_KEY``);
    exit status 0 is delivered."""
    import subprocess

    try:
        done = subprocess.run(argv, input=body, capture_output=True, timeout=timeout, check=False,
                              env={**os.environ, "ORCHESTRATOR_NOTIFICATION_KEY": key})
    except FileNotFoundError:
        raise DeliveryError(f"command {argv[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise DeliveryError(f"command {argv[0]!r} ran longer than {timeout:g} s") from None
    except OSError as exc:
        raise DeliveryError(f"command {argv[0]!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise DeliveryError(f"command {argv[0]!r} exited {done.returncode}" + (f": {said[-1]}" if said else ""))


@dataclass
class SendReport:
    """What one round of a sender did."""

    delivered: list[str] = field(default_factory=list)
    """Keys of the notifications delivered."""
    pending: list[str] = field(default_factory=list)
    """Keys of those tried without success, left for a later round."""
    failed: list[str] = field(default_factory=list)
    """Keys of those given up."""


class NotificationSender:
    """Claims and delivers due notifications (see the module docstring). Thread-safe as its store is;
    :meth:`stop` makes a round in progress end after its current try."""

    def __init__(self, store: NotificationStore, settings: SendSettings | None = None, *,
                 holder: str | None = None) -> None:
        self.store = store
        self.settings = settings or SendSettings.from_environment()
        self.holder = holder or this_holder()
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def send_due(self, *, run_id: str | None = None, budget: float | None = None,
                 now: float | None = None) -> SendReport:
        """Deliver what is due (one run's only, with ``run_id``), for at most ``budget`` seconds of tries
        (None: the settings' tries, however long). ``now``: the moment to judge what is due (default: the
        clock's; a test asks about a later one instead of sleeping)."""
        report = SendReport()
        deadline = None if budget is None else time.monotonic() + budget
        self.release_dead_claims(now)
        while not self.stopping.is_set() and (deadline is None or time.monotonic() < deadline):
            moment = time.time() if now is None else now
            claimed = self.store.claim_notifications(self.holder, now=moment, claim_seconds=self.settings.claim_seconds,
                                                     limit=self.settings.batch, run_id=run_id)
            if not claimed:
                break
            for note in claimed:
                self.send_one(note, deadline, now, report)
            if now is not None:  # a fake clock: one batch per moment asked about
                break
        return report

    def release_dead_claims(self, now: float | None = None) -> None:
        """Take back the claims of senders on this machine that died before recording their result."""
        for holder in self.store.notification_claim_holders(time.time() if now is None else now):
            if holder != self.holder and holder_is_gone(holder):
                released = self.store.release_notification_claims(holder)
                log.warning("%d notification(s) claimed by %s, which is gone, are sent again", released, holder)

    def send_one(self, note: NotificationView, deadline: float | None, now: float | None, report: SendReport) -> None:
        tries = 0
        error: DeliveryError | None = None
        try:
            for attempt in self.retrying(deadline):
                with attempt:
                    tries += 1
                    remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
                    deliver(note, timeout=self.settings.timeout if remaining is None
                            else min(self.settings.timeout, remaining))
        except DeliveryError as exc:
            error = exc
        moment = time.time() if now is None else now
        total = note.tries + tries
        if error is None:
            self.store.finish_notification(note.id, self.holder, delivered=True, tries=total, error=None,
                                           retry_at=None, now=moment)
            report.delivered.append(note.key)
            return
        give_up = error.permanent or total >= self.settings.give_up_after
        retry_at = None if give_up else moment + self.settings.next_try(total)
        self.store.finish_notification(note.id, self.holder, delivered=False, tries=total, error=str(error),
                                       retry_at=retry_at, now=moment)
        (report.failed if give_up else report.pending).append(note.key)
        log.warning("notification %s (%s of run %s) %s after %d tries: %s", note.key, note.event, note.run_id,
                    "given up" if give_up else "not delivered yet", total, error)

    def retrying(self, deadline: float | None) -> Retrying:
        """Tenacity's loop: ``attempts`` tries, exponential back-off, stopping early at the deadline or on
        :meth:`stop` (its waits are on the stop event, so a stopping worker does not sit them out)."""
        settings = self.settings

        def stop(state: RetryCallState) -> bool:
            out_of_time = deadline is not None and time.monotonic() >= deadline
            return out_of_time or self.stopping.is_set() or stop_after_attempt(settings.attempts)(state)

        def pause(seconds: float) -> None:
            self.stopping.wait(seconds)

        return Retrying(stop=stop, wait=wait_exponential(multiplier=settings.backoff, max=settings.max_backoff),
                        retry=retry_if_exception(lambda exc: isinstance(exc, DeliveryError) and not exc.permanent),
                        sleep=pause, reraise=True)


def send_after_run(store: NotificationStore, run_id: str, settings: SendSettings | None = None) -> SendReport:
    """What the process that ran a run does once it ended or paused: deliver that run's notifications for at
    most ``settings.wait`` seconds; what is not delivered by then stays pending for a worker (or the next
    command that sends). Never raises: a notification that cannot be sent must not change how a run ended."""
    settings = settings or SendSettings.from_environment()
    if settings.wait <= 0:
        return SendReport()
    try:
        return NotificationSender(store, settings).send_due(run_id=run_id, budget=settings.wait)
    except Exception as exc:  # the database or a bug: the run's outcome stands, the rows stay for a worker
        log.warning("notifications of run %s left for a worker: %s", run_id, exc)
        return SendReport()


def tell_review_timeouts(store: Store, run_id: str, spec: WorkflowSpec, decided: Sequence[tuple[str, str]]) -> None:
    """Write the ``review_timeout`` notifications of pauses just decided by their timeout (``(unit, decision)``
    pairs) for the targets that want them. Written right after the decisions, in a transaction of their own: a
    process killed in between loses these (the run's next pause or end is still told). Never raises."""
    if not decided:
        return
    try:
        notices = RunNotices.of(spec)
        if not notices.wants("review_timeout"):
            return
        status = store.get_run(run_id).status
        notes = [note for unit, decision in decided for note in notices.for_event(
            run_id, "review_timeout", status=status, unit=unit,
            reason=f"no review in time: {PAST.get(decision, decision)} automatically")]
        store.add_notifications(notes)
    except Exception as exc:  # a bad ORCHESTRATOR_NOTIFY_URL, the database away: the decisions stand
        log.warning("run %s: review timeout notifications not written: %s", run_id, exc)


PAST = {"approve": "approved", "reject": "rejected"}
