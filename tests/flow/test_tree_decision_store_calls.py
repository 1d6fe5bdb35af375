"""Deciding one pause of a tree costs the same store calls beside 20 paused child runs as beside 200: the
decision, the continuation of the tree from its root (the other children stay paused without being executed
again), and the run shown after it read the paused children a level of the tree at a time, never child by
child. Counted by a store that counts every call of the Store interface."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from orchestrator.api import Orchestrator
from orchestrator.store import Store
from orchestrator.store.delegating import FORWARDED, DelegatingStore, concrete
from tests.flow.conftest import FLOW, executions


class CountingStore(DelegatingStore):
    """Every call of the Store interface, counted by method, then handed to the store underneath."""

    def __init__(self, store: Store) -> None:
        self.url = store.url
        self.store = store
        self.calls: Counter[str] = Counter()

    def target(self) -> Store:
        return self.store

    def close(self) -> None:
        self.store.close()


def _counted(name: str) -> Any:
    def call(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        return getattr(self.store, name)(*args, **kwargs)
    return call


for _name in FORWARDED - {"close"}:
    setattr(CountingStore, _name, _counted(_name))


def approve_one_of(children: int, tmp_path: Path, step_log: Path) -> Counter[str]:
    """The store calls of approving one child's pause in a map of ``children`` paused child runs."""
    with Orchestrator(f"sqlite:///{tmp_path / f'tree{children}.db'}") as orc:
        paused = orc.run(FLOW / "tree_map.yaml", {"count": children, "unclear": list(range(children))})
        assert len(paused.paused_steps) == children
        counting = orc.store = concrete(CountingStore)(orc.store)
        after = orc.approve(paused.run_id, step="per_ticket[3] > classify")
        assert after.status == "paused"
        assert sorted(after.paused_steps) == sorted(f"per_ticket[{i}] > classify" for i in range(children) if i != 3)
        return counting.calls


def test_one_decision_in_a_tree_costs_the_same_store_calls_beside_20_or_200_paused_children(
        tmp_path: Path, step_log: Path) -> None:
    few = approve_one_of(20, tmp_path, step_log)
    assert Counter(executions(step_log)) == Counter({"tree-map.tickets": 1, "tree-triage.classify": 20,
                                                     "tree-triage.answer": 1})
    step_log.write_text("")
    many = approve_one_of(200, tmp_path, step_log)
    assert Counter(executions(step_log)) == Counter({"tree-map.tickets": 1, "tree-triage.classify": 200,
                                                     "tree-triage.answer": 1})
    assert many == few
