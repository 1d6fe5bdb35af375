"""Executing one run: the scheduler, a step's attempts, maps, loops, child runs, the run tree,
the run's state and end, group commit, leases (``leases/``), outcomes, the run's JSON documents.

Beside it on the same floor: :mod:`orchestrator.attribution`. Imports the store, binding, spec and core.
"""
