"""Group commit: the records of steps that finish at the same moment share one transaction.

A fan-out of 100 steps that all wait on I/O finishes them within a few milliseconds of each
other; committing their records one after another costs 100 transactions, each an fsync at
``synchronous=FULL`` (~0.2-0.4 ms), and the join waits for all of them. Here the first step to
finish while others are still in flight yields to the event loop once, so that every step whose
wait ended at the same moment adds its record, then commits them all in one transaction and wakes
the others with their record ids. Each step still returns only once its own record is committed,
so a step's consumers never start before the record they read is durable, as with one
transaction per record.

A step alone in flight (every step of a chain) commits at once, without yielding: grouping costs
nothing where there is nothing to group. When that record is the run's last and leaves it
succeeded, the run's end is committed with it: one transaction where there were two.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.lowlevel

from orchestrator.store import NewStepRecord, RunEnd
from orchestrator.store.base import RecordStore
from orchestrator.store.off_loop import store_call


class _Waiter:
    """One record in a group: its id or the error of the group's commit, once committed."""

    __slots__ = ("record", "record_id", "error", "committed")

    def __init__(self, record: NewStepRecord) -> None:
        self.record = record
        self.record_id = 0
        self.error: BaseException | None = None
        self.committed = anyio.Event()


class GroupCommit:
    """Writes one execution's step records, grouping those that arrive together.

    ``others_running``: whether steps other than the caller are in flight, i.e. whether waiting a
    moment could find more records to commit along with this one. ``ending``: the run's end if
    committing this record (with no other step in flight) leaves nothing more to run.
    """

    def __init__(self, store: RecordStore, others_running: Callable[[], bool],
                 ending: Callable[[NewStepRecord], RunEnd | None]) -> None:
        self.store = store
        self.others_running = others_running
        self.ending = ending
        self.group: list[_Waiter] = []
        self.ended: RunEnd | None = None
        """The run's end, once committed with its last record."""

    async def write(self, record: NewStepRecord) -> int:
        """Commit ``record`` (alone or with others arriving now); returns its id once it is durable."""
        if not self.group and not self.others_running():
            end = self.ending(record)
            record_id = (await store_call(self.store.insert_step_records, [record], end=end))[0]
            self.ended = end
            return record_id
        waiter = _Waiter(record)
        self.group.append(waiter)
        if len(self.group) > 1:  # a group is gathering: its first writer commits this record too
            await waiter.committed.wait()
        else:
            await self.gather_and_commit()
        if waiter.error is not None:
            raise waiter.error
        return waiter.record_id

    async def gather_and_commit(self) -> None:
        """Yield to the loop until a pass adds no record, so steps finishing now can join, then commit
        the group and wake its members. (One pass is not enough: the steps of a fan-out started over
        a millisecond or two, so their waits end over as many loop passes.)

        Shielded: once others have joined, this writer commits their records even if it is being
        cancelled itself, so none of them waits for a commit that never comes.
        """
        with anyio.CancelScope(shield=True):
            size = 0
            while len(self.group) != size:
                size = len(self.group)
                await anyio.lowlevel.checkpoint()
        group, self.group = self.group, []
        try:
            ids = await store_call(self.store.insert_step_records, [w.record for w in group])
        except BaseException as exc:  # every record of the group shares the transaction's fate
            for w in group:
                w.error = exc
        else:
            for w, record_id in zip(group, ids, strict=True):
                w.record_id = record_id
        for w in group:
            w.committed.set()
