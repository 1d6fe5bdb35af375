"""One scenario, many ways: a run is SIGKILLed in the middle, then continued, and no step that had completed
runs again, whatever the run's shape (plain steps, a map, a child run, a map of child runs, a loop, a loop of
child runs, an LLM step whose tool needs approval), whoever continues it (``orchestrator resume``, the sync or
the async Python API, a worker), the database (SQLite, PostgreSQL), where the store calls are made (on the event
loop or off it) and how fast the store answers.

Executions are counted from the side-effect files every step appends ``UNIT KEY`` to (the unit and the
attempt's idempotency key) and the approval-gated refund tool appends a line to, and from the requests the
scripted model server received, never from the store's records; the store only says which units had completed
when the process died. CASES is a covering set, not the whole product: every shape, every way of continuing on
both databases, store calls on and off the loop, and slowed reads each appear at least once.
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
from orchestrator.service.runner import claim, continue_run_async
from orchestrator.spec.records import RunView, StepRecordView
from orchestrator.store import Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.conftest import REPO
from tests.flow.conftest import FLOW
from tests.llm.fake_openai_server import FakeOpenAI, completion, tool_call

PLAIN = """name: plain
inputs:
  topic: {type: string, default: Solar Panels}
steps:
  - {id: plan, run: tree_steps:plan, inputs: {topic: $inputs.topic}}
  - {id: retrieve, run: tree_steps:retrieve, inputs: {topic: plan, count: 3}}
  - {id: summarize, run: tree_steps:summarize, inputs: {found: retrieve}}
  - {id: write, run: tree_steps:write, inputs: {research: summarize}}
"""


TOOL = """name: tool-gated
inputs:
  ticket: {type: string, default: Order 42 arrived broken}
llm: {provider: openai, model: gpt-4o-mini, temperature: 0}
steps:
  - {id: plan, run: tree_steps:plan, inputs: {topic: $inputs.ticket}}
  - id: resolve
    type: llm
    inputs: {ticket: plan}
    system: "You resolve support tickets with the tools you have."
    prompt: "Ticket: {{ ticket }}"
    tools: [support_tools:lookup_order, {ref: support_tools:refund, approve: true}]
  - {id: confirm, run: tree_steps:plan, inputs: {topic: resolve}}
  - {id: notify, run: tree_steps:plan, inputs: {topic: confirm}}
  - {id: close, run: tree_steps:plan, inputs: {topic: notify}}
"""
"""Pauses at the refund the model asks for; once approved, the refund runs and three slow steps follow."""


@dataclass(frozen=True)
class Shape:
    """A workflow under tests/fixtures/flow (or PLAIN, TOOL), the inputs that make it succeed, the variable
    that makes each of its steps slow enough to be killed in the middle, and how many units (child runs'
    included) complete before the kill: for the map of children, enough that several children are under way.
    ``approved``: the run first pauses at a tool call, and the process killed is the one that approved it."""

    name: str
    file: str
    inputs: dict
    slow: str
    kill_after: int = 2
    approved: bool = False


SHAPES = {
    "plain": Shape("plain", "plain.yaml", {}, "STEP_SLEEP"),
    "map": Shape("map", "map_slow.yaml", {"count": 6}, "ITEM_SLEEP", kill_after=3),
    "child": Shape("child", "tree_parent.yaml", {}, "STEP_SLEEP"),
    "map-children": Shape("map-children", "tree_map_wide.yaml", {"count": 4, "unclear": []}, "STEP_SLEEP",
                          kill_after=5),
    "loop": Shape("loop", "loop_slow.yaml", {}, "ITEM_SLEEP"),
    "loop-children": Shape("loop-children", "loop_child.yaml", {}, "ITEM_SLEEP", kill_after=4),
    "tool": Shape("tool", "tool.yaml", {}, "STEP_SLEEP", kill_after=4, approved=True),
}


@dataclass(frozen=True)
class Case:
    """One way through the scenario: the shape, who continues the killed run, the database, where the
    continuation makes its store calls (``off``: handed to worker threads, as the async API and a worker on
    PostgreSQL do; ``on``: on the event loop, as the CLI, the sync API, a worker on SQLite and the async
    service call with ``off_loop=False`` do) and whether the store's reads are slowed (in-process faces)."""

    shape: str
    who: str
    backend: str
    loop: str = "on"
    slow_reads: bool = False

    @property
    def id(self) -> str:
        return "-".join([self.shape, self.who, self.backend, f"{self.loop}-loop", *(["slow-reads"] if
                                                                                     self.slow_reads else [])])


