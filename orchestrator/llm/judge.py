"""LLM-as-judge gates and the verdict format of LLM critic steps.

A judge scores an output against a rubric on 0..1 and the *threshold is applied here*, to the
score, rather than asking the model for pass/fail: a score keeps the gate's strictness in the
workflow author's hands and is comparable across runs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from orchestrator.spec.context import CallLog
from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.llm_records import LLMRecord

#: What a judge must answer.
JUDGE_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}

#: What an LLM critic step must answer (it decides pass/fail itself and explains).
CRITIC_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"passed": {"type": "boolean"}, "score": {"type": "number", "minimum": 0, "maximum": 1},
                   "reason": {"type": "string"}},
    "required": ["passed", "score", "reason"],
}

JUDGE_SYSTEM = ("You are a strict, fair grader. You judge whether an output meets a rubric. "
                "You answer only with JSON.")

JUDGE_PROMPT = """Grade the output below against the rubric.

## Rubric
{{ rubric }}

## Output
{{ output }}
{% if reference is not none %}
## Reference answer
{{ reference }}
{% endif %}
Answer with a JSON object: "score" is a number from 0 (does not meet the rubric at all) to 1 (fully meets it), \
"reason" is one short sentence explaining the score."""


class JudgeVerdict(BaseModel):
    """The judge's score, whether it reaches the threshold, and the call's record."""

    passed: bool
    score: float = Field(ge=0, le=1)
    reason: str
    threshold: float
    record: LLMRecord


def _as_text(value: Any) -> str:
    from orchestrator.spec.templates import tojson

    return value if isinstance(value, str) else tojson(value, indent=2)


async def judge(*, config: LLMConfig, rubric: str, output: Any, reference: Any | None = None, threshold: float = 0.5,
                validation_retries: int = 2, log: CallLog | None = None) -> JudgeVerdict:
    """Score ``output`` against ``rubric`` (and ``reference`` if given); ``passed`` is ``score >= threshold``.
    ``log`` records each of the judge's model calls.

    Raises :class:`~orchestrator.spec.llm_errors.LLMStepError` when the judge never returns a valid verdict.
    """
    from orchestrator.llm.call import run_llm

    outcome = await run_llm(config=config, system=JUDGE_SYSTEM, prompt=JUDGE_PROMPT, output_schema=JUDGE_VERDICT_SCHEMA,
                            variables={"rubric": rubric, "output": _as_text(output),
                                       "reference": None if reference is None else _as_text(reference)},
                            inject_needs=False, validation_retries=validation_retries, log=log)
    score = float(outcome.output["score"])
    return JudgeVerdict(passed=score >= threshold, score=score, reason=str(outcome.output["reason"]),
                        threshold=threshold, record=outcome.record)
