"""Turn a :class:`GateSpec` (a YAML ``- gate: NAME`` entry) into a gate object.

All configuration problems surface here, while the workflow is validated, as one
:class:`GateConfigError` that names the step and the gate: a typo in a parameter must stop
``orchestrator validate`` rather than silently disable a check at run time.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import TypeAdapter, ValidationError

from gates.base import BUILTIN_GATES, GateConfigError, normalize
from gates.paths import preview
from orchestrator.bind.resolve import resolve_callable
from orchestrator.core.errors import ResolveError
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult, GateSpec

__all__ = ["build_gate", "construct_gate", "FunctionGate", "AsyncFunctionGate"]


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _quoted(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _check_names(params: Mapping[str, Any], valid: list[str], required: list[str], *,
                 open_ended: bool = False) -> None:
    """Reject unknown and missing parameters with a message that lists the valid ones."""
    unknown = [k for k in params if k not in valid]
    if unknown and not open_ended:
        noun = "parameter" if len(unknown) == 1 else "parameters"
        valid_text = ", ".join(sorted(valid)) if valid else "(none)"
        hint = _did_you_mean(unknown[0], valid) if len(unknown) == 1 else ""
        raise GateConfigError(f"unknown {noun} {_quoted(unknown)}; valid: {valid_text}{hint}")
    missing = [name for name in required if name not in params]
    if missing:
        noun = "parameter" if len(missing) == 1 else "parameters"
        raise GateConfigError(f"missing required {noun} {_quoted(missing)}")


@functools.cache
def _adapters(cls: type) -> dict[str, TypeAdapter[Any]]:
    """One pydantic TypeAdapter per dataclass field, built once per gate class."""
    hints = typing.get_type_hints(cls)
    return {f.name: TypeAdapter(hints[f.name]) for f in dataclasses.fields(cls) if f.init}


def _typed(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """Check each parameter against its annotation, strictly: YAML types are explicit.

    Strict mode means ``count: "3"`` and ``threshold: true`` are errors rather than silently
    coerced; an int is still accepted where a float is expected.
    """
    adapters = _adapters(cls)
    out: dict[str, Any] = {}
    for key, value in params.items():
        try:
            out[key] = adapters[key].validate_python(value, strict=True)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = "".join(f"[{p}]" for p in err["loc"])
            msg = str(err["msg"])
            msg = msg[len("Input "):] if msg.startswith("Input ") else msg
            got = err.get("input", value)
            raise GateConfigError(f"parameter '{key}{loc}' {msg} (got {preview(got)})") from None
    return out


def construct_gate(cls: type, params: Mapping[str, Any], *, base_dir: str | Path | None = None,
                   typed: bool = True) -> Any:
    """Instantiate a gate class from YAML parameters, checking names (and types for dataclasses).

    A class may define ``prepare_params(params, base_dir)`` (a classmethod) to resolve
    references such as ``model: "module:Model"`` next to the workflow file before construction.

    Raises:
        GateConfigError: without the step/gate prefix; :func:`build_gate` adds it.
    """
    params = dict(params)
    if dataclasses.is_dataclass(cls):
        init_fields = [f for f in dataclasses.fields(cls) if f.init]
        valid = [f.name for f in init_fields]
        required = [f.name for f in init_fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        _check_names(params, valid, required)
        if typed:
            params = _typed(cls, params)
    else:
        try:
            sig = inspect.signature(cls)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            ps = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            open_ended = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
            _check_names(params, [p.name for p in ps],
                         [p.name for p in ps if p.default is p.empty], open_ended=open_ended)
    prepare = getattr(cls, "prepare_params", None)
    if callable(prepare):
        params = prepare(params, base_dir=base_dir)
    try:
        gate = cls(**params)
    except GateConfigError:
        raise
    except Exception as exc:  # a user class that cannot be built is a config problem, not a crash
        raise GateConfigError(f"{cls.__name__}(...) raised {type(exc).__name__}: {exc}") from None
    if not callable(getattr(gate, "check", None)):
        raise GateConfigError(f"{cls.__name__} has no check(output, ctx) method")
    return gate


@dataclasses.dataclass(frozen=True)
class FunctionGate:
    """A plain function used as a gate: called as ``fn(output, ctx?, **params)``.

    ``ctx`` is passed only when the function declares it (a parameter named ``ctx``, or a
    second positional parameter not filled by ``params``), so the simplest custom gate is
    ``def short(output): return len(output) < 100``. Whatever it returns goes through
    :func:`gates.base.normalize`, so bools and ``(passed, reason)`` tuples work.
    """

    name: ClassVar[str] = "function"
    fn: Callable[..., Any]
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    ref: str = ""
    ctx_mode: str | None = None
    """``"keyword"``, ``"positional"`` or ``None`` (the function takes no ctx)."""

    @classmethod
    def wrap(cls, fn: Callable[..., Any], params: Mapping[str, Any], ref: str = "") -> FunctionGate:
        """Check ``params`` against ``fn``'s signature now, so a typo fails at validation time (or, from
        Python, at definition). An ``async def`` function gives an :class:`AsyncFunctionGate`, awaited."""
        params = dict(params)
        ref = ref or getattr(fn, "__qualname__", repr(fn))
        kind = AsyncFunctionGate if inspect.iscoroutinefunction(fn) else FunctionGate
        if "ctx" in params:
            raise GateConfigError("'ctx' is reserved: the step context is passed by the orchestrator")
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return kind(fn=fn, params=params, ref=ref, ctx_mode=None)
        all_params = list(sig.parameters.values())
        positional = [p for p in all_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        has_var_pos = any(p.kind == p.VAR_POSITIONAL for p in all_params)
        has_var_kw = any(p.kind == p.VAR_KEYWORD for p in all_params)
        if not positional and not has_var_pos:
            raise GateConfigError(f"{ref} must take the step output as its first positional parameter")
        first = positional[0].name if positional else None
        if first is not None and first in params:
            raise GateConfigError(
                f"parameter '{first}' clashes with {ref}'s first parameter, the step output")
        ctx_mode: str | None = None
        ctx_name: str | None = None
        if "ctx" in sig.parameters and first != "ctx":
            ctx_name = "ctx"
            ctx_mode = "positional" if sig.parameters["ctx"].kind == inspect.Parameter.POSITIONAL_ONLY \
                else "keyword"
        elif len(positional) >= 2 and positional[1].name not in params and _is_context(positional[1]):
            ctx_name = positional[1].name
            ctx_mode = "positional"
        accepts = [p.name for p in all_params
                   if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in (first, ctx_name)]
        required = [p.name for p in all_params
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)
                    and p.default is p.empty and p.name not in (first, ctx_name)]
        try:
            _check_names(params, accepts, required, open_ended=has_var_kw)
        except GateConfigError as exc:
            if "missing required" not in str(exc):
                raise
            raise GateConfigError(f"{exc} of {ref}; give it as a key of the gate (the step context goes only to a "
                                  "parameter named ctx)") from None
        return kind(fn=fn, params=params, ref=ref, ctx_mode=ctx_mode)

    def call(self, output: Any, ctx: StepContext) -> Any:
        """The function's own answer: the output first, ``ctx`` where declared, the params as keywords."""
        if self.ctx_mode == "positional":
            return self.fn(output, ctx, **self.params)
        if self.ctx_mode == "keyword":
            return self.fn(output, ctx=ctx, **self.params)
        return self.fn(output, **self.params)

    def check(self, output: Any, ctx: StepContext) -> GateResult:
        return normalize(self.call(output, ctx), self.ref)


