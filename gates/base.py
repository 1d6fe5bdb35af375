"""The gate protocol and the registry of built-in gates.

A gate is a tiny object with one method, ``check(output, ctx) -> GateResult``. Gates depend
only on the spec model: they never touch the store or the executor.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GATE_ERROR, GateResult

__all__ = ["Gate", "GateConfigError", "VerdictError", "GateEvaluation", "GateResult", "register", "BUILTIN_GATES",
           "evaluate", "evaluate_async", "is_gate_error", "is_async_gate"]


class GateConfigError(ValueError):
    """A gate's parameters are wrong; raised while the workflow is validated (exit 2)."""


@runtime_checkable
class Gate(Protocol):
    """Anything with a ``check`` method returning a GateResult (or a bool)."""

    name: ClassVar[str]

    def check(self, output: Any, ctx: StepContext) -> GateResult: ...


BUILTIN_GATES: dict[str, type] = {}
"""Built-in gate classes by YAML name; filled by :func:`register`."""


_GateClass = TypeVar("_GateClass", bound=type[Gate])


def register(cls: _GateClass) -> _GateClass:
    """Class decorator adding a built-in gate under its ``name``."""
    BUILTIN_GATES[cls.name] = cls
    return cls


@dataclass(frozen=True)
class GateEvaluation:
    """A gate verdict plus how long the check took, as the store records it."""

    gate: str
    result: GateResult
    duration: float


class VerdictError(TypeError):
    """A gate returned something that is not a verdict, or a score outside [0, 1]; its message is the
    failed verdict's reason as is."""


def normalize(value: Any, gate_name: str) -> GateResult:
    """Accept what user gates return: a GateResult, a bool, or a (passed, reason) tuple; a score, when
    given, is a number in [0, 1] (as an outcome evaluator's), else :class:`VerdictError`."""
    result = _as_verdict(value, gate_name)
    score = result.score
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not 0 <= score <= 1):
        raise VerdictError(f"gate {gate_name!r} returned score {score!r}; a score is a number in [0, 1]")
    return result


def _as_verdict(value: Any, gate_name: str) -> GateResult:
    if isinstance(value, GateResult):
        return value
    if isinstance(value, bool):
        return GateResult(passed=value, score=1.0 if value else 0.0,
                          reason=f"{gate_name} {'passed' if value else 'failed'}")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
        return GateResult(passed=value[0], score=1.0 if value[0] else 0.0, reason=str(value[1]))
    if isinstance(value, dict) and "passed" in value:
        return GateResult(passed=bool(value["passed"]), score=value.get("score"),
                          reason=str(value.get("reason", "")), details=dict(value.get("details") or {}))
    raise VerdictError(f"gate {gate_name!r} returned {type(value).__name__}; expected GateResult or bool")


_WANTS_CTX: dict[Any, bool] = {}
"""Per gate function: does it take ``ctx``? Inspecting a signature costs ~20 µs, more than a cheap gate."""


def _wants_ctx(check: Callable[..., Any]) -> bool:
    key = getattr(check, "__func__", check)
    try:
        return _WANTS_CTX[key]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(check).parameters
        wants = "ctx" in params or len([p for p in params.values() if p.kind != p.VAR_KEYWORD]) >= 2
    except (TypeError, ValueError):
        wants = True
    try:
        _WANTS_CTX[key] = wants
    except TypeError:  # an unhashable callable object: just do not cache it
        pass
    return wants


def call_check(check: Callable[..., Any], output: Any, ctx: StepContext) -> Any:
    """Call a user gate function with ``ctx`` only when it declares one."""
    return check(output, ctx) if _wants_ctx(check) else check(output)


def is_gate_error(result: GateResult) -> bool:
    """Whether the verdict says the check itself broke (then the output is not at fault)."""
    return bool(result.details.get(GATE_ERROR))


def _broken(label: str, exc: Exception) -> GateResult:
    """The verdict of a gate that raised: its own error, unless it only gave an unusable verdict."""
    if isinstance(exc, VerdictError):
        return GateResult(passed=False, score=0.0, reason=str(exc), details={"error": type(exc).__name__})
    reason = f"gate {label!r} raised {type(exc).__name__}: {exc}"
    return GateResult(passed=False, score=None, reason=reason, details={"error": type(exc).__name__, GATE_ERROR: True})


def is_async_gate(gate: Any) -> bool:
    """Whether the gate's check is ``async def`` (awaited on the event loop, never in a thread)."""
    return inspect.iscoroutinefunction(gate.check if hasattr(gate, "check") else gate)


def evaluate(gate: Any, label: str, output: Any, ctx: StepContext) -> GateEvaluation:
    """Run one gate. A gate that raises is a gate *error*: a failed verdict naming the exception,
    marked so it is shown as the check's fault and never fed back to the model as its answer's.
    An ``async def`` check is run to completion here (this thread must have no running event loop)."""
    started = time.perf_counter()
    try:
        check = gate.check if hasattr(gate, "check") else gate
        value = call_check(check, output, ctx)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
        result = normalize(value, label)
    except Exception as exc:  # the gate itself broke: a failed verdict a reviewer can read
        result = _broken(label, exc)
    return GateEvaluation(gate=label, result=result, duration=time.perf_counter() - started)


async def _awaited(value: Any) -> Any:
    return await value


async def evaluate_async(gate: Any, label: str, output: Any, ctx: StepContext) -> GateEvaluation:
    """:func:`evaluate` for an ``async def`` check, awaited on the caller's event loop."""
    started = time.perf_counter()
    try:
        check = gate.check if hasattr(gate, "check") else gate
        value = call_check(check, output, ctx)
        if inspect.isawaitable(value):
            value = await value
        result = normalize(value, label)
    except Exception as exc:
        result = _broken(label, exc)
    return GateEvaluation(gate=label, result=result, duration=time.perf_counter() - started)
