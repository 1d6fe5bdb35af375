"""``min_items``: enough items, optionally enough *good* items.

The retrieval check from the source documents: "at least 3 results with relevance score above
0.7". A retriever that returns two weak documents lets every later step build on too little;
this gate pauses the run before the summary is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, fmt_number, get_field, is_number, is_sequence, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class MinItems:
    """Pass when the list holds at least ``count`` items (that score ``>= threshold``).

    Args:
        count: how many qualifying items are needed, at least 1.
        field: optional dotted path to the list; default the output itself.
        score_field: dotted path, inside each item, of its score (e.g. ``score``, ``meta.relevance``).
        threshold: minimum score for an item to count; ``score_field`` and ``threshold`` go together.

    The score is the fraction ``qualifying / count``, capped at 1, so a near miss ranks above
    an empty result in stats.
    """

    name: ClassVar[str] = "min_items"
    count: int
    field: str | None = None
    score_field: str | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise GateConfigError(f"parameter 'count' must be an integer >= 1, got {self.count!r}")
        if (self.score_field is None) != (self.threshold is None):
            raise GateConfigError("'score_field' and 'threshold' go together: give both or neither")
        if self.threshold is not None and not is_number(self.threshold):
            raise GateConfigError(f"parameter 'threshold' must be a number, got {self.threshold!r}")

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            items = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        if isinstance(items, Mapping) or not (is_sequence(items) or isinstance(items, set | frozenset)):
            return GateResult(passed=False, score=0.0,
                              reason=f"{describe(self.field)} is a {type_name(items)}, not a list of items")
        items = list(items)
        total = len(items)
        if self.score_field is None or self.threshold is None:
            qualifying = total
            what = f"{total} item{'s' if total != 1 else ''}"
            details: dict[str, Any] = {"items": total, "count": self.count}
        else:
            unscored = 0
            qualifying = 0
            for item in items:
                try:
                    score = get_field(item, self.score_field)
                except FieldNotFound:
                    unscored += 1
                    continue
                if not is_number(score):
                    unscored += 1
                elif score >= self.threshold:
                    qualifying += 1
            what = f"{qualifying} of {total} items {self.score_field} >= {fmt_number(self.threshold)}"
            details = {"items": total, "qualifying": qualifying, "unscored": unscored, "count": self.count,
                       "threshold": self.threshold, "score_field": self.score_field}
        need = f"need {self.count}"
        if details.get("unscored"):
            need += f"; {details['unscored']} without a numeric '{self.score_field}'"
        score = min(qualifying / self.count, 1.0)
        return GateResult(passed=qualifying >= self.count, score=score, reason=f"{what} ({need})",
                          details=details)
