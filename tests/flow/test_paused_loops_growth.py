"""A map of loops that all pause costs the same per loop whatever the number of loops: each loop finds its own
waiting iteration among the waiting units filed by step and instance, without reading every other loop's. Counted
as unit names parsed (``parse_unit``), per loop, at 20 and at 200 loops."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import orchestrator.engine.looping as looping
import orchestrator.engine.mapping as mapping
import orchestrator.engine.waiting as waiting
from orchestrator.bind.python_workflow import Workflow
from orchestrator.engine.executor import Executor
from orchestrator.spec.records import parse_unit
from orchestrator.store import open_store


async def unsure(item: Any = None, iteration: int | None = None) -> dict[str, Any]:
    return {"confidence": 0.1}


def parses_per_loop(loops: int, monkeypatch: pytest.MonkeyPatch) -> float:
    wf = Workflow("paused-loops", inputs={"items": {"type": "array"}})
    wf.step(id="each", for_each="$inputs.items", inputs={"item": "$item", "iteration": "$iteration"},
            repeat={"until": "iteration >= 3", "max": 3},
            gates=[{"gate": "range", "field": "confidence", "min": 0.5}])(unsure)
    parsed = 0

    def counted(unit: str) -> Any:
        nonlocal parsed
        parsed += 1
        return parse_unit(unit)

    for module in (looping, mapping, waiting):
        if hasattr(module, "parse_unit"):
            monkeypatch.setattr(module, "parse_unit", counted)
    store = open_store("memory://")
    try:
        result = anyio.run(Executor(store, wf.bind()).start, {"items": list(range(loops))})
    finally:
        store.close()
    assert result.status == "paused" and len(result.paused_steps) == loops
    return parsed / loops


def test_a_map_of_paused_loops_parses_as_many_unit_names_per_loop_at_200_loops_as_at_20(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert parses_per_loop(200, monkeypatch) == parses_per_loop(20, monkeypatch)
