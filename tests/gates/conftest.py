"""Fixtures for gate tests: a step context and a one-line way to build a gate from YAML-like data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gates import build_gate
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateSpec


def _make_ctx(**upstream: Any) -> StepContext:
    return StepContext(run_id="r", step_id="s", workflow="w", agent="a", step_type="retrieval",
                       upstream=dict(upstream))


@pytest.fixture
def make_ctx() -> Callable[..., StepContext]:
    """A context for step 's' whose earlier steps produced the given outputs, by step id."""
    return _make_ctx


@pytest.fixture
def ctx() -> StepContext:
    return _make_ctx()


@pytest.fixture
def build() -> Callable[..., Any]:
    """Build a gate the way the loader does: from a YAML mapping, for step 'retrieve'."""

    def _build(data: dict[str, Any] | str, *, step_id: str = "retrieve", base_dir: Any = None) -> Any:
        return build_gate(GateSpec.model_validate(data), step_id=step_id, base_dir=base_dir)

    return _build
