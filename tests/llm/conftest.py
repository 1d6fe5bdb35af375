"""Fixtures of the LLM tests: the anyio backend, a fresh provider registry, the fake server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.llm.registry import reset_providers


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real key, endpoint or price file leaks in from the developer's shell."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ORCHESTRATOR_LLM_BASE_URL", "ORCHESTRATOR_LLM_PRICES"):
        monkeypatch.delenv(name, raising=False)
    reset_providers()
    yield
    reset_providers()

