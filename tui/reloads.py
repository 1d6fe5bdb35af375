"""One store read in flight per screen: asks made while it runs fold into a single read after it.

A screen re-reads on a timer, after each event of a run continuing here and after each decision. When a
read took longer than the timer's interval, starting a new one each time threw the running one away
(a cancelled thread still runs to its end): a large run could stay on ``loading…`` for as long as the
reads kept being restarted. Here a read always finishes and is shown; whatever asked meanwhile gets one
more read, started when it ends, which sees every change made before it began.
"""

from __future__ import annotations


class SingleFlight:
    """Whether to start a read now; used on the event loop only (no locking needed)."""

    def __init__(self) -> None:
        self.in_flight = False
        self.asked_again = False

    def ask(self) -> bool:
        """A read is wanted: True to start one now, False when one runs (it is then followed by another)."""
        if self.in_flight:
            self.asked_again = True
            return False
        self.in_flight = True
        return True

    def finished(self) -> bool:
        """The read in flight ended (shown or failed): True to start the one asked for meanwhile."""
        if self.asked_again:
            self.asked_again = False
            return True
        self.in_flight = False
        return False
