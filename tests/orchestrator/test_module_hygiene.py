"""Step modules are loaded from their files and leave nothing behind: a workflow's folder is not left on
``sys.path``, its modules (and the siblings they import) are not left in ``sys.modules``, so a later
``import tools`` never gets a workflow's ``tools.py``; an edited step module is loaded again, so a
long-lived process (a worker, the review app) runs the new code. ``tests/conftest.py`` checks after every
test that nothing leaked."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import Store

FLOW = """name: {name}
steps:
  - id: tag
    run: hygiene_steps:tag
"""
STEPS = """import tools

def tag() -> str:
    return tools.NAME
"""


def folder(root: Path, name: str, tools_name: str) -> Path:
    """A workflow folder whose step module imports its sibling ``tools.py``."""
    root.mkdir()
    (root / "tools.py").write_text(f"NAME = {tools_name!r}\n")
    (root / "hygiene_steps.py").write_text(STEPS)
    (root / "flow.yaml").write_text(FLOW.format(name=name))
    return root / "flow.yaml"


def test_a_workflow_folder_leaves_nothing_on_the_import_path(store: Store, tmp_path: Path):
    before = importlib.util.find_spec("tools")
    first = folder(tmp_path / "one", "one", "tools of one")
    second = folder(tmp_path / "two", "two", "tools of two")
    assert start_run(store, load_workflow(first), {}).output == "tools of one"
    assert start_run(store, load_workflow(second), {}).output == "tools of two"  # no collision either
    for flow in (first, second):
        assert str(flow.parent) not in sys.path
    assert "hygiene_steps" not in sys.modules and "tools" not in sys.modules
    after = importlib.util.find_spec("tools")  # what an unrelated `import tools` would get now
    assert (after is None) == (before is None)
    assert after is None or not Path(str(after.origin)).is_relative_to(tmp_path)


def test_an_edited_step_module_is_run_by_a_long_lived_process(store: Store, tmp_path: Path):
    flow = folder(tmp_path / "flow", "edited", "before the edit")
    assert start_run(store, load_workflow(flow), {}).output == "before the edit"
    (flow.parent / "tools.py").write_text("NAME = 'after the edit'\n")  # a sibling the step module imports
    assert start_run(store, load_workflow(flow), {}).output == "after the edit"
    (flow.parent / "hygiene_steps.py").write_text("def tag() -> str:\n    return 'rewritten'\n")
    assert start_run(store, load_workflow(flow), {}).output == "rewritten"


def test_an_edited_python_workflow_is_loaded_again(store: Store, tmp_path: Path):
    source = tmp_path / "edited_flow.py"
    text = ("from orchestrator import Workflow\n\nwf = Workflow('edited-py')\n\n\n"
            "@wf.step\ndef answer() -> int:\n    return {}\n")
    source.write_text(text.format(1))
    assert start_run(store, load_workflow(source), {}).output == 1
    source.write_text(text.format(2))
    assert start_run(store, load_workflow(source), {}).output == 2
    assert "edited_flow" not in sys.modules


@pytest.mark.parametrize("attempt", [1, 2])
def test_loading_the_same_fixture_in_two_tests_leaves_no_trace(store: Store, attempt: int):
    """Run twice: the autouse check of tests/conftest.py fails either run if the first left anything."""
    from tests.conftest import FIXTURES

    assert start_run(store, load_workflow(FIXTURES / "ok.yaml"), {}).status == "succeeded"
    assert str(FIXTURES) not in sys.path and "steps" not in sys.modules
