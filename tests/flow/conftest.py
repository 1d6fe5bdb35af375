"""Fixtures of the control-flow specifications: the workflows under tests/fixtures/flow and a step log."""

from __future__ import annotations

import os
import time
from pathlib import Path

from orchestrator.store import open_store
from tests.conftest import REPO

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


LEASE = 2.0
"""The lease (seconds) the durability tests' processes take: short, so a killed holder's runs come back soon."""


def durable_env(log: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI process of a durability test: steps log to ``log``, the repository is importable,
    leases last LEASE seconds; ``extra`` adds variables (ITEM_SLEEP, STEP_SLEEP)."""
    return {**os.environ, "STEP_LOG": str(log), "PYTHONPATH": str(REPO), "ORCHESTRATOR_LEASE_SECONDS": str(LEASE),
            **extra}


def wait_interrupted(url: str, run_id: str) -> None:
    """Wait until a killed holder's run shows as interrupted (its lease lapsed), at most a few leases."""
    store = open_store(url)
    deadline = time.time() + 4 * LEASE
    while store.get_run(run_id).status != "interrupted":
        assert time.time() < deadline, "the killed run never showed as interrupted"
        time.sleep(0.05)
