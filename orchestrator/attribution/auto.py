"""What happens by itself when an outcome is incorrect: a backward trace, stored at once.

Called by the executor when its evaluator scores a run below the workflow's threshold, and by
:func:`orchestrator.service.labels.label_run` for an incorrect human label. Tracing reads only stored
records, so it costs no step execution and works after the workflow's code has changed.
"""

from __future__ import annotations

from orchestrator.attribution.result import AttributionResult
from orchestrator.attribution.trace import trace_run
from orchestrator.spec.model import WorkflowSpec
from orchestrator.store import Store
from orchestrator.store.analytics import PRODUCTION_KINDS


def trace_outcome(store: Store, run_id: str, outcome_id: int, *, spec: WorkflowSpec | None = None) -> \
        AttributionResult | None:
    """Trace and store the attribution of one incorrect outcome; replays and forks are skipped (a child run
    scored by its own evaluator is traced like a run)."""
    if store.get_run(run_id).kind not in PRODUCTION_KINDS:
        return None
    return trace_run(store, run_id, outcome_id=outcome_id, spec=spec)
