"""The README and the pages of docs/ show what works: their commands and code run as written, and every link
between them lands on a page and a heading that exist (``mkdocs build --strict`` checks the pages too, in CI)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.glob("*.md")])
INSTALL_AND_RUN = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                   ".venv/bin/orchestrator run workflows/procurement/procurement.yaml")


def section(page: Path, heading: str) -> str:
    """The text under `heading` (a line such as ``## Quick start``) up to the next heading of its level or above."""
    text = page.read_text()
    level = heading.split(" ", 1)[0]
    assert f"\n{heading}\n" in text, f"{page.name} has no heading {heading!r}"
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", body, re.M)]
    return body[:ends[0]] if ends else body


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs (Python-Markdown's toc) and GitHub make it for these headings."""
    text = re.sub(r"[`*]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_link_lands_on_a_page_and_heading_that_exist(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{page.name}: link {target!r} names no file"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: link {target!r}: {linked.name} has no such heading"


def test_every_page_of_docs_is_in_the_site_navigation() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    assert sorted(re.findall(r": ([\w-]+\.md)$", nav, re.M)) == sorted(p.name for p in DOCS.glob("*.md"))


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    assert code_blocks(section(REPO / "README.md", "## Quick start"), "sh")[-1] == ".venv/bin/pytest\n"
    assert ".venv/bin/pytest\n" in (REPO / ".ci" / "run").read_text().splitlines(keepends=True)


def test_the_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """Install-and-run, the injected fault pausing (exit 3), then show and edit of that run: as the README says."""
    blocks = code_blocks(section(REPO / "README.md", "## Quick start"), "sh")
    assert blocks[0] == INSTALL_AND_RUN + "\n"
    commands = [INSTALL_AND_RUN.rsplit(" && ", 1)[1]] + [line for block in blocks[1:-1] for line in block.splitlines()]
    shutil.copytree(REPO / "workflows" / "procurement", tmp_path / "workflows" / "procurement")
    run_id, outputs = "", list[str]()
    for line in commands:
        command, _, comment = line.partition("#")
        expected = int(m.group(1)) if (m := re.search(r"exit (\d+)", comment)) else 0
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/orchestrator", line
        argv = [sys.executable, "-m", "orchestrator", *(run_id if a == "RUN" else a for a in argv[1:])]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=environment())
        assert done.returncode == expected, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout + done.stderr)
        if not run_id and expected == 3:  # the paused run is the RUN of the commands that follow
            paused = re.search(r"\br[0-9a-f]{24}\b", outputs[-1])
            assert paused, outputs[-1]
            run_id = paused.group(0)
    assert "V-007" in outputs[0]
    assert "retrieve_candidates" in outputs[1] and "retrieve_candidates" in outputs[2]
    assert "succeeded" in outputs[3] and "V-007" in outputs[3]


def test_the_readme_and_the_llm_page_show_the_same_llm_quick_start() -> None:
    readme = code_blocks(section(REPO / "README.md", "## An LLM workflow"), "sh")
    assert readme and readme[0] == code_blocks((DOCS / "llm.md").read_text(), "sh")[0]


def test_the_documented_python_workflow_runs(tmp_path: Path) -> None:
    (example,) = code_blocks(section(DOCS / "python.md", "## Defining a workflow in Python"), "python")[:1]
    (tmp_path / "hello.py").write_text(example)
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", "hello.py", "--input", "name=Ada",
                           "--db", str(tmp_path / "o.db")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=environment())
    assert done.returncode == 0, done.stderr
    assert "HELLO ADA" in done.stdout


def test_the_documented_python_llm_workflow_validates(tmp_path: Path) -> None:
    """The Python form of the LLM keys loads against the support example's model class and tool it imports."""
    (example,) = code_blocks((DOCS / "llm.md").read_text(), "python")[:1]
    shutil.copytree(REPO / "workflows" / "support", tmp_path / "support")
    (tmp_path / "support" / "support_py.py").write_text(example)
    done = subprocess.run([sys.executable, "-m", "orchestrator", "validate", "support_py.py"],
                          cwd=tmp_path / "support", capture_output=True, text=True, timeout=120, env=environment())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 steps, output 'draft'" in done.stdout


def test_the_documented_outcome_evaluator_scores_runs_with_and_without_a_reference(tmp_path: Path) -> None:
    (evaluator,) = code_blocks(section(DOCS / "attribution.md", "## The outcome evaluator"), "python")
    (tmp_path / "scoring.py").write_text(evaluator + "\n\ndef pick(vendor):\n    return {'vendor': vendor}\n")
    (tmp_path / "pick.yaml").write_text("name: pick\ninputs: {vendor: {type: string}}\n"
                                        "steps:\n  - id: pick\n    run: scoring:pick\n"
                                        "    inputs: {vendor: $inputs.vendor}\n"
                                        "outcome: scoring:score\n")
    (tmp_path / "answer.json").write_text('{"vendor": "V-007"}')

    def outcome(*extra: str) -> tuple[float, str]:
        db = f"sqlite:///{tmp_path / 'o.db'}"
        done = subprocess.run([sys.executable, "-m", "orchestrator", "run", "pick.yaml", "--input", "vendor=V-007",
                               "--db", db, "--json", *extra], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, env=environment())
        assert done.returncode == 0, done.stderr
        (scored,) = json.loads(done.stdout)["outcomes"]
        return scored["value"], scored["evaluator_reason"]

    assert outcome() == (0.5, "no reference answer")
    assert outcome("--reference", "answer.json") == (1.0, "expected V-007")
