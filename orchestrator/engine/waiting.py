"""The units of one execution waiting for review, found by the step (and instance) they belong to.

A map asks for its own waiting units once, and every loop asks for its own waiting iteration each time it
runs: a map of N loops, each of them paused, asked N times over all N waiting units when this was a plain
set (8 million unit parsings for a map of 4 000 loops). Here each unit is filed under its step and instance
when it is added, so each of those questions costs what its own answer holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSet

from orchestrator.spec.records import parse_unit, path_head


class WaitingUnits(MutableSet[str]):
    """Units (``review``, ``summarize[7]``, ``improve#2``, ``per_ticket[3] > classify``) waiting for review: a
    set, also indexed by the step and the instance (index, or None) that each unit belongs to."""

    def __init__(self, units: Iterable[str] = ()) -> None:
        self.units: set[str] = set()
        self.by_step: dict[str, dict[int | None, set[str]]] = {}
        self.update(units)

    def __contains__(self, unit: object) -> bool:
        return unit in self.units

    def __iter__(self) -> Iterator[str]:
        return iter(self.units)

    def __len__(self) -> int:
        return len(self.units)

    def __repr__(self) -> str:
        return f"WaitingUnits({sorted(self.units)!r})"

    def add(self, unit: str) -> None:
        if unit in self.units:
            return
        self.units.add(unit)
        step_id, index, _ = parse_unit(path_head(unit))  # a path: a pause inside the unit's child run
        self.by_step.setdefault(step_id, {}).setdefault(index, set()).add(unit)

    def discard(self, unit: str) -> None:
        if unit not in self.units:
            return
        self.units.discard(unit)
        step_id, index, _ = parse_unit(path_head(unit))
        instances = self.by_step[step_id]
        instances[index].discard(unit)
        if not instances[index]:
            del instances[index]
            if not instances:
                del self.by_step[step_id]

    def update(self, units: Iterable[str]) -> None:
        for unit in units:
            self.add(unit)

    def of_instance(self, step_id: str, index: int | None) -> set[str]:
        """The waiting units of one instance of a step (``index`` None: of the step itself, unmapped)."""
        return set(self.by_step.get(step_id, {}).get(index, ()))

    def of_instances(self, step_id: str) -> dict[int | None, set[str]]:
        """The waiting units of a step, by instance index (None: of the step itself, unmapped)."""
        return {index: set(units) for index, units in self.by_step.get(step_id, {}).items()}