CASES = [  # every shape; every way of continuing on both databases; on and off the loop; slowed reads twice
    Case("child", "cli", "sqlite"),
    Case("map", "cli", "sqlite"),
    Case("plain", "sync-api", "sqlite"),
    Case("map-children", "async-api", "sqlite", "off"),
    Case("child", "worker", "sqlite"),
    Case("map-children", "worker", "postgresql", "off"),  # a worker on a server makes its calls off the loop
    Case("map", "async-api", "postgresql", "off"),
    Case("loop", "cli", "postgresql"),
    Case("map-children", "async-api", "sqlite", "off", slow_reads=True),
    Case("child", "sync-api", "postgresql", slow_reads=True),
    Case("loop", "async-api", "sqlite", "on"),
    Case("loop-children", "async-api", "postgresql", "on"),
    Case("loop-children", "worker", "sqlite"),
    Case("tool", "cli", "sqlite"),
    Case("tool", "async-api", "postgresql", "off"),
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


def script_agent(model: FakeOpenAI) -> None:
    """The model's answers for one execution of TOOL's agent: look the order up, ask for the refund (the pause),
    and once the refund ran, say so."""
    model.respond(completion(None, tool_calls=[tool_call("c1", "lookup_order", {"order_id": "42"})],
                             finish_reason="tool_calls"))
    model.respond(completion(None, tool_calls=[tool_call("c2", "refund", {"order_id": "42", "amount": 40})],
                             finish_reason="tool_calls"))
    model.respond(completion("Refunded 40 on order 42."))


def clean_execution(workdir: Path, shape: Shape, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], object]:
    """How many times each unit runs in an execution of ``shape`` that nobody interrupts (approved as soon as it
    asks, for a shape that pauses at a tool call), and its output."""
    log = tmp_path / "clean.log"
    log.touch()
    with monkeypatch.context() as patch:
        patch.setenv("STEP_LOG", str(log))
        with Orchestrator(f"sqlite:///{tmp_path / 'clean.db'}") as orch:
            run = orch.run(workdir / shape.file, shape.inputs)
            if shape.approved:
                assert run.status == "paused"
                run = orch.approve(run.run_id)
            assert run.status == "succeeded"
    return Counter(unit for unit, _ in logged(log)), run.output


def start_and_kill(workdir: Path, url: str, shape: Shape, env: dict[str, str]) -> str:
    """Run ``shape`` in a process of its own, its steps slow; SIGKILL it once ``shape.kill_after`` units completed.
    For a shape that pauses at a tool call, the run is started to its pause first, and the process killed is the
    one that approves the call and goes on."""
    inputs = workdir / "inputs.json"
    inputs.write_text(json.dumps(shape.inputs))
    command = ["run", str(workdir / shape.file), "--db", url, "--input-file", str(inputs)]
    if shape.approved:
        paused = subprocess.run([sys.executable, "-m", "orchestrator", *command, "--json"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert paused.returncode == 3, paused.stderr
        command = ["approve", json.loads(paused.stdout)["run_id"], "--db", url]
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *command], env={**env, shape.slow: "0.3"},
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


def continue_run(case: Case, url: str, run_id: str, env: dict[str, str]) -> tuple[str, object]:
    """Continue the killed run as ``case.who`` does, making its store calls where ``case.loop`` says; its
    status and output once continued."""
    if case.who in ("cli", "worker"):
        args = ["resume", run_id] if case.who == "cli" else ["worker", "--once"]
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *args, "--db", url], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        with Orchestrator(url) as orch:
            run = orch.get_run(run_id)
            return run.status, run.output
    with Orchestrator(url) as orch:
        if case.slow_reads:
            orch.store = concrete(SlowReads)(orch.store)
        if case.who == "sync-api":
            detail = orch.resume(run_id)
            return detail.status, detail.output
        store = orch.store

        async def resume() -> tuple[str, object]:
            if case.loop == "off":
                detail = await orch.aresume(run_id)
                return detail.status, detail.output
            lease = await anyio.to_thread.run_sync(claim, store, run_id)
            result = await continue_run_async(store, run_id, lease=lease, off_loop=False)
            return result.status, result.output

        return anyio.run(resume)


