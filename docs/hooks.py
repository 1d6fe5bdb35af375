"""MkDocs hook: a `\\|` inside a code span of a table row shows as `|` on the site, as it does on GitHub.

GitHub's tables need the pipe in `trace\\|counterfactual` escaped even inside backticks; Python-Markdown's
tables already leave pipes inside code spans alone and would print the backslash.
"""

from __future__ import annotations

import re
from typing import Any

CODE_SPAN = re.compile(r"`[^`]*`")


def unescape_pipes_in_code(line: str) -> str:
    """The row with `\\|` turned into `|` inside its code spans, and nothing else touched."""
    return CODE_SPAN.sub(lambda span: span.group(0).replace("\\|", "|"), line)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return "\n".join(unescape_pipes_in_code(line) if line.startswith("|") else line
                     for line in markdown.split("\n"))
