"""``range``: a numeric output (or field) lies within ``[min, max]``.

Numbers from agents drift silently (a unit price in cents, a probability of 7): a bound
turns a plausible-looking wrong number into a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, fmt_number, get_field, is_number, preview, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class Range:
    """Pass when the value is a number with ``min <= value <= max`` (bounds inclusive).

    Args:
        field: optional dotted path; default the output itself.
        min: lower bound, inclusive.
        max: upper bound, inclusive. At least one of ``min`` and ``max`` is required.
    """

    name: ClassVar[str] = "range"
    field: str | None = None
    min: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        if self.min is None and self.max is None:
            raise GateConfigError("give at least one of 'min' and 'max'")
        for key in ("min", "max"):
            bound = getattr(self, key)
            if bound is not None and (not is_number(bound) or math.isnan(bound)):
                raise GateConfigError(f"parameter '{key}' must be a number, got {bound!r}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise GateConfigError(
                f"'min' ({fmt_number(self.min)}) is greater than 'max' ({fmt_number(self.max)})")

    def _bounds(self) -> str:
        lo = fmt_number(self.min) if self.min is not None else "-inf"
        hi = fmt_number(self.max) if self.max is not None else "inf"
        return f"[{lo}, {hi}]"

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        subject = describe(self.field)
        details = {"value": value if is_number(value) else preview(value), "min": self.min, "max": self.max}
        if not is_number(value) or math.isnan(value):
            return GateResult(passed=False, score=0.0, details=details,
                              reason=f"{subject} = {preview(value)} is a {type_name(value)}, not a number")
        shown = f"{subject} = {fmt_number(value)}"
        if self.min is not None and value < self.min:
            return GateResult(passed=False, score=0.0, details=details,
                              reason=f"{shown} is below min {fmt_number(self.min)}")
        if self.max is not None and value > self.max:
            return GateResult(passed=False, score=0.0, details=details,
                              reason=f"{shown} is above max {fmt_number(self.max)}")
        return GateResult(passed=True, score=1.0, details=details,
                          reason=f"{shown} is within {self._bounds()}")
