"""Python callables as tools the model may call.

A tool is described to the model from what the function already says about itself: its
parameters' type hints become the JSON Schema (through a pydantic model, so the arguments
the model sends are validated and coerced the same way), and the first paragraph of its
docstring the description. A tool that raises does not crash the step: the error goes back
to the model as the tool's answer (and into the record), because the model can often recover
by calling it differently.

A tool that declares a ``ctx`` parameter receives a :class:`ToolContext`, one that declares
``idempotency_key`` the call's key alone; neither is shown to the model. The key names the call (its
step's unit, its place in the tool loop, the model's call id), so it stays the same when a stopped
process resumes and runs that call again: a tool whose effect happened but whose result was lost can
recognise the repeat and not act twice.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from orchestrator.spec.llm_records import ToolTurn

CONTEXT_PARAMETERS = ("ctx", "idempotency_key")
"""Parameters a tool may declare to receive its call's :class:`ToolContext` or its key (never the model's)."""


@dataclass(frozen=True)
class ToolScope:
    """Where a tool loop runs: the run, the step and its unit (``resolve#2``, ``resolve[3]``), and the step's
    own idempotency key, from which each call's key is derived. Empty outside a run."""

    run_id: str = ""
    step_id: str = ""
    unit: str = ""
    step_key: str = ""

    def context(self, tool: str, call_id: str, at: tuple[int, int]) -> ToolContext:
        """The context of one call: ``at`` is the loop's (round, turn) of the model turn that made it."""
        digest = hashlib.sha256(f"{self.step_key}/tool/{at[0]}.{at[1]}/{call_id}".encode()).hexdigest()[:24]
        return ToolContext(run_id=self.run_id, step_id=self.step_id, unit=self.unit, tool=tool, call_id=call_id,
                           idempotency_key=digest)


@dataclass(frozen=True)
class ToolContext:
    """What a tool declaring ``ctx`` receives about the call it is running."""

    run_id: str
    step_id: str
    unit: str
    """The step's unit: ``resolve``, an iteration ``resolve#2``, an instance ``resolve[3]``."""
    tool: str
    call_id: str
    """The id the model gave the call."""
    idempotency_key: str
    """The same for this call whenever it runs (a resume that runs it again, an approval after a stop while
    it ran, an edit of its arguments), and different for every other call: dedupe the tool's effect on it."""


class ToolSpec(BaseModel):
    """A tool as the model sees it, plus the callable and its argument model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    context_parameters: tuple[str, ...] = ()
    """Which of :data:`CONTEXT_PARAMETERS` the function declares: filled in for it, hidden from the model."""

    def schema_for_model(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def _description(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def describe_tool(function: Callable[..., Any]) -> ToolSpec:
    """Build the tool description of ``function`` from its signature and docstring."""
    name = getattr(function, "__name__", type(function).__name__)
    hints = typing.get_type_hints(function)
    fields: dict[str, Any] = {}
    context: list[str] = []
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name in CONTEXT_PARAMETERS:
            context.append(param.name)
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    return ToolSpec(name=name, description=_description(function) or name, parameters=parameters,
                    function=function, arguments_model=model, context_parameters=tuple(context))


def describe_tools(functions: Sequence[Callable[..., Any]]) -> dict[str, ToolSpec]:
    """Tool specs by name; two tools with one name would be ambiguous to the model."""
    specs: dict[str, ToolSpec] = {}
    for function in functions:
        spec = describe_tool(function)
        if spec.name in specs:
            from orchestrator.spec.llm_errors import LLMError

            raise LLMError(f"two tools are named {spec.name!r}")
        specs[spec.name] = spec
    return specs


async def run_tool_call(specs: dict[str, ToolSpec], name: str, arguments: str,
                        context: ToolContext | None = None) -> ToolTurn:
    """Run one tool call (``context``: what a tool declaring ``ctx`` or ``idempotency_key`` receives). Never
    raises for the tool's own failures: they are the turn's ``error``."""
    import anyio.to_thread

    from orchestrator.core.jsonio import dumps

    started = time.perf_counter()
    try:
        parsed: Any = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        parsed = arguments
        return ToolTurn(name=name, arguments=parsed, error=f"arguments are not valid JSON: {exc.msg}",
                        duration=time.perf_counter() - started)
    spec = specs.get(name)
    if spec is None:
        return ToolTurn(name=name, arguments=parsed, error=f"no tool named {name!r} (available: {', '.join(specs)})",
                        duration=time.perf_counter() - started)
    try:
        values = spec.arguments_model.model_validate(parsed)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        return ToolTurn(name=name, arguments=parsed, error=f"invalid arguments: {errors}",
                        duration=time.perf_counter() - started)
    kwargs = {field: getattr(values, field) for field in type(values).model_fields}
    if spec.context_parameters:
        context = context or ToolScope().context(name, "", (0, 0))
        kwargs.update({p: context if p == "ctx" else context.idempotency_key for p in spec.context_parameters})
    try:
        if inspect.iscoroutinefunction(spec.function):
            result = await spec.function(**kwargs)
        else:
            result = await anyio.to_thread.run_sync(partial(spec.function, **kwargs))
        text = dumps(result)
    except Exception as exc:  # the tool's failure is reported to the model, not raised
        return ToolTurn(name=name, arguments=parsed, error=f"{type(exc).__name__}: {exc}",
                        duration=time.perf_counter() - started)
    return ToolTurn(name=name, arguments=parsed, result=text, duration=time.perf_counter() - started)


def tool_message_content(turn: ToolTurn) -> str:
    """What the model reads as the tool's answer."""
    return turn.result if turn.error is None and turn.result is not None else json.dumps({"error": turn.error})
