"""Attribution: which step caused this outcome, and which steps cause most failures over time.

One module per idea; the CLI (``orchestrator/cli_attribution.py``) and the TUI call the same
functions:

============================  =============================================================
``result``                    :class:`AttributionResult` / :class:`Candidate`, ranking, storing
``trace``                     backward trace from recorded signals (pure :func:`backward_trace`)
``cache`` / ``replay``        digests, the step-execution cache, :class:`ReplayEngine` and forks
``counterfactual``            one replay per candidate step, credit = v(actual) - v(replaced)
``shapley`` / ``credit``      pure credit math; Shapley and difference over steps or agents
``methods``                   :func:`attribute`, :func:`trace_view`, :func:`fork_run`
``auto``                      the trace stored at once for an incorrect outcome
``stats`` / ``report``        the step dashboard (:func:`compute_stats`) and the checklist
============================  =============================================================

Credit sign: negative credit is blame, positive credit is help; candidates are ranked most
blamed first. Names below are imported lazily, so importing this package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "AttributionResult": "orchestrator.attribution.result",
    "Candidate": "orchestrator.attribution.result",
    "METHODS": "orchestrator.attribution.result",
    "backward_trace": "orchestrator.attribution.trace",
    "trace_run": "orchestrator.attribution.trace",
    "ReplayEngine": "orchestrator.attribution.replay",
    "Plan": "orchestrator.attribution.replay",
    "Evaluation": "orchestrator.attribution.replay",
    "counterfactual": "orchestrator.attribution.counterfactual",
    "shapley_attribution": "orchestrator.attribution.credit",
    "difference_attribution": "orchestrator.attribution.credit",
    "attribute": "orchestrator.attribution.methods",
    "trace_view": "orchestrator.attribution.methods",
    "latest_attribution": "orchestrator.attribution.methods",
    "fork_run": "orchestrator.attribution.methods",
    "trace_outcome": "orchestrator.attribution.auto",
    "compute_stats": "orchestrator.attribution.stats",
    "build_stats": "orchestrator.attribution.stats",
    "StatsReport": "orchestrator.attribution.stats",
    "build_report": "orchestrator.attribution.report",
    "ChecklistReport": "orchestrator.attribution.report",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'orchestrator.attribution' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
