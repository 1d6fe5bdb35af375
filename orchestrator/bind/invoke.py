"""Calling a step's function: the one place that knows how.

A step function receives its inputs as keyword arguments, plus ``ctx`` when it declares a
parameter of that name (the only rule). Coroutine functions are awaited on the event loop;
plain functions run on a daemon worker thread (:mod:`orchestrator.bind.threads`) so a slow one
cannot stall its siblings (unless the step says ``inline: true``: then it is called on the loop's
thread, trading that protection for the hand-off's cost), and an awaitable they return is awaited too. A step with
``isolation: process`` runs in a child process instead (:mod:`orchestrator.bind.isolation`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bind.threads import POOL, CallHistory
from orchestrator.spec.context import StepContext


@dataclass(frozen=True, slots=True)
class StepFunction:
    """A callable with what calling it needs to know, inspected once when a workflow is bound."""

    fn: Callable[..., Any]
    takes_ctx: bool
    is_async: bool
    isolated_ref: str | None = None
    """``module:function`` to run in a child process (``isolation: process``), else None."""
    base_dir: str | None = None
    inline: bool = False
    """``inline: true``: a plain function called on the event loop's thread, with no thread hand-off."""
    loop_parameters: tuple[str, ...] = ()
    """On a ``repeat:`` step, the parameters named ``previous`` or ``iteration`` that no input gives: the
    function is given the previous iteration's output and the iteration's number under those names, as an
    LLM step's templates are."""
    history: CallHistory = field(default_factory=CallHistory, compare=False, repr=False)
    """How quick its last call on a worker thread was (whether the next one is waited for on a lock)."""

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> StepFunction:
        try:
            takes_ctx = "ctx" in inspect.signature(fn).parameters
        except (TypeError, ValueError):  # builtins without a signature take no ctx
            takes_ctx = False
        return cls(fn, takes_ctx, inspect.iscoroutinefunction(fn))


async def call_step(function: StepFunction, kwargs: dict[str, Any], ctx: StepContext | None, *,
                    alone: bool = False) -> Any:
    """Call a step function with its inputs (and ``ctx`` if it takes one); returns its output.
    ``ctx`` may be None only for a function that takes none and runs in this process.

    ``alone``: nothing else of the run is in flight, so a quick sync step's result may be waited
    for on a lock rather than through the loop (:mod:`orchestrator.bind.threads`)."""
    if function.isolated_ref is not None:
        from orchestrator.bind.isolation import call_isolated

        if ctx is None:
            raise ValueError("a step isolated in a child process is sent its context")
        return await call_isolated(function.isolated_ref, function.base_dir, kwargs, ctx, function.takes_ctx)
    fn = function.fn
    call_kwargs = {**kwargs, "ctx": ctx} if function.takes_ctx else kwargs
    if function.is_async:
        return await fn(**call_kwargs)
    if function.inline:
        result = fn(**call_kwargs)
    else:
        result = await POOL.run(lambda: fn(**call_kwargs), history=function.history if alone else None)
    if inspect.isawaitable(result):
        result = await result
    return result
