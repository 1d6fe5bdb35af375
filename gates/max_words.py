"""``max_words``: a text output stays under a word limit.

Over-long answers are how an agent hides that it did not decide; a limit keeps summaries
reviewable and the next step's prompt within budget.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class MaxWords:
    """Pass when the text has at most ``limit`` whitespace-separated words.

    Args:
        limit: the maximum number of words, at least 1.
        field: optional dotted path to the text; default the output itself.
    """

    name: ClassVar[str] = "max_words"
    limit: int
    field: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise GateConfigError(f"parameter 'limit' must be an integer >= 1, got {self.limit!r}")

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        if not isinstance(value, str):
            return GateResult(passed=False, score=0.0,
                              reason=f"{describe(self.field)} is a {type_name(value)}, not text")
        words = len(value.split())
        prefix = f"{describe(self.field)}: " if self.field else ""
        details = {"words": words, "limit": self.limit}
        score = 1.0 if words <= self.limit else self.limit / words
        return GateResult(passed=words <= self.limit, score=score, details=details,
                          reason=f"{prefix}{words} word{'s' if words != 1 else ''} (limit {self.limit})")
