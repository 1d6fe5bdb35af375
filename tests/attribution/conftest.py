"""Fixtures of the attribution tests: workflows with a known faulty step, run in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.engine.executor import RunResult
from orchestrator.service.runner import start_run
from orchestrator.store import Store

FIX = Path(__file__).parent / "fixtures"


def snapshot(store: Store, run_id: str) -> dict[str, Any]:
    """Everything stored about one run except attribution records, to prove it is never modified."""
    run = store.get_run(run_id)
    return {"run": (run.status, run.output, run.error, run.updated_at),
            "records": [r.to_json() for r in store.step_records(run_id)],
            "reviews": [r.to_json() for r in store.reviews(run_id)],
            "outcomes": [o.to_json() for o in store.outcomes(run_id)]}


@pytest.fixture
def run_wf(store: Store, step_log: Path) -> Callable[..., RunResult]:
    """Run a fixture workflow by name with the given inputs; steps log their calls to step_log."""
    def run(name: str, **inputs: Any) -> RunResult:
        return start_run(store, load_workflow(FIX / f"{name}.yaml"), inputs)
    return run
