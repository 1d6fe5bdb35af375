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
    """A workflow under tests/fixtures/flow (or PLAIN), the inputs that make it succeed, and the variable that
    makes each of its steps slow enough to be killed in the middle."""

    name: str
    file: str
    inputs: dict
    slow: str


SHAPES = {
    "plain": Shape("plain", "plain.yaml", {}, "STEP_SLEEP"),
    "map": Shape("map", "map_slow.yaml", {"count": 6}, "ITEM_SLEEP"),
    "children": Shape("children", "tree_map.yaml", {"count": 4, "unclear": []}, "STEP_SLEEP"),
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


def logged_keys(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines() if line.strip()]


def start_and_kill(workdir: Path, url: str, shape: Shape, env: dict[str, str]) -> str:
    """Run ``shape`` in a process of its own, its steps slow; SIGKILL it once a few units completed."""
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
            if runs and len(completed_keys(store, runs[-1].run_id)) >= 2:
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
    log = tmp_path / "steps.log"
    log.touch()
    for name, value in {"STEP_LOG": str(log), "ORCHESTRATOR_LEASE_SECONDS": "2"}.items():
        monkeypatch.setenv(name, value)  # the in-process faces' steps log here too
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    spec = SHAPES[shape]

    run_id = start_and_kill(workdir, url, spec, env)
    store = open_store(url)
    completed = completed_keys(store, run_id)
    store.close()
    before = len(logged_keys(log))

    assert continue_run(who, url, run_id, env) == "succeeded"
    again = logged_keys(log)[before:]
    assert not completed & set(again), f"completed units ran again: {sorted(completed & set(again))}"
    assert all(n == 1 for n in Counter(again).values()), Counter(again)
