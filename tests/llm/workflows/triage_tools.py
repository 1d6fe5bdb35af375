"""Helpers of the LLM triage test workflow: an output model, a tool and a post-processor."""

from __future__ import annotations

from pydantic import BaseModel


class Category(BaseModel):
    category: str
    confidence: float


def lookup_order(order_id: str) -> dict:
    """Look up an order by its id; returns its status."""
    return {"order_id": order_id, "status": "shipped"}


def sign(reply: str, category: str, ticket: str) -> str:
    return f"{reply} -- support ({category})"
