"""Fixtures of the approval-gated tool tests: the refund tool's side-effect log and the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import side_effect_file
from tests.llm.fake_openai_server import FakeOpenAI

TICKET = "ticket=Order 42 arrived broken, please refund it"


@pytest.fixture
def refund_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the refund tool appends a line per refund it makes (counted from outside the run)."""
    return side_effect_file(tmp_path, monkeypatch, "refunds.log", "REFUND_LOG")


@pytest.fixture
def scripted_model(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAI:
    """The scripted OpenAI-compatible server, as the workflows' endpoint (no API key); a test queues its answers."""
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return fake_openai
