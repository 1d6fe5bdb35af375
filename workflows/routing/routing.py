"""Step functions of the routed support agent: one handler per route, each a lookup in ``policies.json``.

``classify`` (an LLM step) picks the route; exactly one handler runs (its ``when`` holds), the other
two are recorded ``skipped`` with the condition and the category they read; ``reply`` (``join: any``)
gets the handler that ran and ``null`` for the others.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

POLICIES: dict[str, dict[str, str]] = json.loads(Path(__file__).with_name("policies.json").read_text())


def refund_policy(ticket: str) -> dict[str, Any]:
    """The refund route: what the policy promises for a charge to give back."""
    return {"route": "refund", "policy": POLICIES["refund"]["id"], "advice": POLICIES["refund"]["text"],
            "ticket": ticket}


def tech_lookup(ticket: str) -> dict[str, Any]:
    """The technical route: the troubleshooting steps for an error in the app."""
    return {"route": "technical", "policy": POLICIES["technical"]["id"], "advice": POLICIES["technical"]["text"],
            "ticket": ticket}


def general_help(ticket: str) -> dict[str, Any]:
    """Everything else: hand it to a person, with the promised response time."""
    return {"route": "other", "policy": POLICIES["other"]["id"], "advice": POLICIES["other"]["text"],
            "ticket": ticket}


def is_refund(classify: dict[str, Any]) -> bool:
    """The refund route's condition as a function (the Python twin's ``when=``; the YAML writes the same
    test as an expression in the other routes)."""
    return classify.get("category") == "refund"
