"""Step functions of the generated bifurcation workflows (deterministic, no I/O).

Every step reads up to three parents (``p0``..``p2``), takes the largest parent value (so a
corrupted value propagates through merges), adds its own ``delta`` and passes on the lowest
parent quality. The fault parameters are constants in the step's inputs; the ``*_ref``
baselines receive the same inputs and ignore them, i.e. they are what the step should do.
"""

from __future__ import annotations

from typing import Any

CORRUPTION = 1000
CORRUPT, UNHELPFUL, COMPENSATE = 1, 2, 3
"""Fault codes (numbers: a string constant in a step's inputs would name a step)."""


def _base(x: int | None, parents: list[dict[str, Any]]) -> tuple[int, float]:
    if not parents:
        return int(x or 0), 1.0
    return max(p["value"] for p in parents), min(p["quality"] for p in parents)


def step(delta: int, x: int | None = None, p0: dict | None = None, p1: dict | None = None, p2: dict | None = None,
         fault: int = 0, expected: int | None = None) -> dict:
    """``fault``: CORRUPT (a wrong value), UNHELPFUL (the right value, but not what the next step
    needs: quality 0.6) or COMPENSATE (patches a corrupted value by luck, at quality 0.7)."""
    value, quality = _base(x, [p for p in (p0, p1, p2) if p is not None])
    value += delta
    if fault == CORRUPT:
        value += CORRUPTION
    elif fault == UNHELPFUL:
        quality = min(quality, 0.6)
    elif fault == COMPENSATE and value > CORRUPTION // 2:
        value -= CORRUPTION
        quality = min(quality, 0.7)
    out = {"value": value, "quality": quality}
    if expected is not None:
        out["expected"] = expected
    return out


def step_ref(delta: int, x: int | None = None, p0: dict | None = None, p1: dict | None = None,
             p2: dict | None = None, fault: int = 0, expected: int | None = None) -> dict:
    """The reference behaviour: the same computation without any fault."""
    return step(delta, x, p0, p1, p2, 0, expected)


def score(output: dict) -> float:
    """The outcome evaluator: the output's quality when its value is right, else 0."""
    if not isinstance(output, dict) or output.get("value") != output.get("expected"):
        return 0.0
    return float(output.get("quality", 1.0))


def consistent(a: dict[str, Any], b: dict[str, Any], ia: int, ib: int, x: int | None = None,
               u: dict[str, Any] | None = None, iu: int = -1) -> dict[str, Any]:
    """A critic: are the verified steps ``a`` (step ``ia``) and ``b`` (step ``ib``) consistent with the
    output ``u`` of step ``iu`` before them (or the input ``x``)? A fault-free step adds at most 3 to the
    value, so a verified value more than ``3 x distance`` above its reference is inconsistent. The
    verdict names the inconsistent steps in ``details.implicates``."""
    ref = u["value"] if u is not None else int(x or 0)
    bad = [i for i, out in ((ia, a), (ib, b)) if out["value"] - ref > 3 * (i - iu)]
    names = [f"s{i:03d}" for i in bad]
    if not bad:
        return {"passed": True, "score": 1.0, "reason": "verified values follow from their reference"}
    return {"passed": False, "score": 0.0, "details": {"implicates": names},
            "reason": f"{', '.join(names)} jump(s) beyond what the steps since s{iu:03d} can add"}


def deliver(delta: int, x: int | None = None, p0: dict | None = None, p1: dict | None = None,
            p2: dict | None = None, fault: int = 0, expected: int | None = None) -> dict:
    """A side-effecting output step (think: filing the answer): computes like ``step`` and "sends" it.
    Replays must never call it again; they call :func:`deliver_dry_run`."""
    return step(delta, x, p0, p1, p2, fault, expected)


def deliver_dry_run(delta: int, x: int | None = None, p0: dict | None = None, p1: dict | None = None,
                    p2: dict | None = None, fault: int = 0, expected: int | None = None) -> dict:
    """``simulate`` of :func:`deliver`: what it would output, without sending anything."""
    return step(delta, x, p0, p1, p2, fault, expected)
