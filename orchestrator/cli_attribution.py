"""CLI commands over outcomes and attribution: label, trace, attribute, replay, stats, report.

Registered on the main app by importing this module (cli.py does so at the end).
"""

from __future__ import annotations
