"""``not_empty``: the output (or a field) has content.

An empty retrieval or a blank summary is the cheapest failure to catch and the most
expensive to miss: later steps happily reason about nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sized
from typing import Any, ClassVar

from gates.base import register
from gates.paths import FieldNotFound, describe, get_field, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


def emptiness(value: Any) -> str | None:
    """Why ``value`` counts as empty, or None when it has content."""
    if value is None:
        return "is None"
    if isinstance(value, str):
        if value == "":
            return "is an empty string"
        if not value.strip():
            return "is a whitespace-only string"
        return None
    if isinstance(value, Mapping) and len(value) == 0:
        return "is an empty dict"
    if isinstance(value, Sized) and not isinstance(value, bytes | bytearray) and len(value) == 0:
        return f"is an empty {type_name(value)}"
    if isinstance(value, bytes | bytearray) and len(value) == 0:
        return "is empty bytes"
    return None


@register
@dataclasses.dataclass(frozen=True)
class NotEmpty:
    """Fail on None, ``""``, whitespace-only strings and empty lists, dicts, tuples or sets.

    Args:
        field: optional dotted path; default the output itself.
    """

    name: ClassVar[str] = "not_empty"
    field: str | None = None

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        why = emptiness(value)
        if why is not None:
            return GateResult(passed=False, score=0.0, reason=f"{describe(self.field)} {why}")
        size = ""
        if isinstance(value, Sized):
            size = f" of {len(value)} {'chars' if isinstance(value, str) else 'items'}"
        return GateResult(passed=True, score=1.0,
                          reason=f"{describe(self.field)} is a non-empty {type_name(value)}{size}")
