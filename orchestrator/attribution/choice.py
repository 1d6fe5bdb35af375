"""Which of a run's stored attribution records explains it, for every face that names a blamed step.

A run can hold several attribution records: the automatic backward trace of an incorrect outcome,
a trace after a later label, a counterfactual or Shapley attribution someone asked for. Faces that
show one blamed step (the review screen's header, its trace panel, its step list marker) must
show the same one, so they all ask :func:`explaining_record`.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.spec.records import AttributionView
from orchestrator.store import Store
from orchestrator.store.analytics import attribution_rank


def _rank(view: AttributionView) -> int:
    return attribution_rank(view.method, view.params.get("by") == "agent")


def explaining_record(views: Sequence[AttributionView]) -> AttributionView | None:
    """The most informative stored attribution record of a run, or None without any.

    The rule (:func:`~orchestrator.store.analytics.attribution_rank`, shared with ``stats`` and the
    dashboard, which apply it in SQL): a counterfactual or Shapley (by step) record over difference
    credit or Shapley by agent, over a backward trace; within the same rank the newest record wins,
    so a trace made after a new label replaces the earlier trace.
    """
    if not views:
        return None
    return min(views, key=lambda v: (_rank(v), -v.id))


def explaining_view(store: Store, run_id: str) -> AttributionView:
    """:func:`explaining_record` of the run; when it has none, a backward trace is computed and stored.

    Raises what ``trace_view`` raises for a run with no outcome to explain yet.
    """
    found = explaining_record(store.attributions(run_id))
    if found is not None:
        return found
    from orchestrator.attribution.methods import trace_view

    return trace_view(store, run_id, recompute=True)
