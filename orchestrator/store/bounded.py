"""A dict that forgets its oldest entries past a size: the caches of long-lived stores.

A worker runs for weeks; a cache of run keys or workflow ids that only grows is a leak. What
these caches hold never changes once stored (a run's key, a workflow version's id, a record's
digest), so forgetting an entry costs at most one query the next time it is needed.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_SIZE = 65536


class BoundedCache(dict[K, V]):
    """A dict holding at most ``size`` entries: past it, the oldest quarter is dropped at once
    (dicts keep insertion order), so eviction costs O(1) per insertion on average."""

    def __init__(self, size: int | None = None) -> None:
        super().__init__()
        size = DEFAULT_SIZE if size is None else size  # read now: tests shrink it for a store they open
        if size < 1:
            raise ValueError("a bounded cache holds at least one entry")
        self.size = size

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        if len(self) > self.size:
            for old in list(self)[: max(1, self.size // 4)]:
                self.pop(old, None)
