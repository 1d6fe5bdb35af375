"""``isolation: process``: a step attempt in a child process, so a timeout really stops the code.

A thread cannot be killed; a process can. Each attempt of an isolated step runs in a fresh
``spawn``-context child (no state inherited from the parent, so it works the same on every
platform and after any threads the parent started): the child resolves the step's
``module:function`` next to the workflow, receives its inputs (and ``ctx``) as JSON, and sends
its output back as JSON. On timeout, or when the run is stopped, the child is killed at once and
its side effects stop with it. Starting a child costs roughly 0.1-0.3 s, so isolate the steps
that need it: long, blocking or untrusted code with side effects.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.bind.threads import POOL
from orchestrator.core import jsonio
from orchestrator.spec.context import NextNeed, StepContext
from orchestrator.spec.model import GateResult


class IsolatedStepError(Exception):
    """The child's step raised; carries its exception type name and the traceback the child formatted,
    so the record names the real error and where it happened (the parent's own frames say nothing)."""

    def __init__(self, type_name: str, message: str, child_traceback: str | None = None) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.child_traceback = child_traceback


def _context_json(ctx: StepContext) -> dict[str, Any]:
    return {"run_id": ctx.run_id, "step_id": ctx.step_id, "workflow": ctx.workflow, "agent": ctx.agent,
            "step_type": ctx.step_type, "attempt": ctx.attempt, "idempotency_key": ctx.idempotency_key,
            "next_needs": [n.to_json() for n in ctx.next_needs],
            "gate_feedback": [g.to_json() for g in ctx.gate_feedback], "inputs": ctx.inputs,
            "workflow_inputs": ctx.workflow_inputs}


def _context(data: dict[str, Any]) -> StepContext:
    return StepContext(**{**data, "next_needs": [NextNeed(**n) for n in data["next_needs"]],
                          "gate_feedback": [GateResult(g["passed"], g["score"], g["reason"], g["details"])
                                            for g in data["gate_feedback"]]})


def child_main(ref: str, base_dir: str | None, payload: str, conn: Connection) -> None:
    """The child: resolve, call, send ``("ok", output JSON)`` or ``("error", type, message, traceback)``."""
    from orchestrator.bind.resolve import resolve_callable

    try:
        data = jsonio.loads(payload)
        fn = resolve_callable(ref, base_dir)
        kwargs = dict(data["kwargs"])
        if data["takes_ctx"]:
            kwargs["ctx"] = _context(data["ctx"])
        result = asyncio.run(fn(**kwargs)) if inspect.iscoroutinefunction(fn) else fn(**kwargs)
        conn.send(("ok", jsonio.dumps(result)))
    except BaseException as exc:  # every failure of the step is reported to the parent as a value
        conn.send(("error", type(exc).__name__, _message(exc), "".join(traceback.format_exception(exc))))
    finally:
        conn.close()


async def call_isolated(ref: str, base_dir: str | None, kwargs: dict[str, Any], ctx: StepContext,
                        takes_ctx: bool) -> Any:
    """Run one attempt in a child process; killing it when this task is cancelled (a timeout)."""
    payload = jsonio.dumps({"kwargs": kwargs, "takes_ctx": takes_ctx, "ctx": _context_json(ctx)})
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=child_main, args=(ref, base_dir, payload, child), daemon=True)
    process.start()
    child.close()
    try:
        message = await POOL.run(parent.recv)
    except EOFError:
        process.join(timeout=5)  # its exit code is known only once it is reaped
        raise IsolatedStepError("ChildDied", f"the step's process {_death(process.exitcode)} before it answered"
                                ) from None
    finally:
        if process.is_alive():
            process.kill()  # a timeout or a stop: the code itself stops here
        process.join(timeout=5)
        parent.close()
    if message[0] == "ok":
        return jsonio.loads(message[1])
    raise IsolatedStepError(message[1], message[2], message[3] if len(message) > 3 else None)


def _death(exitcode: int | None) -> str:
    """How a child that never answered ended: by a signal (SIGKILL is what the kernel's OOM killer sends)
    or with an exit code."""
    if exitcode is None:
        return "did not end"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}" + (" (out of memory?)" if -exitcode == signal.SIGKILL else "")
    return f"exited with code {exitcode}"


def _message(exc: BaseException) -> str:
    """The child's error message (see :func:`out_of_memory_text` for a MemoryError)."""
    if not isinstance(exc, MemoryError):
        return str(exc)
    return out_of_memory_text(exc)


def out_of_memory_text(exc: MemoryError, where: str = "") -> str:
    """What a MemoryError says, since its own message is most often empty: that memory ran out (``where``:
    in which process, when it says more than the step's own), its own message if any, and the address-space
    limit when one is set (``resource.setrlimit(RLIMIT_AS)``, ``ulimit -v``)."""
    detail = str(exc)
    text = "out of memory" + (f" {where}" if where else "") + (f" ({detail})" if detail else "")
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return text
    if limit == resource.RLIM_INFINITY:
        return text
    return f"{text}: the process's address space is limited to {limit / 2**20:.0f} MiB (RLIMIT_AS)"
