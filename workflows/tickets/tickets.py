"""Step functions of the ticket-queue example (``tickets.yaml`` maps ``triage.yaml`` over a queue).

``classify`` routes a ticket by the words it contains and says how sure it is: a ticket that names no
known problem gets confidence 0.3, below the gate's 0.6, and waits for a person inside its own child run.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
POLICIES: dict[str, dict[str, str]] = json.loads((HERE.parent / "routing" / "policies.json").read_text())
KEYWORDS = {"refund": ("charged", "refund", "amount", "money"),
            "technical": ("error", "crash", "app", "update", "bug")}


def load_queue(queue: str) -> dict[str, Any]:
    """The tickets of a queue file (a JSON list of strings) next to this module."""
    tickets = json.loads((HERE / queue).read_text())
    return {"tickets": [str(t) for t in tickets]}


def classify(ticket: str) -> dict[str, Any]:
    """The route whose keywords the ticket mentions most; ``other`` with low confidence when it mentions none."""
    words = ticket.lower()
    hits = {route: sum(word in words for word in keys) for route, keys in KEYWORDS.items()}
    route, count = max(hits.items(), key=lambda kv: kv[1])
    if count == 0:
        return {"route": "other", "confidence": 0.3, "why": "no known problem is named"}
    return {"route": route, "confidence": round(min(0.95, 0.6 + 0.15 * count), 2),
            "why": f"mentions {count} {route} word(s)"}


def answer(ticket: str, decision: dict[str, Any]) -> dict[str, Any]:
    """The reply drafted from the route's policy."""
    policy = POLICIES[decision["route"]]
    return {"route": decision["route"], "policy": policy["id"],
            "text": f"Thank you for your message. {policy['text']}", "ticket": ticket}


def report(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """How many tickets went to each route, and the policies applied in ticket order."""
    return {"tickets": len(answers), "by_route": dict(sorted(Counter(a["route"] for a in answers).items())),
            "policies": [a["policy"] for a in answers]}