def test_the_cases_cover_every_shape_way_of_continuing_database_and_store_placement() -> None:
    assert {c.shape for c in CASES} == set(SHAPES)
    faces = {"cli", "sync-api", "async-api", "worker"}
    assert {(c.who, c.backend) for c in CASES} == {(who, db) for who in faces for db in ("sqlite", "postgresql")}
    assert {c.loop for c in CASES} == {"on", "off"} and any(c.slow_reads for c in CASES)
    for case in CASES:  # each case's placement is the one its face makes
        assert case.loop == {"cli": "on", "sync-api": "on"}.get(case.who, case.loop)
        if case.who == "worker":
            assert case.loop == ("on" if case.backend == "sqlite" else "off")
        assert not case.slow_reads or case.who in ("sync-api", "async-api")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_killed_run_continued_runs_no_completed_step_again(case: Case, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}" if case.backend == "sqlite" else request.getfixturevalue("postgres_url")
    workdir = tmp_path / "workflows"
    shutil.copytree(FLOW, workdir, ignore=shutil.ignore_patterns("__pycache__"))
    (workdir / "plain.yaml").write_text(PLAIN)
    (workdir / "tool.yaml").write_text(TOOL)
    shutil.copy(REPO / "tests" / "fixtures" / "approval" / "support_tools.py", workdir)
    # every item's child run at once: a kill after each child's first step leaves them all to continue together
    (workdir / "tree_map_wide.yaml").write_text((FLOW / "tree_map.yaml").read_text().replace("max_parallel: 2",
                                                                                              "max_parallel: 4"))
    log, refunds = tmp_path / "steps.log", tmp_path / "refunds.log"
    log.touch()
    refunds.touch()
    spec = SHAPES[case.shape]
    model = request.getfixturevalue("fake_openai") if spec.approved else None
    variables = {"STEP_LOG": str(log), "ORCHESTRATOR_LEASE_SECONDS": "2", "REFUND_LOG": str(refunds)}
    if model is not None:
        variables["ORCHESTRATOR_LLM_BASE_URL"] = model.base_url
        script_agent(model)  # the uninterrupted execution's turns
        script_agent(model)  # the killed one's
    for name, value in variables.items():
        monkeypatch.setenv(name, value)  # the in-process faces' steps log here too
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    expected, output = clean_execution(workdir, spec, tmp_path, monkeypatch)
    refunded = len(refunds.read_text().splitlines())

    run_id = start_and_kill(workdir, url, spec, env)
    store = open_store(url)
    completed = completed_keys(store, run_id)
    store.close()
    before = logged(log)
    unit_of = dict((key, unit) for unit, key in before)

    assert continue_run(case, url, run_id, env) == ("succeeded", output)  # what the run gives crossed the kill
    again = logged(log)[len(before):]
    assert not completed & {key for _, key in again}, "a completed unit ran again under its own key"
    # and under no other key (a second child run of the same item, say): what ran is exactly what was left
    # (a unit that runs no code of its own, such as a child run's step in its parent, logs nothing)
    assert Counter(unit for unit, _ in again) == expected - Counter(unit_of[k] for k in completed if k in unit_of)
    if model is not None:  # the approved refund ran once, and no turn of the model was asked again
        assert refunds.read_text().splitlines()[refunded:] == ["42 40"]
        assert len(model.requests) == 6
