"""Resuming a map of child runs whose store calls leave the event loop (the async API, a worker on
PostgreSQL) continues each item's child run: no completed child step runs again, however slowly the
store answers and however many items look their child up at once.

Executions are counted from the step log the steps append to, never from the store's records.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest

from orchestrator.api import Orchestrator
from orchestrator.spec.records import RunView
from orchestrator.store import Store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.flow.conftest import FLOW, executions

ITEMS = 6


class SlowReads(DelegatingStore):
    """A store whose listing of a run's children takes a while, as a busy database's would: while one
    caller waits for it, others ask too."""

    def __init__(self, store: Store, delay: float) -> None:
        self.url = store.url
        self.store = store
        self.delay = delay

    def target(self) -> Store:
        return self.store

    def child_runs(self, run_id: str) -> list[RunView]:
        time.sleep(self.delay)
        return self.store.child_runs(run_id)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def map_workflow(tmp_path: Path) -> Path:
    """tree_map.yaml with every item's child run started at once (beside its child workflow and steps)."""
    for name in ("tree_triage.yaml", "tree_steps.py"):
        shutil.copy(FLOW / name, tmp_path / name)
    path = tmp_path / "tree_map.yaml"
    path.write_text((FLOW / "tree_map.yaml").read_text().replace("max_parallel: 2", f"max_parallel: {ITEMS}"))
    return path


def test_an_async_resume_of_a_map_of_children_runs_no_completed_child_step_again(
        durable_url: str, step_log: Path, map_workflow: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL_STEP", "tree-triage.answer")  # every child stops after its first step
    with Orchestrator(durable_url) as orch:
        first = orch.run(map_workflow, {"count": ITEMS, "unclear": []})
        assert first.status == "failed"
        assert Counter(executions(step_log))["tree-triage.classify"] == ITEMS
        monkeypatch.delenv("FAIL_STEP")
        orch.store = concrete(SlowReads)(orch.store, 0.05)

        async def resume() -> str:
            return (await orch.aresume(first.run_id)).status

        assert anyio.run(resume) == "succeeded"
        children = orch.store.child_runs(first.run_id)
    ran = Counter(executions(step_log))
    assert ran["tree-triage.classify"] == ITEMS, "a completed child step ran again"
    assert ran["tree-triage.answer"] == 2 * ITEMS  # the failed attempt, then the resumed one
    assert ran["tree-map.tickets"] == 1 and ran["tree-map.combine"] == 1
    assert sorted(c.status for c in children) == ["succeeded"] * ITEMS
