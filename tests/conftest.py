"""Shared fixtures: a fresh SQLite store per test, the fixture workflows, and a CLI runner."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.store import open_store
from tests.store.conftest import postgres_url  # noqa: F401  (a fixture, shared with the contract suite)

FIXTURES = Path(__file__).parent / "fixtures" / "workflows"
REPO = Path(__file__).parent.parent


PROJECT_PACKAGES = ("orchestrator", "gates", "tui", "tests", "benchmarks")

TERMINAL_SIZE_VARIABLES = ("COLUMNS", "LINES")
"""Set by whatever starts pytest (a pytest-xdist worker inherits ``COLUMNS=80``, a developer's shell may
export its own), and read once by the CLI's consoles when ``orchestrator.cli`` is imported: a size there
would fix the width of every table printed in-process for the rest of the session, whatever a test asks for."""


def pytest_configure(config: pytest.Config) -> None:
    """Tests see the same terminal whoever started them: no inherited size, so each CLI invocation gets the
    width it sets (``cli`` uses 200 columns) and a spawned process the width of a pipe. This runs before any
    test module is imported; the CLI itself is imported lazily below, never by this file at import time."""
    for name in TERMINAL_SIZE_VARIABLES:
        os.environ.pop(name, None)
    restore_ctrl_c()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` starts two workers per core. About half of a worker's time is spent waiting, not computing:
    on a process a test started (a kill, a racing reviewer, a worker), on a lease to lapse, on a database's
    fsync. With one worker per core the 2-core CI machine was busy about half the time (11.7 min of wall
    time for about 12 min of CPU); with two per core it is filled (8 min)."""
    return 2 * (os.cpu_count() or 1)


def restore_ctrl_c() -> None:
    """Ctrl-C works in this process and in every process a test starts, as in a shell.

    A pytest-xdist worker is started with SIGINT ignored (the controller handles Ctrl-C), and an ignored
    signal stays ignored across ``exec``: a Python child started from the worker would then never see the
    SIGINT a test sends it (Ctrl-C on a run, a drain). A handler, unlike an ignore, is reset to the default
    on ``exec``, so installing Python's own here gives every child the terminal's behaviour back."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _workflow_module(module: object) -> bool:
    """A module loaded from a workflow's folder (a fixture, an example, a test's tmp_path): a plain file
    outside any package, in the repository or a temporary directory, not an installed library."""
    name = getattr(module, "__name__", "")
    file = getattr(module, "__file__", None)
    if not file or name.split(".")[0] in PROJECT_PACKAGES:
        return False
    path = Path(file).resolve()
    if path.is_relative_to(Path(sys.prefix).resolve()) or "site-packages" in path.parts:
        return False  # an installed library (the venv may live inside the repository)
    if (path.parent / "__init__.py").exists():
        return False  # part of a package (a test app loaded by path, say), not a workflow folder
    return path.is_relative_to(REPO) or path.is_relative_to(Path(tempfile.gettempdir()).resolve())


@pytest.fixture(autouse=True)
def no_import_leaks():
    """Loading workflows leaves ``sys.path`` as it was and no workflow module in ``sys.modules``."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    added = [p for p in sys.path if p not in path and not (Path(p) / "__init__.py").exists()]
    assert added == [], f"left on sys.path: {added}"  # (a package folder is the snapshot plugin's own)
    leaked = sorted(name for name in set(sys.modules) - modules if _workflow_module(sys.modules[name]))
    assert leaked == [], f"workflow modules left in sys.modules: {leaked}"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'orchestrator.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL on each real backend: a SQLite file, and a fresh PostgreSQL schema
    (skipped with a reason when ``ORCHESTRATOR_TEST_PG_URL`` is unset)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'orchestrator.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def fake_openai():
    """An OpenAI-compatible server on 127.0.0.1 answering from a script (LLM and tracing tests)."""
    from tests.llm.fake_openai_server import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def store(db_url: str):
    s = open_store(db_url)
    yield s
    s.close()


def side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, variable: str) -> Path:
    """An empty file ``name`` that the code under test finds through the environment variable ``variable`` and
    appends to, so a test counts from outside what it did (steps run, refunds made)."""
    path = tmp_path / name
    path.touch()
    monkeypatch.setenv(variable, str(path))
    return path


@pytest.fixture
def step_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each step call appends a line here, so tests can count executions."""
    return side_effect_file(tmp_path, monkeypatch, "steps.log", "STEP_LOG")


def calls(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines() if line.strip()]


def listed_row(table: str, run_id: str) -> str:
    """The line of ``runs`` output that lists ``run_id``: the one starting with the longest prefix of the id,
    of at least 8 characters (the listing shows each run's shortest unique prefix, or ``--full`` its whole
    id; an older, shorter id may begin a newer one, as ``r1234567`` begins ``r12345670...``)."""
    rows = [line for line in table.splitlines() if line.strip() and len(line.split()[0]) >= 8
            and run_id.startswith(line.split()[0])]
    assert rows, f"{run_id} is not listed in:\n{table}"
    return max(rows, key=lambda line: len(line.split()[0]))


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def _cli_on(url: str):
    from orchestrator.cli import app  # not at import time: see pytest_configure

    runner = CliRunner()

    def invoke(*args: str, db: bool = True, columns: int = 200) -> Result:
        argv = list(args) + (["--db", url] if db else [])
        res = runner.invoke(app, argv, env={**os.environ, "COLUMNS": str(columns)})
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return Result(res.exit_code, res.stdout, res.stderr)

    return invoke


@pytest.fixture
def cli(db_url: str):
    """Invoke the CLI in-process with this test's database (on a terminal ``columns`` wide, 200 unless a test
    says otherwise); returns exit code and both streams."""
    return _cli_on(db_url)


@pytest.fixture
def durable_cli(durable_url: str):
    """The CLI in-process on ``durable_url``: a SQLite file, and a PostgreSQL schema."""
    return _cli_on(durable_url)
