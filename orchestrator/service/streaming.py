"""Events of an execution handed to a program as they happen, through a bounded buffer.

A chat UI or a web backend that starts a run wants to show each step as it ends, not the run's end
alone. The executor reports every event to one listener, synchronously on its event loop; a consumer
that reads slowly (or not at all for a while) must neither stall the executor nor fail the run. So
events pass through a buffer of ``capacity`` events: when it is full, a new event is dropped and
counted, and the consumer receives an :class:`EventsDropped` (how many, and of which kinds) before the
next event it does get. The run's end is never dropped: ``RunFinished`` of the run streamed goes in
even over capacity, so the stream always ends with it. ``Token`` events (the pieces of a streamed model
answer, dozens a second) are kept only while the buffer is less than half full: a flood of them for a
consumer that reads slowly never crowds out the steps' own events. Nothing stored is ever dropped: the records,
reviews and outcomes are written by the executor before their events exist.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from orchestrator.spec.events import Event, RunFinished, Token

DEFAULT_CAPACITY = 1000
"""Events kept for a consumer that has not read them yet (a few steps' worth of a large map)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventsDropped:
    """Events the consumer did not get because it read slower than the run went: their number by kind."""

    run_id: str
    count: int
    kinds: dict[str, int] = field(default_factory=dict)


StreamItem = Event | EventsDropped
"""What a stream yields: the executor's events, and a note where some were dropped."""


class EventBuffer:
    """A bounded, thread-safe queue of events between the executor (``put``, never blocking) and one
    consumer (``get``, blocking until an event or the end), whichever threads or loops they are on."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("an event buffer holds at least one event")
        self.capacity = capacity
        self.token_room = max(1, capacity // 2)
        """Tokens are kept while fewer events than this wait (the other half is for the steps' events)."""
        self.items: deque[Event] = deque()
        self.dropped: Counter[str] = Counter()
        self.dropped_run = ""
        self.closed = False
        self.error: BaseException | None = None
        self.changed = threading.Condition()

    def put(self, event: Event) -> None:
        """Called by the executor: keep the event, or drop and count it when the buffer is full (the end of a
        run is always kept)."""
        with self.changed:
            room = self.token_room if isinstance(event, Token) else self.capacity
            if len(self.items) >= room and not isinstance(event, RunFinished):
                self.dropped[type(event).__name__] += 1
                self.dropped_run = self.dropped_run or event.run_id
                return
            self.items.append(event)
            self.changed.notify()

    def close(self, error: BaseException | None = None) -> None:
        """The execution ended (with ``error`` when it raised): the consumer gets what is left, then the end."""
        with self.changed:
            self.closed = True
            self.error = error
            self.changed.notify_all()

    def get(self, timeout: float | None = None) -> StreamItem | None:
        """The next item, waiting for one; None once the execution ended and every item was taken (or when
        ``timeout`` passed first, while it still runs: then :attr:`finished` is false)."""
        with self.changed:
            while not self.items and not self.closed and not self.dropped:
                if not self.changed.wait(timeout):
                    return None
            if self.dropped:
                note = EventsDropped(run_id=self.dropped_run, count=sum(self.dropped.values()),
                                     kinds=dict(self.dropped))
                self.dropped.clear()
                self.dropped_run = ""
                return note
            if self.items:
                return self.items.popleft()
            return None

    def get_ready(self) -> bool:
        """Whether :meth:`get` would return at once with an item."""
        with self.changed:
            return bool(self.items or self.dropped)

    @property
    def finished(self) -> bool:
        """Whether the execution ended and every item was taken."""
        with self.changed:
            return self.closed and not self.items and not self.dropped

    def raise_if_failed(self) -> None:
        """Re-raise, in the consumer, what the execution raised (a bad input, a lost database)."""
        if self.error is not None:
            raise self.error


def tee(buffer: EventBuffer, listener: Any) -> Any:
    """One listener that feeds the buffer, then calls ``listener`` (the caller's ``on_event``, if any)."""
    if listener is None:
        return buffer.put

    def both(event: Event) -> None:
        buffer.put(event)
        listener(event)

    return both
