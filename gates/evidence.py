"""``evidence``: the output cites ids that an earlier step actually produced.

A reasoning step that cites nothing it retrieved is either ignoring its evidence or making
it up; both look confident downstream. This gate checks the step's text against the ids of
the items a named upstream step returned (``ctx.upstream_output(source)``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, is_sequence, iter_strings, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult

MAX_IDS_SHOWN = 5


def _quoted(ids: list[str]) -> str:
    shown = ", ".join(f"'{i}'" for i in ids[:MAX_IDS_SHOWN])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > MAX_IDS_SHOWN else "")


def _id_pattern(ident: str) -> re.Pattern[str]:
    """Match ``ident`` as a whole token, so id ``doc-1`` is not "cited" by the text ``doc-12``."""
    return re.compile(rf"(?<![\w-]){re.escape(ident)}(?![\w-])")


@register
@dataclasses.dataclass(frozen=True)
class Evidence:
    """Pass when the output mentions at least ``min_refs`` ids produced by step ``source``.

    Args:
        source: the upstream step id whose output holds the citable items.
        id_field: dotted path of the id inside each source item (default ``id``); items that
            are plain strings or ints are ids themselves.
        source_field: dotted path of the item list inside the source output, when the source
            output is a dict (e.g. ``results``); default the source output itself.
        field: dotted path of the part of *this* step's output to search; default all of it.
            Every string (and int) inside is searched, recursively.
        min_refs: how many distinct source ids must be cited (default 1).
    """

    name: ClassVar[str] = "evidence"
    source: str
    id_field: str = "id"
    source_field: str | None = None
    field: str | None = None
    min_refs: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source:
            raise GateConfigError("parameter 'source' must be an upstream step id")
        if isinstance(self.min_refs, bool) or not isinstance(self.min_refs, int) or self.min_refs < 1:
            raise GateConfigError(f"parameter 'min_refs' must be an integer >= 1, got {self.min_refs!r}")

    def upstream_steps(self) -> tuple[str, ...]:
        """The steps this gate reads, so a validator can check they run before this one."""
        return (self.source,)

    def _source_ids(self, source_output: Any) -> tuple[list[str], str | None]:
        """The distinct ids in the source output, or an explanation of why there are none."""
        try:
            items = get_field(source_output, self.source_field)
        except FieldNotFound as exc:
            return [], f"step '{self.source}' output: {exc}"
        if isinstance(items, Mapping) and self.source_field is None:
            items = [items]  # a single record is a list of one
        if not is_sequence(items):
            where = f"field '{self.source_field}' of " if self.source_field else ""
            return [], f"{where}step '{self.source}' output is a {type_name(items)}, not a list of items"
        ids: list[str] = []
        for item in items:
            if isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool)):
                value: Any = item
            else:
                try:
                    value = get_field(item, self.id_field)
                except FieldNotFound:
                    continue
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
                text = str(value).strip()
                if text not in ids:
                    ids.append(text)
        if not ids:
            return [], f"step '{self.source}' produced no ids ('{self.id_field}' in {len(items)} items)"
        return ids, None

    def check(self, output: Any, ctx: StepContext) -> GateResult:
        try:
            source_output = ctx.upstream_output(self.source)
        except KeyError:
            return GateResult(passed=False, score=0.0,
                              reason=f"step '{self.source}' has no recorded output to cite from")
        ids, problem = self._source_ids(source_output)
        if problem is not None:
            return GateResult(passed=False, score=0.0, reason=problem, details={"source": self.source})
        try:
            searched = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        texts = list(iter_strings(searched))
        cited = []
        for ident in ids:
            pattern = _id_pattern(ident)
            if any(pattern.search(t) for t in texts):
                cited.append(ident)
        details = {"source": self.source, "cited": cited, "source_ids": len(ids), "min_refs": self.min_refs}
        score = min(len(cited) / self.min_refs, 1.0)
        where = "" if self.field is None else f" in {describe(self.field)}"
        if not cited:
            return GateResult(passed=False, score=0.0, details=details,
                              reason=f"none of the {len(ids)} ids from step '{self.source}' is cited{where} "
                                     f"(ids: {_quoted(ids)})")
        summary = f"cites {len(cited)} of {len(ids)} ids from step '{self.source}'{where}: {_quoted(cited)}"
        if len(cited) < self.min_refs:
            return GateResult(passed=False, score=score, details=details,
                              reason=f"{summary} (need {self.min_refs})")
        return GateResult(passed=True, score=score, details=details, reason=summary)
