"""What the documentation shows, read by the tests that run it: a test of an example uses the inputs the page
gives, so the page and the test cannot drift apart."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import REPO

LLM_PAGE = REPO / "docs" / "llm.md"


def documented_input(workflow: Path, key: str, page: Path = LLM_PAGE) -> str:
    """The value that the page's command running `workflow` gives to `--input key`."""
    for command in re.findall(r"^\.venv/bin/orchestrator run .*$", page.read_text(), re.M):
        argv = shlex.split(command)
        if Path(argv[2]) == workflow.relative_to(REPO):
            given = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--input")
            return given[key]
    raise AssertionError(f"{page.relative_to(REPO)} shows no command running {workflow.relative_to(REPO)}")
