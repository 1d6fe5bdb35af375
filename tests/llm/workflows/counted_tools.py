"""Step code of counted.yaml that asks the model through ``ctx.llm``: a sync step twice, an async step once."""

from __future__ import annotations

from typing import Any


def notes(draft: str, ctx: Any) -> list[str]:
    return [ctx.llm.complete(f"Summarise: {draft}"), ctx.llm.complete("List the {facts}.", system="Be brief.")]


async def final(draft: str, verdict: dict, ctx: Any) -> str:
    return await ctx.llm.acomplete(f"Polish: {draft}")
