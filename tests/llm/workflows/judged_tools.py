"""Helpers of judged.yaml and broken_judge.yaml: an async custom gate that asks the model through ``ctx.llm``."""

from __future__ import annotations

from typing import Any

from orchestrator.spec.model import GateResult


def echo(text: str) -> str:
    return text


class AskTheModel:
    """An ``async def`` gate (no ``slow`` flag) that asks the model whether the output is fine."""

    name = "ask_the_model"

    async def check(self, output: Any, ctx: Any) -> GateResult:
        answer = await ctx.llm.acomplete(f"Is {output!r} a fine answer? Say yes or no.")
        return GateResult(answer.strip().lower() == "yes", None, f"the model said {answer!r}")
