"""Calling a step's function: the one place that knows how.

A step function receives its inputs as keyword arguments, plus ``ctx`` when it declares a
parameter of that name (the only rule). Coroutine functions are awaited on the event loop;
plain functions run in a worker thread so a slow one cannot stall its siblings, and an
awaitable they return is awaited too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from orchestrator.context import StepContext


@dataclass(frozen=True, slots=True)
class StepFunction:
    """A callable with what calling it needs to know, inspected once when a workflow is bound."""

    fn: Callable[..., Any]
    takes_ctx: bool
    is_async: bool

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> StepFunction:
        try:
            takes_ctx = "ctx" in inspect.signature(fn).parameters
        except (TypeError, ValueError):  # builtins without a signature take no ctx
            takes_ctx = False
        return cls(fn, takes_ctx, inspect.iscoroutinefunction(fn))


async def call_step(function: StepFunction, kwargs: dict[str, Any], ctx: StepContext) -> Any:
    """Call a step function with its inputs (and ``ctx`` if it takes one); returns its output."""
    fn = function.fn
    call_kwargs = {**kwargs, "ctx": ctx} if function.takes_ctx else kwargs
    if function.is_async:
        return await fn(**call_kwargs)
    result = await anyio.to_thread.run_sync(lambda: fn(**call_kwargs), abandon_on_cancel=True)
    if inspect.isawaitable(result):
        result = await result
    return result
