"""Calling a workflow's outcome evaluator: what it is given and what it may return.

An evaluator always receives the run's final output as its first argument. It also receives
``inputs`` (the run's inputs) and ``reference`` (the run's reference answer, None when nobody
gave one) when its signature declares parameters of those names (or ``**kwargs``), so an
evaluator written for the final output alone keeps working.

It may return, and :func:`as_score` accepts:

- a number (or a bool) in [0, 1];
- a ``(score, reason)`` tuple;
- a mapping ``{"score": ..., "reason": ...}`` (``reason`` optional);
- a :class:`Score` (or any object with ``score`` and ``reason`` attributes).

The reason is stored on the outcome, so ``show`` can say why a run scored what it did.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class Score(BaseModel):
    """An evaluator's score with the reason for it."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on first use: most runs have no evaluator

    score: float
    reason: str | None = None


class EvaluatorScoreError(ValueError):
    """An evaluator's return value is not a score in [0, 1]."""


def evaluator_arguments(fn: Callable[..., Any], inputs: Mapping[str, Any] | None,
                        reference: Any) -> dict[str, Any]:
    """The keyword arguments ``fn`` declares among ``inputs`` and ``reference``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature get the output alone
        return {}
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    extra: dict[str, Any] = {}
    if open_kwargs or "inputs" in params:
        extra["inputs"] = dict(inputs or {})
    if open_kwargs or "reference" in params:
        extra["reference"] = reference
    return extra


def call_evaluator(fn: Callable[..., Any], output: Any, *, inputs: Mapping[str, Any] | None = None,
                   reference: Any = None) -> Score:
    """Score ``output`` with ``fn``; raises what ``fn`` raises, or EvaluatorScoreError for a bad return."""
    return as_score(fn(output, **evaluator_arguments(fn, inputs, reference)))


def as_score(returned: object) -> Score:
    """An evaluator's return value as a :class:`Score`; EvaluatorScoreError unless its score is in [0, 1]."""
    reason: object = None
    raw = returned
    if isinstance(returned, tuple) and len(returned) == 2:
        raw, reason = returned
    elif isinstance(returned, Mapping) and "score" in returned:
        raw, reason = returned["score"], returned.get("reason")
    elif not isinstance(returned, (int, float)) and hasattr(returned, "score"):
        raw, reason = returned.score, getattr(returned, "reason", None)
    value = _number(raw)
    if value is None or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise EvaluatorScoreError(f"returned {returned!r}; a score is a number in [0, 1] (or a bool), a "
                                  "(score, reason) tuple, a {score, reason} dict or a Score")
    if reason is not None and not isinstance(reason, str):
        reason = str(reason)
    return Score(score=value, reason=reason or None)


def _number(raw: object) -> float | None:
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__float__"):  # numbers, numpy scalars, bools
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None
