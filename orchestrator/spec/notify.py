"""Notifications when a person is needed: the workflow's ``notify:`` targets and what is sent to them.

A run that pauses for review tells nobody unless someone opens ``orchestrator review``. A workflow's
``notify:`` (and ``ORCHESTRATOR_NOTIFY_URL``, for every workflow) names where to say so: a webhook that
receives a JSON body, a Slack-compatible incoming webhook that receives ``{"text": ...}``, or a command
that receives the JSON body on its standard input; each on some events (``paused`` unless told).

Plain data and pure functions: the engine writes a notification (its target and its body, both built
here) in the transaction of the pause or end that causes it, and a sender delivers it later.
"""

from __future__ import annotations

import re
import shlex
import string
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NotifyEvent = Literal["paused", "failed", "succeeded", "review_timeout"]
"""When a target is told: a run paused for review, failed, succeeded, or a review timed out and was decided."""

NOTIFY_EVENTS: tuple[str, ...] = ("paused", "failed", "succeeded", "review_timeout")

LINK_FIELDS = frozenset({"run_id", "workflow", "unit", "event"})
"""The placeholders a ``link`` template may use: ``https://review.example.com/runs/{run_id}``."""

SLACK_SCHEME = "slack+"
"""``ORCHESTRATOR_NOTIFY_URL`` entries starting so (``slack+https://hooks.slack.com/...``) are Slack webhooks."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def checked_url(value: str, what: str = "url") -> str:
    """``value`` when it is an absolute http(s) URL with a host; ValueError saying what is wrong otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} is empty; write an http:// or https:// URL")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{what} {value!r} is not an http:// or https:// URL")
    try:
        host, _ = parts.hostname, parts.port  # a port that is not a number raises here
    except ValueError:
        raise ValueError(f"{what} {value!r} has a port that is not a number") from None
    if not host:
        raise ValueError(f"{what} {value!r} names no host")
    if any(c.isspace() for c in value.strip()):
        raise ValueError(f"{what} {value!r} holds white space")
    return value.strip()


