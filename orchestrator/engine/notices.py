"""The notifications an execution writes with its run's end: who is told that the run paused, failed or succeeded.

The workflow's ``notify:`` targets and those of ``ORCHESTRATOR_NOTIFY_URL`` (every workflow's) are read once per
executor, a bad environment setting refused before anything is written (exit 2). When a run ends or pauses, the
targets that want that event each get a :class:`~orchestrator.store.rows.NewNotification`, stored by
:meth:`~orchestrator.store.base.RunStore.end_lease` in the end's own transaction (the outbox): a notification
exists exactly when its pause does. Delivering is a sender's job (:mod:`orchestrator.service.notifications`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from orchestrator.core.errors import InputError
from orchestrator.engine.run_state import RunResult
from orchestrator.spec.model import WorkflowSpec
from orchestrator.spec.notify import NotifyTarget, environment_targets, notification_body
from orchestrator.store import NewNotification, Store


def environment_notify_targets() -> list[NotifyTarget]:
    """``ORCHESTRATOR_NOTIFY_URL`` (with ``ORCHESTRATOR_NOTIFY_EVENTS`` and ``ORCHESTRATOR_NOTIFY_LINK``) as
    targets; InputError (exit 2) naming the variable when one is malformed."""
    try:
        return environment_targets(os.environ.get("ORCHESTRATOR_NOTIFY_URL"),
                                   os.environ.get("ORCHESTRATOR_NOTIFY_EVENTS"),
                                   os.environ.get("ORCHESTRATOR_NOTIFY_LINK"))
    except ValueError as exc:
        raise InputError(str(exc)) from None


class RunNotices:
    """The notification targets of one workflow's runs, and the outbox rows an event of a run gives them."""

    def __init__(self, workflow: str, targets: Sequence[NotifyTarget]) -> None:
        self.workflow = workflow
        self.targets = list(targets)

    @classmethod
    def of(cls, spec: WorkflowSpec) -> RunNotices:
        """The workflow's own targets, then the environment's."""
        return cls(spec.name, [*spec.notify, *environment_notify_targets()])

    def wants(self, event: str) -> bool:
        return any(event in target.events for target in self.targets)

    def for_event(self, run_id: str, event: str, *, status: str, unit: str | None = None,
                  units: list[str] | None = None, reason: str | None = None) -> list[NewNotification]:
        """One notification per target that wants ``event``, each with its own idempotency key."""
        notes = []
        for target in self.targets:
            if event not in target.events:
                continue
            note = NewNotification(run_id, self.workflow, event, target.stored(), {})
            note.body = notification_body(key=note.key, event=event, run_id=run_id, workflow=self.workflow,
                                          unit=unit, units=units, reason=reason, status=status, link=target.link)
            notes.append(note)
        return notes

    def for_end(self, store: Store, result: RunResult) -> list[NewNotification]:
        """The notifications of a run's end or pause. A pause names every unit waiting (paths into child runs
        included) and the first one's reasons, read from the stored records (only when a target wants it)."""
        event = result.status
        if not self.wants(event):
            return []
        if event == "paused":
            from orchestrator.engine.documents import pause_reasons  # a run that tells nobody never loads them
            from orchestrator.engine.tree import open_pauses

            pauses = open_pauses(store, result.run_id)
            units = [p.path for p in pauses] or list(result.paused_steps)
            reason = pause_reasons(pauses[0].record) if pauses else None
            return self.for_event(result.run_id, event, status=event, unit=units[0] if units else None, units=units,
                                  reason=reason)
        if event == "failed":
            return self.for_event(result.run_id, event, status=event,
                                  unit=result.failed_steps[0] if result.failed_steps else None,
                                  units=list(result.failed_steps), reason=result.error)
        return self.for_event(result.run_id, event, status=event)