@dataclasses.dataclass(frozen=True)
class AsyncFunctionGate(FunctionGate):
    """An ``async def`` function used as a gate: the same rule for its parameters, its check awaited on
    the event loop (so it may ``await ctx.llm.acomplete(...)``)."""

    async def check(self, output: Any, ctx: StepContext) -> GateResult:  # type: ignore[override]
        return normalize(await self.call(output, ctx), self.ref)


def _is_context(parameter: inspect.Parameter) -> bool:
    """Whether a gate function's second parameter is declared to receive the step context (annotated
    ``StepContext``); any other name is a gate parameter that YAML must give (or that has a default)."""
    annotation = parameter.annotation
    return annotation is StepContext or (isinstance(annotation, str) and annotation.split(".")[-1] == "StepContext")


def _where(spec: GateSpec, step_id: str) -> str:
    if spec.name and spec.name != spec.gate:
        return f"step '{step_id}' gate '{spec.name}' ({spec.gate})"
    return f"step '{step_id}' gate '{spec.gate}'"


def build_gate(spec: GateSpec, *, step_id: str, base_dir: str | Path | None) -> object:
    """Build the gate object for one ``GateSpec`` of step ``step_id``.

    - a built-in name (``min_items``): the registered class, constructed from ``spec.params``.
    - ``module:callable``: resolved next to the workflow (``base_dir``) first; a class is
      instantiated with the params, a function is wrapped as ``fn(output, ctx?, **params)``.

    Raises:
        GateConfigError: naming the step and gate, for an unknown gate, unknown, missing or
            mistyped parameters, an unresolvable reference, or a gate that rejects its params.
    """
    where = _where(spec, step_id)
    name = spec.gate
    try:
        if name in BUILTIN_GATES:
            return construct_gate(BUILTIN_GATES[name], spec.params, base_dir=base_dir)
        if ":" not in name:
            valid = sorted(BUILTIN_GATES)
            raise GateConfigError(
                f"unknown gate{_did_you_mean(name, valid)}; built-in gates: {', '.join(valid)}; "
                "or give 'module:callable' for a custom gate"
            )
        try:
            obj = resolve_callable(name, base_dir)
        except ResolveError as exc:
            raise GateConfigError(str(exc)) from None
        if inspect.isclass(obj):
            return construct_gate(obj, spec.params, base_dir=base_dir, typed=False)
        return FunctionGate.wrap(obj, spec.params, ref=name)
    except GateConfigError as exc:
        raise GateConfigError(f"{where}: {exc}") from None
