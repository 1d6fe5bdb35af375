"""One scenario, many ways: a run is SIGKILLed in the middle, then continued, and no step that had completed
runs again, whatever the run's shape (plain steps, a map, a map of child runs, a loop), whoever continues it
(``orchestrator resume``, the sync or the async Python API, a worker), the database (SQLite, PostgreSQL), where
the store calls are made (on the event loop or off it) and how fast the store answers.

Executions are counted from the side-effect file every step appends ``UNIT KEY`` to (the unit and the
attempt's idempotency key), never from the store's records; the store only says which units had completed
when the process died.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from orchestrator.api import Orchestrator
from orchestrator.engine.attempt import idempotency_key
from orchestrator.spec.records import RunView, StepRecordView
from orchestrator.store import Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.conftest import REPO
from tests.flow.conftest import FLOW

PLAIN = """name: plain
inputs:
  topic: {type: string, default: Solar Panels}
steps:
  - {id: plan, run: tree_steps:plan, inputs: {topic: $inputs.topic}}
  - {id: retrieve, run: tree_steps:retrieve, inputs: {topic: plan, count: 3}}
  - {id: summarize, run: tree_steps:summarize, inputs: {found: retrieve}}
  - {id: write, run: tree_steps:write, inputs: {research: summarize}}
"""


@dataclass(frozen=True)
class Shape:
    """A workflow under tests/fixtures/flow (or PLAIN), the inputs that make it succeed, the variable that
    makes each of its steps slow enough to be killed in the middle, and how many units (child runs' included)
    complete before the kill: for the map of children, enough that several children are under way."""

    name: str
    file: str
    inputs: dict
    slow: str
    kill_after: int = 2


SHAPES = {
    "plain": Shape("plain", "plain.yaml", {}, "STEP_SLEEP"),
    "map": Shape("map", "map_slow.yaml", {"count": 6}, "ITEM_SLEEP", kill_after=3),
    "children": Shape("children", "tree_map_wide.yaml", {"count": 4, "unclear": []}, "STEP_SLEEP", kill_after=5),
    "loop": Shape("loop", "loop_slow.yaml", {}, "ITEM_SLEEP"),
}

CASES = [  # (shape, who continues it, backend): a few of the combinations, each way of continuing on each shape once
    ("plain", "cli", "sqlite"),
    ("map", "sync-api", "sqlite"),
    ("children", "async-api", "sqlite"),
    ("loop", "worker", "sqlite"),
    ("children", "worker", "postgresql"),
    ("map", "async-api", "postgresql"),
    ("loop", "cli", "postgresql"),
    ("children", "async-api-slow-reads", "sqlite"),
]


class SlowReads(DelegatingStore):
    """The store, its reads of runs and records taking a while, as a busy database's do."""

    DELAY = 0.02

    def __init__(self, store: Store) -> None:
        self.url = store.url
        self.store = store

    def target(self) -> Store:
        return self.store

    def get_run(self, run_id: str) -> RunView:
        time.sleep(self.DELAY)
        return self.store.get_run(run_id)

    def child_runs(self, run_id: str) -> list[RunView]:
        time.sleep(self.DELAY)
        return self.store.child_runs(run_id)

    def step_records(self, run_id: str, *args: object, **kwargs: object) -> list[StepRecordView]:
        time.sleep(self.DELAY)
        return self.store.step_records(run_id, *args, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        self.store.close()


def completed_keys(store: Store, run_id: str) -> set[str]:
    """The idempotency keys of the units of the run (and of its child runs) whose record completed."""
    found = {idempotency_key(run_id, r.unit) for r in store.step_records(run_id)
             if r.status in ("succeeded", "gate_failed") and r.origin == "executed"}
    for child in store.child_runs(run_id):
        found |= completed_keys(store, child.run_id)
    return found


def logged(log: Path) -> list[tuple[str, str]]:
    """(unit, idempotency key) of each execution, in order."""
    return [(unit, key) for unit, key in (line.split() for line in log.read_text().splitlines() if line.strip())]


def clean_executions(workdir: Path, shape: Shape, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each unit runs in an execution of ``shape`` that nobody interrupts."""
    log = tmp_path / "clean.log"
    log.touch()
    with monkeypatch.context() as patch:
        patch.setenv("STEP_LOG", str(log))
        with Orchestrator(f"sqlite:///{tmp_path / 'clean.db'}") as orch:
            assert orch.run(workdir / shape.file, shape.inputs).status == "succeeded"
    return Counter(unit for unit, _ in logged(log))


def start_and_kill(workdir: Path, url: str, shape: Shape, env: dict[str, str]) -> str:
    """Run ``shape`` in a process of its own, its steps slow; SIGKILL it once ``shape.kill_after`` units completed."""
    inputs = workdir / "inputs.json"
    inputs.write_text(json.dumps(shape.inputs))
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(workdir / shape.file), "--db", url,
                             "--input-file", str(inputs)], env={**env, shape.slow: "0.3"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = open_store(url)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = store.list_runs()
            if runs and len(completed_keys(store, runs[-1].run_id)) >= shape.kill_after:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        [run] = store.list_runs()
        assert store.get_run(run.run_id).status in ("running", "interrupted"), "the kill must land before the end"
        return run.run_id
    finally:
        store.close()


def continue_run(who: str, url: str, run_id: str, env: dict[str, str]) -> str:
    """Continue the killed run as ``who`` does; its status once continued."""
    if who in ("cli", "worker"):
        args = ["resume", run_id] if who == "cli" else ["worker", "--once"]
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *args, "--db", url], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        with Orchestrator(url) as orch:
            return orch.get_run(run_id).status
    with Orchestrator(url) as orch:
        if who == "sync-api":
            return orch.resume(run_id).status
        if who == "async-api-slow-reads":
            orch.store = concrete(SlowReads)(orch.store)

        async def resume() -> str:
            return (await orch.aresume(run_id)).status

        return anyio.run(resume)


@pytest.mark.parametrize(("shape", "who", "backend"), CASES, ids=["-".join(case) for case in CASES])
def test_a_killed_run_continued_runs_no_completed_step_again(shape: str, who: str, backend: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    workdir = tmp_path / "workflows"
    shutil.copytree(FLOW, workdir, ignore=shutil.ignore_patterns("__pycache__"))
    (workdir / "plain.yaml").write_text(PLAIN)
    # every item's child run at once: a kill after each child's first step leaves them all to continue together
    (workdir / "tree_map_wide.yaml").write_text((FLOW / "tree_map.yaml").read_text().replace("max_parallel: 2",
                                                                                              "max_parallel: 4"))
    log = tmp_path / "steps.log"
    log.touch()
    for name, value in {"STEP_LOG": str(log), "ORCHESTRATOR_LEASE_SECONDS": "2"}.items():
        monkeypatch.setenv(name, value)  # the in-process faces' steps log here too
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    spec = SHAPES[shape]

    expected = clean_executions(workdir, spec, tmp_path, monkeypatch)

    run_id = start_and_kill(workdir, url, spec, env)
    store = open_store(url)
    completed = completed_keys(store, run_id)
    store.close()
    before = logged(log)
    unit_of = dict((key, unit) for unit, key in before)

    assert continue_run(who, url, run_id, env) == "succeeded"
    again = logged(log)[len(before):]
    assert not completed & {key for _, key in again}, "a completed unit ran again under its own key"
    # and under no other key (a second child run of the same item, say): what ran is exactly what was left
    # (a unit that runs no code of its own, such as a child run's step in its parent, logs nothing)
    assert Counter(unit for unit, _ in again) == expected - Counter(unit_of[k] for k in completed if k in unit_of)
