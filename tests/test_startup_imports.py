"""``orchestrator --help`` and ``orchestrator validate`` must not import Textual, nor ``run`` on SQLite SQLAlchemy.

The TUI is the heaviest dependency; commands that never show it should not pay for it. A run on
SQLite uses the stdlib ``sqlite3`` module, so it should not pay for SQLAlchemy and SQLModel either,
and a plain run none of the modules only some runs use (attribution, review, retries, LLM steps).
Each command runs in a fresh interpreter as ``python -X importtime -m orchestrator ...``, and
the import log on stderr lists every module the command loaded. A correctness test, not a
timed one: it checks which modules are imported, never how long anything takes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO


def imported_modules(*args: str) -> tuple[int, set[str], str]:
    """Run ``python -X importtime -m orchestrator ARGS``; return exit code, imported modules, stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPROFILEIMPORTTIME", "ORCHESTRATOR_DB")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "orchestrator", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    modules = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                modules.add(name)
    return proc.returncode, modules, proc.stdout


def textual_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == "textual" or m.startswith("textual.") or m == "tui"
                  or m.startswith("tui."))


@pytest.mark.parametrize("args", [
    ("--help",),
    ("validate", str(FIXTURES / "ok.yaml")),
], ids=["help", "validate"])
def test_command_does_not_import_textual(args: tuple[str, ...]) -> None:
    code, modules, stdout = imported_modules(*args)
    assert code == 0, stdout
    assert "orchestrator.cli" in modules, "the import log was not captured"
    assert textual_modules(modules) == []


def sql_toolkit_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in ("sqlalchemy", "sqlmodel"))


def test_run_on_sqlite_imports_neither_sqlalchemy_nor_sqlmodel(tmp_path) -> None:
    """A run on an existing SQLite database is all stdlib ``sqlite3``; SQLAlchemy costs ~120 ms to import."""
    db = str(tmp_path / "runs.db")
    args = ("run", str(FIXTURES / "ok.yaml"), "--db", db)
    first, _, stdout = imported_modules(*args)  # a new database: its schema is created (SQLAlchemy may load)
    assert first == 0, stdout
    code, modules, stdout = imported_modules(*args, "--json")
    assert code == 0, stdout
    assert "orchestrator.store.sqlite" in modules, "the import log was not captured"
    assert sql_toolkit_modules(modules) == []
    assert textual_modules(modules) == []


RUN_LOADS_ON_USE = ("orchestrator.attribution", "orchestrator.service.review", "orchestrator.engine.documents",
                    "orchestrator.llm.step", "orchestrator.store.analytics", "orchestrator.store.triage", "tenacity")
"""What a plain run never needs: attribution traces an incorrect outcome, review a pause, documents print
``--json``, ``llm.step`` binds a model step, the analytics and triage rows serve ``stats`` and ``runs``,
tenacity retries a step of more than one attempt."""


def test_a_plain_run_imports_none_of_what_it_does_not_use(tmp_path) -> None:
    """The hello example (gates, no evaluator, no pause, no LLM step, one attempt each) on an existing
    SQLite database loads none of :data:`RUN_LOADS_ON_USE`: each is imported where it is used."""
    args = ("run", str(REPO / "workflows" / "hello" / "hello.yaml"), "--input", "name=Ada",
            "--db", str(tmp_path / "runs.db"))
    first, _, stdout = imported_modules(*args)
    assert first == 0, stdout
    code, modules, stdout = imported_modules(*args)
    assert code == 0, stdout
    assert "orchestrator.service.runner" in modules, "the import log was not captured"
    assert sorted(m for m in modules if any(m == lazy or m.startswith(lazy + ".") for lazy in RUN_LOADS_ON_USE)) == []


def test_the_import_log_would_catch_sqlalchemy(tmp_path) -> None:
    """The check itself works: a command that needs SQLAlchemy's store (PostgreSQL URL parsing) is seen loading it."""
    code, modules, _ = imported_modules("runs", "--db", "nonsense://x")
    assert code == 2
    assert "sqlalchemy" in sql_toolkit_modules(modules)


def test_the_import_log_would_catch_textual() -> None:
    """The check itself works: an interpreter that does import Textual is seen doing so."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import textual.app"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:") and line.count("|") == 2}
    assert "textual.app" in textual_modules(modules)
