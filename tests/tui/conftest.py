"""Fixtures of the review TUI tests: a seeded store, the app over it, and a way to wait for workers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from orchestrator.store import Store
from tests.tui.seed import Seeded, seed_demo
from tui.app import ReviewApp, make_app

SIZE = (100, 32)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio


@pytest.fixture
def seeded(store: Store) -> Seeded:
    return seed_demo(store)


@pytest.fixture
def app(store: Store, seeded: Seeded) -> ReviewApp:
    return make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)


@pytest.fixture
def notes_factory(monkeypatch: pytest.MonkeyPatch) -> Callable[[ReviewApp], list[str]]:
    """Record every notification an app shows, in order (``run_test`` hides toasts)."""

    def record(app: ReviewApp) -> list[str]:
        seen: list[str] = []
        monkeypatch.setattr(app, "notify", lambda message, **kwargs: seen.append(str(message)))
        return seen

    return record


@pytest.fixture
def notes(app: ReviewApp, notes_factory: Callable[[ReviewApp], list[str]]) -> list[str]:
    return notes_factory(app)
