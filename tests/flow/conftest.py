"""Fixtures of the control-flow specifications: the workflows under tests/fixtures/flow and a step log."""

from __future__ import annotations

from pathlib import Path

FLOW = Path(__file__).parent.parent / "fixtures" / "flow"


def executions(log: Path) -> list[str]:
    """The units executed, one per call, in the order they ran (from $STEP_LOG, written by the steps)."""
    return [line.split()[0] for line in log.read_text().splitlines() if line.strip()]


def keys(log: Path) -> dict[str, set[str]]:
    """Each unit's idempotency keys, as the steps saw them."""
    found: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        if line.strip():
            unit, key = line.split()
            found.setdefault(unit, set()).add(key)
    return found
