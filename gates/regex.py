"""``regex``: a text output (or field) matches a regular expression.

Cheap structural checks on free text (an ISO date, a ticket id, "no TODO left") catch an
agent that answered a different question than the one asked.

Patterns run on RE2 (``google-re2``), whose matching time is linear in the text: no pattern can
backtrack for ever (``^(a+)+$`` on 41 characters takes microseconds, where Python's ``re`` takes
minutes), so the gate stays quick enough to run on the event loop. RE2 has no lookarounds and no
backreferences; such a pattern is a configuration error naming the construct.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import re2

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, preview, type_name
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class Regex:
    """Pass when the text matches ``pattern`` (``re.search`` by default, or ``re.fullmatch``).

    Args:
        pattern: a regular expression in RE2 syntax (Python's, without lookarounds and backreferences);
            an invalid one is a configuration error.
        field: optional dotted path; default the output itself. The value must be a string.
        mode: ``search`` (anywhere in the text, the default) or ``fullmatch`` (the whole text).
        ignore_case: match case-insensitively.
    """

    name: ClassVar[str] = "regex"
    pattern: str
    field: str | None = None
    mode: Literal["search", "fullmatch"] = "search"
    ignore_case: bool = False
    _compiled: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("search", "fullmatch"):
            raise GateConfigError(f"parameter 'mode' must be 'search' or 'fullmatch', got {self.mode!r}")
        options = re2.Options()
        options.case_sensitive = not self.ignore_case
        options.log_errors = False  # the message is raised below, not logged to stderr
        try:
            compiled = re2.compile(self.pattern, options)
        except (re2.error, TypeError) as exc:
            why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise GateConfigError(
                f"parameter 'pattern' {self.pattern!r} is not a valid regular expression for RE2 (linear-time; "
                f"no lookarounds or backreferences): {why}") from None
        object.__setattr__(self, "_compiled", compiled)

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        subject = describe(self.field)
        if not isinstance(value, str):
            hint = "" if self.field else "; set 'field' to the text inside it"
            return GateResult(passed=False, score=0.0,
                              reason=f"{subject} is a {type_name(value)}, not text{hint}")
        match = self._compiled.search(value) if self.mode == "search" else self._compiled.fullmatch(value)
        if match is None:
            verb = "contain a match for" if self.mode == "search" else "fully match"
            return GateResult(passed=False, score=0.0, details={"mode": self.mode},
                              reason=f"{subject} {preview(value)} does not {verb} pattern {self.pattern!r}")
        verb = "matches" if self.mode == "search" else "fully matches"
        return GateResult(passed=True, score=1.0, details={"match": match.group(0)[:200], "mode": self.mode},
                          reason=f"{subject} {verb} pattern {self.pattern!r}: {preview(match.group(0), 40)}")
