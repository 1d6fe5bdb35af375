"""The floor: the exception tree and exit codes, JSON in and out, reading a user's files.

Imports nothing of the project's. Internal: import from :mod:`orchestrator` what it exports.
"""
