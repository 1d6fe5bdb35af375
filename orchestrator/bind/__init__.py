"""From a spec and its source location to something that runs: loading YAML and Python files,
resolving and calling user code (in a thread or a process), evaluators, approval proposals.

Beside it on the same floor: ``gates/``, :mod:`orchestrator.llm` and :mod:`orchestrator.telemetry`.
Imports the spec and the core, never the store.
"""
