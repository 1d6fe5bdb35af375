"""Support triage with a model: plain Python steps around three LLM calls.

``retrieve`` searches the local knowledge base (kb.json) by word overlap; the LLM steps classify
the ticket and draft a reply from the articles; an LLM critic checks the draft against the
retrieved articles (step N against step N+2); ``finalize`` assembles the answer; ``score`` is the
outcome evaluator. Runs offline on the embedded model (``llm: {provider: local}``) and on any
OpenAI-compatible endpoint by changing the workflow's ``llm:`` block.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

KB = Path(__file__).with_name("kb.json")


class Triage(BaseModel):
    """How a ticket is routed."""

    category: Literal["billing", "account", "shipping", "bug", "other"]
    urgent: bool = Field(description="true when the customer lost money or cannot use the product")


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def retrieve(ticket: str, k: int = 2) -> list[dict]:
    """The ``k`` knowledge-base articles sharing the most words with the ticket, best first, with a score."""
    wanted = _words(ticket)
    articles = json.loads(KB.read_text())
    scored = []
    for article in articles:
        overlap = len(wanted & _words(article["title"] + " " + article["text"]))
        scored.append({**article, "score": round(overlap / max(1, len(wanted)), 3)})
    scored.sort(key=lambda a: a["score"], reverse=True)
    return scored[:k]


def finalize(triage: dict, reply: str, articles: list[dict]) -> dict:
    """The answer as the help desk files it, with the advice it was meant to apply."""
    return {"category": triage["category"], "urgent": triage["urgent"], "reply": reply.strip(),
            "sources": [a["id"] for a in articles], "advice": articles[0]["text"] if articles else ""}


def score(output: dict) -> float:
    """The share of the best article's key words the reply uses, doubled and capped at 1.

    A reply that applies the advice repeats its substance ("refunded", "business days"); a
    fluent reply about something else scores near 0, which is what the gates are there to catch.
    """
    advice, reply = _words(output.get("advice", "")), _words(output.get("reply", ""))
    if not advice or not reply:
        return 0.0
    return min(1.0, 2 * len(advice & reply) / len(advice))


def lookup_order(order_id: str) -> dict:
    """Look up an order by its id: its status and the amount charged (a tool an LLM step may call)."""
    return {"order_id": order_id, "status": "shipped", "charges": 2}
