"""``llm_judge``: a model scores the output against a rubric (and, optionally, a reference).

Some qualities have no regex: "cites the cheapest vendor", "answers the customer's question".
A judge model reads the rubric and the output and returns a score in [0, 1] with its reason;
the gate passes at ``threshold``. The judge's own prompt, answer, tokens and cost are kept in
the verdict's details, so a reviewer can see why it judged as it did. The judge uses the
workflow's ``llm:`` model unless the gate's ``llm`` overrides it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, get_field
from orchestrator.spec.context import StepContext
from orchestrator.spec.llm_config import LLMConfig, merge
from orchestrator.spec.model import GateResult


@register
@dataclasses.dataclass(frozen=True)
class LLMJudge:
    """Pass when the judge model scores the output at least ``threshold``.

    Args:
        rubric: what a good output does, in a sentence or two.
        threshold: the passing score, in [0, 1].
        reference: an optional reference answer the judge compares against.
        field: optional dotted path to the part of the output to judge.
        llm: overrides of the workflow's ``llm:`` block for the judge (e.g. a stronger model).
    """

    name: ClassVar[str] = "llm_judge"
    slow: ClassVar[bool] = True
    """A model call: checked in a worker thread, never on the event loop."""
    rubric: str
    threshold: float = 0.7
    reference: str | None = None
    field: str | None = None
    llm: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rubric, str) or not self.rubric.strip():
            raise GateConfigError("parameter 'rubric' must be a non-empty text saying what a good output does")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not 0 <= self.threshold <= 1:
            raise GateConfigError(f"parameter 'threshold' must be a number in [0, 1], got {self.threshold!r}")
        try:
            LLMConfig.model_validate(self.llm or {})
        except ValueError as exc:
            raise GateConfigError(f"parameter 'llm': {str(exc).splitlines()[0]}") from None

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        from orchestrator.llm.judge import judge

        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        config = merge(ctx.llm_defaults if ctx is not None else None, self.llm)
        verdict = asyncio.run(judge(config=config, rubric=self.rubric, output=value, reference=self.reference,
                                    threshold=self.threshold, log=ctx.calls if ctx is not None else None))
        reason = f"judge {config.model}: {verdict.reason} (score {verdict.score:.2f}, threshold {self.threshold:g})"
        return GateResult(passed=verdict.passed, score=verdict.score, reason=reason,
                          details={"judge": verdict.record.model_dump(mode="json")})