def checked_link(template: str) -> str:
    """A link template whose placeholders are among :data:`LINK_FIELDS`; ValueError otherwise."""
    try:
        names = {name for _, name, spec, conv in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(f"link {template!r} is not a valid template: {exc}") from None
    unknown = sorted(names - LINK_FIELDS)
    if unknown:
        raise ValueError(f"link {template!r} uses {{{unknown[0]}}}; a link may use "
                         + ", ".join(f"{{{n}}}" for n in sorted(LINK_FIELDS)))
    return template


def _paused_only() -> list[NotifyEvent]:
    return ["paused"]


class NotifyTarget(BaseModel):
    """One place to tell: exactly one of ``url`` (a JSON webhook), ``slack`` (an incoming webhook) and
    ``command`` (an argv list run with the JSON body on stdin)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    slack: str | None = None
    command: list[str] | None = None
    events: list[NotifyEvent] = Field(default_factory=_paused_only)
    secret_env: str | None = None
    """The environment variable holding the HMAC secret of this target (else ``ORCHESTRATOR_NOTIFY_SECRET``)."""
    link: str | None = None
    """A link for the reader, ``{run_id}``, ``{workflow}``, ``{unit}`` and ``{event}`` filled in."""

    @field_validator("url", "slack")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else checked_url(value)

    @field_validator("command")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(isinstance(a, str) and a for a in value)):
            raise ValueError("command is a list of non-empty arguments, the program first: [notify-send, Run paused]")
        return value

    @field_validator("events")
    @classmethod
    def _some_events(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"events is empty; name at least one of {', '.join(NOTIFY_EVENTS)}")
        return list(dict.fromkeys(value))

    @field_validator("secret_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(f"secret_env {value!r} is not an environment variable name")
        return value

    @field_validator("link")
    @classmethod
    def _link(cls, value: str | None) -> str | None:
        return None if value is None else checked_link(value)

    @model_validator(mode="after")
    def _one_kind(self) -> NotifyTarget:
        given = [k for k in ("url", "slack", "command") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a notify target has exactly one of url, slack and command"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self

    @property
    def kind(self) -> Literal["webhook", "slack", "command"]:
        return "webhook" if self.url is not None else "slack" if self.slack is not None else "command"

    def stored(self) -> dict[str, Any]:
        """What the outbox keeps of the target: everything but defaults (secrets stay in the environment)."""
        return self.model_dump(mode="json", exclude_none=True)

    def shown(self) -> str:
        """The target on one line for listings, without what a URL may hide in its path or query (a Slack
        webhook's path is its credential): ``slack https://hooks.slack.com/…``, ``webhook https://host/path``."""
        if self.command is not None:
            return f"command {self.command[0]}"
        parts = urlsplit(self.url or self.slack or "")
        path = "/…" if self.slack is not None and parts.path not in ("", "/") else parts.path
        return f"{self.kind} {parts.scheme}://{parts.netloc.rpartition('@')[2]}{path}"


def notify_shorthand(value: Any) -> Any:
    """``notify:`` as written: one URL, one target, or a list of either; always a list of targets."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [{"url": item} if isinstance(item, str) else item for item in items]


def environment_targets(urls: str | None, events: str | None = None, link: str | None = None) -> list[NotifyTarget]:
    """The targets of ``ORCHESTRATOR_NOTIFY_URL`` (URLs separated by commas or spaces; ``slack+https://...``
    for a Slack webhook), told of ``ORCHESTRATOR_NOTIFY_EVENTS`` (default ``paused``) with
    ``ORCHESTRATOR_NOTIFY_LINK``. ValueError naming the variable and the bad entry."""
    if not urls or not urls.strip():
        return []
    chosen = [e for e in re.split(r"[,\s]+", events.strip()) if e] if events and events.strip() else ["paused"]
    for event in chosen:
        if event not in NOTIFY_EVENTS:
            raise ValueError(f"ORCHESTRATOR_NOTIFY_EVENTS: unknown event {event!r}; use {', '.join(NOTIFY_EVENTS)}")
    if link:
        try:
            checked_link(link)
        except ValueError as exc:
            raise ValueError(f"ORCHESTRATOR_NOTIFY_LINK: {exc}") from None
    targets = []
    for entry in (e for e in re.split(r"[,\s]+", urls.strip()) if e):
        slack = entry.startswith(SLACK_SCHEME)
        address = entry.removeprefix(SLACK_SCHEME)
        try:
            checked_url(address, "URL")
        except ValueError as exc:
            raise ValueError(f"ORCHESTRATOR_NOTIFY_URL: {exc}") from None
        targets.append(NotifyTarget.model_validate(
            {"slack" if slack else "url": address, "events": chosen, **({"link": link} if link else {})}))
    return targets


def review_command(event: str, run_id: str, unit: str | None) -> str:
    """What the reader types next: decide the pause, or look at the run."""
    if event == "paused":
        return f"orchestrator approve {run_id} --step {shlex.quote(unit)}" if unit else "orchestrator review"
    return f"orchestrator show {run_id}"


def notification_body(*, key: str, event: str, run_id: str, workflow: str, unit: str | None = None,
                      units: list[str] | None = None, reason: str | None = None, status: str,
                      link: str | None = None) -> dict[str, Any]:
    """The JSON a webhook receives (and a command reads on stdin): keys are a contract, added to, never renamed."""
    filled = link.format_map({"run_id": run_id, "workflow": workflow, "unit": unit or "", "event": event}) \
        if link else None
    return {"id": key, "event": event, "run_id": run_id, "workflow": workflow, "status": status, "unit": unit,
            "units": units if units is not None else ([unit] if unit else []), "reason": reason,
            "review_command": review_command(event, run_id, unit), "show_command": f"orchestrator show {run_id}",
            "link": filled}


_HEADLINES = {"paused": "is waiting for review", "failed": "failed", "succeeded": "succeeded",
              "review_timeout": "had a review time out"}


def slack_text(body: dict[str, Any]) -> str:
    """The one message a Slack-compatible webhook shows for a notification body."""
    where = f" at `{body['unit']}`" if body.get("unit") else ""
    text = f"Run `{body['run_id']}` of *{body['workflow']}* {_HEADLINES.get(body['event'], body['event'])}{where}"
    if body.get("reason"):
        text += f": {body['reason']}"
    text += f"\n`{body['review_command']}`"
    if body.get("link"):
        text += f"\n{body['link']}"
    return text
