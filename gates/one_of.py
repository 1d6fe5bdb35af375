"""``one_of``: a value is one of an allowed set (a label, a status, a decision).

Classifier-like steps that invent a new category break every ``if`` downstream; this gate
catches the invention where it happens.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, preview
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` apart from ``1``: a YAML ``yes`` is not the number one."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except Exception:  # exotic __eq__; an unequal value is the safe verdict
        return False


@register
@dataclasses.dataclass(frozen=True)
class OneOf:
    """Pass when the value equals one of ``values``.

    Args:
        values: the allowed values (non-empty list).
        field: optional dotted path; default the output itself.
    """

    name: ClassVar[str] = "one_of"
    values: list[Any]
    field: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.values, str) or not isinstance(self.values, list | tuple) or not self.values:
            raise GateConfigError("parameter 'values' must be a non-empty list of allowed values")

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        allowed = ", ".join(preview(v, 30) for v in self.values[:10])
        if len(self.values) > 10:
            allowed += f", ... ({len(self.values)} values)"
        subject = f"{describe(self.field)} = {preview(value)}"
        if any(_same(value, v) for v in self.values):
            return GateResult(passed=True, score=1.0, reason=f"{subject} is one of {allowed}")
        return GateResult(passed=False, score=0.0, reason=f"{subject} is not one of {allowed}")
