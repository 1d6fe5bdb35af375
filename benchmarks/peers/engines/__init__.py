"""Engine adapters: one module per engine, each defining ``make(**options) -> Engine``.

The registry maps the name shown in the tables to (module, options). A module whose peer
package is absent fails to import; the runner reports that engine as "not installed".
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from engines.base import Engine

REGISTRY: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    # name: (module, options for make(), top-level packages whose absence means "not installed")
    "ours (sync steps)": ("ours", {"variant": "sync"}, ("orchestrator",)),
    "ours (async steps)": ("ours", {"variant": "async"}, ("orchestrator",)),
    "ours (inline sync steps)": ("ours", {"variant": "inline sync"}, ("orchestrator",)),
    "raw sqlite3": ("raw_sqlite", {}, ()),
    "LangGraph": ("langgraph_engine", {}, ("langgraph", "aiosqlite")),
    "Burr": ("burr_engine", {}, ("burr", "aiosqlite")),
    "Hamilton": ("hamilton_engine", {}, ("hamilton",)),
    "DBOS": ("dbos_engine", {}, ("dbos",)),
}

REFERENCE = "ours (sync steps)"
"""Ratios are to this engine: every peer's chain steps are plain sync functions too."""


class NotInstalled(Exception):
    """The engine's peer package is not importable in this environment."""


def make(name: str) -> Engine:
    """Import the adapter for ``name`` and build it; :class:`NotInstalled` if its package is missing."""
    module_name, options, packages = REGISTRY[name]
    for package in packages:  # in order, so the engine's own package is named before its helpers
        if importlib.util.find_spec(package) is None:
            raise NotInstalled(f"not installed ({package})")
    try:
        module = importlib.import_module(f"engines.{module_name}")
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root in packages:
            raise NotInstalled(f"not installed ({root})") from exc
        raise
    engine: Engine = module.make(**options)
    return engine
