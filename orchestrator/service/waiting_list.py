"""Many waiting units in one line: the first few and how many more (``sub[0] > classify +199 more``).

A map of 200 child runs each paused inside, or a map with 50 waiting instances, made every place that
listed the waiting units by joining them unreadable (one table cell of 200 paths, a pop-up covering half
an 80x24 screen). The faces that name waiting units in a line (the review app's runs list, its run header
and its notices, the runs listing) shorten them here, the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def first_and_count(units: Sequence[str], *, shown: int = 1, width: int | None = None) -> str:
    """The first ``shown`` units, comma-separated, then ``+N more`` for the rest; empty for none.

    ``width``: the most characters the result may take; the names give way (ending in ``…``), never the
    count, which is what tells a reader that more wait.
    """
    if not units:
        return ""
    shown = max(1, shown)
    names = ", ".join(units[:shown])
    rest = len(units) - shown
    suffix = f" +{rest} more" if rest > 0 else ""
    if width is not None and len(names) + len(suffix) > width:
        room = max(1, width - len(suffix))
        names = names[: room - 1].rstrip() + ELLIPSIS if len(names) > room else names
    return names + suffix
