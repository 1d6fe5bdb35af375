"""Intent routing with one model step, and a known failure: the tiny model picks the wrong intent.

``clean`` tidies the ticket, ``classify`` asks the model for its intent, ``route`` sends it to the
desk for that intent. ``score`` compares the intent with the run's reference answer, so a run whose
model answer is wrong ends *incorrect*. ``cue_words`` is a plausibility check on the model's
answer: an intent whose usual words appear nowhere in the ticket is suspect. ``intents.yaml``
records it as a warning (so the backward trace blames ``classify``); ``intents_strict.yaml`` makes
it pause the run, which ``gates backtest`` judges on the stored runs before it ships.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from orchestrator.spec.model import GateResult

DESKS = {"refund": "billing", "delivery": "logistics", "login": "accounts", "other": "front desk"}

CUES = {
    "refund": {"refund", "money", "charged", "charge", "return", "back", "paid", "twice"},
    "delivery": {"delivery", "package", "parcel", "arrived", "shipping", "shipped", "courier", "late"},
    "login": {"login", "log", "password", "account", "locked", "sign", "reset", "code"},
}


class Intent(BaseModel):
    """What the customer wants."""

    intent: Literal["refund", "delivery", "login", "other"]


def clean(ticket: str) -> str:
    """The ticket on one line, without surrounding blanks: the prompt stays the same for the same words."""
    return " ".join(ticket.split())


def route(classify: dict[str, Any], ticket: str) -> dict[str, Any]:
    """The ticket with its intent and the desk that handles it."""
    intent = classify["intent"]
    return {"intent": intent, "desk": DESKS[intent], "ticket": ticket}


def cue_words(output: dict[str, Any], ctx: Any) -> GateResult:
    """Passes when the ticket holds one of the usual words of the chosen intent (``other`` always passes).

    A heuristic, not a classifier: it flags an answer that nothing in the ticket supports, and it
    can flag a right answer phrased in unusual words; ``gates backtest`` measures both.
    """
    intent = output.get("intent") if isinstance(output, dict) else None
    if intent not in CUES:
        return GateResult(True, 1.0, f"intent {intent!r} needs no cue")
    words = set(re.findall(r"[a-z]+", str(ctx.inputs.get("ticket", "")).lower()))
    found = sorted(words & CUES[intent])
    if found:
        return GateResult(True, 1.0, f"{intent}: the ticket says {', '.join(found)}")
    return GateResult(False, 0.0, f"nothing in the ticket suggests {intent}")


def score(output: dict[str, Any], reference: Any = None) -> tuple[float, str]:
    """1 when the intent is the reference's, else 0; 0.5 without a reference."""
    if not isinstance(reference, dict) or "intent" not in reference:
        return 0.5, "no reference answer"
    expected = reference["intent"]
    if output.get("intent") == expected:
        return 1.0, f"intent {expected}"
    return 0.0, f"expected {expected}, got {output.get('intent')}"
