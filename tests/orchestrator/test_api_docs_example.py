"""The "Python API" example of docs/python.md runs as written, against the procurement workflow it names."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def documented_example() -> str:
    text = (REPO / "docs" / "python.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Python API section has no python code block"
    return match.group(1)


def test_the_documented_python_api_example_runs(tmp_path: Path):
    shutil.copytree(REPO / "workflows" / "procurement", tmp_path / "workflows" / "procurement")
    (tmp_path / "example.py").write_text(documented_example())
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "paused ['retrieve_candidates']"
    assert lines[2] == "succeeded V-007"
    assert lines[3] == "retrieve_candidates"
    assert lines[4].startswith("retrieve_candidates ")
    assert lines[5].startswith("1 [")
    assert (tmp_path / ".orchestrator" / "notebook.db").exists()
