"""``required_fields``: every listed field is present and not None.

A step that drops a field is the classic propagated error: the next step fills the gap with a
plausible guess. Listing what must be there makes the gap a verdict at the step that made it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, get_field
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class RequiredFields:
    """Pass when every dotted path in ``fields`` exists in the output and is not None.

    Args:
        fields: dotted field paths, e.g. ``[vendor, price.amount, items.0.sku]``.
    """

    name: ClassVar[str] = "required_fields"
    fields: list[str]

    def __post_init__(self) -> None:
        if isinstance(self.fields, str) or not self.fields:
            raise GateConfigError("parameter 'fields' must be a non-empty list of field paths")
        bad = [f for f in self.fields if not isinstance(f, str) or not f]
        if bad:
            raise GateConfigError(f"parameter 'fields' holds non-path entries: {bad!r}")

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        missing: list[str] = []
        null: list[str] = []
        for path in self.fields:
            try:
                value = get_field(output, path)
            except FieldNotFound:
                missing.append(path)
                continue
            if value is None:
                null.append(path)
        total = len(self.fields)
        present = total - len(missing) - len(null)
        details = {"missing": missing, "none": null, "present": present, "required": total}
        if not missing and not null:
            return GateResult(passed=True, score=1.0, details=details,
                              reason=f"all {total} required fields present")
        parts = []
        if missing:
            parts.append("missing " + ", ".join(f"'{p}'" for p in missing))
        if null:
            parts.append("None: " + ", ".join(f"'{p}'" for p in null))
        return GateResult(
            passed=False,
            score=present / total,
            reason=f"{present} of {total} required fields present; {'; '.join(parts)}",
            details=details,
        )
