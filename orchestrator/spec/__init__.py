"""The workflow as data: the model, its conditions and graph, inputs, records, events, LLM settings.

Pure data and pure functions: no I/O, no user code, no database. Imports only :mod:`orchestrator.core`.
"""
