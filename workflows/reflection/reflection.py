"""Step functions of the reflection example (``reflection.yaml``, ``reflection_py.py``)."""

from __future__ import annotations

from typing import Any


def one_round(draft: str, critique: dict[str, Any], round: int, pass_score: int) -> dict[str, Any]:
    """What a round hands to the next one (as ``$previous``) and to its parent: the draft, the critic's score
    and feedback with ``passed`` (the score reached ``pass_score``), and the round's number."""
    verdict = {**critique, "passed": int(critique["score"]) >= pass_score}
    return {"draft": draft.strip().strip('"'), "critique": verdict, "round": round}


def publish(final: dict[str, Any]) -> dict[str, Any]:
    """The last round's text, whether the critic passed it, and how many rounds it took."""
    return {"text": final["draft"], "passed": bool(final["critique"]["passed"]), "rounds": final["round"]}
