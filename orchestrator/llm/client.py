"""``ctx.llm``: the model client step and gate code gets, so its calls are counted like any other.

A Python step or a custom gate that calls a model through its own SDK leaves no trace in the
run: no tokens, no cost, no span. Through this client every call lands in the attempt's
:class:`~orchestrator.spec.context.CallLog` (charged to the step, or to the gate being checked) and
is stored with the attempt's record. The workflow's ``llm:`` block is the default config; any
key may be overridden per call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.spec.context import CallLog
from orchestrator.spec.llm_config import LLMConfig, merge
from orchestrator.spec.llm_errors import LLMError

_VERBATIM = "{{ text }}"
_VERBATIM_SYSTEM = "{{ system_text }}"
"""The templates of a client call: the caller's text is sent as it is, never parsed as Jinja."""


class LLMClient:
    """Ask the model from step or gate code: ``await ctx.llm.acomplete("...")`` (or ``ctx.llm.complete``
    from a sync function running off the event loop). Returns the answer text, or with
    ``output_schema`` the validated JSON value (re-asked on a mismatch, like an LLM step)."""

    __slots__ = ("config", "log")

    def __init__(self, config: LLMConfig | None, log: CallLog) -> None:
        self.config = config if config is not None else LLMConfig()
        self.log = log

    async def acomplete(self, prompt: str, *, system: str | None = None, output_schema: Any | None = None,
                        validation_retries: int = 2, **overrides: Any) -> Any:
        from orchestrator.llm.call import run_llm

        config = merge(self.config, overrides) if overrides else self.config
        outcome = await run_llm(config=config, prompt=_VERBATIM, variables={"text": prompt, "system_text": system},
                                system=None if system is None else _VERBATIM_SYSTEM, output_schema=output_schema,
                                validation_retries=validation_retries, inject_needs=False, log=self.log)
        return outcome.output

    def complete(self, prompt: str, **options: Any) -> Any:
        """The blocking form, for sync steps and gates (they run off the event loop's thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.acomplete(prompt, **options))
        raise LLMError("ctx.llm.complete() was called on the event loop: use `await ctx.llm.acomplete(...)` "
                       "in an async step or gate")
