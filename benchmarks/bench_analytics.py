"""Read commands over a large store: ``stats``, ``report``, ``runs``, ``show`` and ``trace`` on 1M step records.

Builds (once; the database is cached between invocations) a store of ``--runs`` runs (default
50 000) of a 20-step workflow: 1 000 000 step records. One run goes through the runner, so the
workflow is registered exactly as ``orchestrator run`` registers it; every other run is written
through the public :class:`~orchestrator.store.Store` interface directly (``create_run``,
``insert_step_record``, ``add_outcome``, ``add_attribution``), in one process, because the runner
spends most of its time on scheduling that a read benchmark does not need. The data: each step
consumes the previous one's output through a ``$record`` link; step ``s04`` fails its gate in 5%
of runs and passes on a retry; ``s10`` answers randomly (non-determinism); every 5th run is
scored, every 50th incorrect and attributed by a trace blaming ``s04``; runs spread over eight weeks.

Then each read command runs as a subprocess ``--repeat`` times; the median wall time and the
largest peak RSS (``os.wait4``) are printed. Target: each under 1 s and 200 MB.

``stats`` and ``report`` read a summary that each read brings up to date with what was written since
the previous one (:mod:`orchestrator.store.sql_summary`); the cached database keeps it between
invocations, so the table shows reads of an up-to-date summary. Two options time the rest honestly:
``--fresh-summary`` empties the summary first and times the read that rebuilds it from every record
(what the first ``stats`` after upgrading a large database costs), and ``--add-runs N`` writes N more
runs after the table and times the reads that summarise them (the cost of an ordinary read). Usage::

    .venv/bin/python benchmarks/bench_analytics.py --runs 2000          # a quick try
    .venv/bin/python benchmarks/bench_analytics.py                      # 1M records on SQLite
    .venv/bin/python benchmarks/bench_analytics.py --fresh-summary --add-runs 500
    .venv/bin/python benchmarks/bench_analytics.py --db postgresql://postgres@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.bind.loader import load_workflow  # noqa: E402
from orchestrator.service.runner import start_run  # noqa: E402
from orchestrator.store import GateRow, NewAttribution, NewOutcome, NewRun, NewStepRecord, Store, open_store  # noqa: E402

STEPS = [f"s{i:02d}" for i in range(1, 21)]
WEEKS = 8
STEP_CODE = '''
def first(q):
    return {"v": q}

def next_step(prev):
    return {"v": prev["v"] + 1}
'''


def write_workflow(folder: Path, name: str) -> Path:
    """A 20-step chain of trivial steps, as a user would write it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_steps.py").write_text(STEP_CODE)
    lines = [f"name: {name}", "version: 1", "inputs:", "  q: {type: integer, default: 1}", "steps:"]
    for i, sid in enumerate(STEPS):
        lines.append(f"  - id: {sid}")
        if i == 0:
            lines += ["    run: bench_steps:first", "    inputs: {q: $inputs.q}"]
        else:
            lines += ["    run: bench_steps:next_step", f"    inputs: {{prev: {STEPS[i - 1]}}}"]
        if sid == "s04":
            lines += ["    gates: [{gate: required_fields, fields: [v]}]"]
    path = folder / "bench.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def gate(ok: bool) -> list[GateRow]:
    return [GateRow(gate="required_fields", passed=ok, score=1.0 if ok else 0.0, reason="" if ok else "missing v",
                    details=None)]


def write_run(store: Store, workflow_id: int, name: str, i: int, t0: float, rng: random.Random) -> None:
    """One synthetic run: 20 records (21 when s04 is retried), maybe an outcome and an attribution."""
    run_id = store.create_run(NewRun(workflow_id, name, {"q": i % 7}, status="succeeded"))
    previous: int | None = None
    value = i % 7
    t = t0
    for sid in STEPS:
        inputs = {"q": i % 7} if previous is None else {"prev": {"$record": previous}}
        value = rng.randint(0, 3) if sid == "s10" else value + 1
        gates: list[GateRow] = []
        if sid == "s04":
            if i % 20 == 0:  # fails its gate, then passes on a retry
                store.insert_step_record(NewStepRecord(
                    run_id, workflow_id, sid, "python", sid, 1, "gate_failed", t, t + 0.001,
                    inputs=json.dumps(inputs), output=json.dumps({"w": value}), gates=gate(False)))
                t += 0.002
                previous = store.insert_step_record(NewStepRecord(
                    run_id, workflow_id, sid, "python", sid, 2, "succeeded", t, t + 0.001,
                    inputs=json.dumps(inputs), output=json.dumps({"v": value}), gates=gate(True)))
                t += 0.002
                continue
            gates = gate(True)
        previous = store.insert_step_record(NewStepRecord(
            run_id, workflow_id, sid, "python", sid, 1, "succeeded", t, t + 0.001, inputs=json.dumps(inputs),
            output=json.dumps({"v": value}), gates=gates))
        t += 0.002
    if i % 5 == 0:
        incorrect = i % 50 == 0
        oid = store.add_outcome(NewOutcome(run_id, 0.0 if incorrect else 1.0, not incorrect, "evaluator",
                                           "goal_achieved"))
        if incorrect:
            blamed = [{"step_id": "s04", "agent": "s04", "credit": 1.0, "evidence": {}}]
            store.add_attribution(NewAttribution(run_id, "trace", {}, blamed, {"s04": 1.0}, "s04", 0.6,
                                                 {"signals": ["gate"]}, outcome_id=oid))


def build(url: str, runs: int, name: str, folder: Path) -> None:
    store = open_store(url)
    try:
        existing = sum(c.runs for c in store.run_counts(name) if c.kind == "run")
        if existing >= runs:
            print(f"reusing {existing} runs of {name} in {store.display_url}")
            return
        result = start_run(store, load_workflow(write_workflow(folder, name)), {"q": 1})
        workflow_id = store.get_run(result.run_id).workflow_id
        rng = random.Random(7)
        start = time.time() - WEEKS * 7 * 86400
        spacing = WEEKS * 7 * 86400 / runs
        began = time.perf_counter()
        for i in range(existing + 1, runs):
            write_run(store, workflow_id, name, i, start + i * spacing, rng)
            if i % 5000 == 0:
                rate = (i - existing) * len(STEPS) / (time.perf_counter() - began)
                print(f"  {i} runs written, {rate:,.0f} records/s", flush=True)
        elapsed = time.perf_counter() - began
        print(f"built {runs} runs ({runs * len(STEPS):,} records) in {elapsed:.0f} s: "
              f"{(runs - existing) * len(STEPS) / elapsed:,.0f} records/s")
    finally:
        store.close()


def timed(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one CLI command."""
    began = time.perf_counter()
    process = subprocess.Popen([str(Path(sys.executable).parent / "orchestrator"), *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - began
    if process.stderr is not None:
        error = process.stderr.read().decode().strip()
        if error:
            print("   ", error.splitlines()[-1][:200])
        process.stderr.close()
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def row(label: str, results: list[tuple[float, float, int]]) -> None:
    """One line of the table: the median wall time, the largest peak RSS, exit codes other than 0."""
    codes = {r[2] for r in results}
    print(f"{label:<30} {statistics.median(r[0] for r in results):>8.2f} {max(r[1] for r in results):>12.0f}"
          + ("" if codes == {0} else f"  exit {sorted(codes)}"), flush=True)


def forget_summary(url: str) -> None:
    """Empty the analytics summary, as a database upgraded to it (or never read since) has it."""
    from orchestrator.store.sql_summary import forget

    store = open_store(url)
    try:
        forget(store.sql() if hasattr(store, "sql") else store)
    finally:
        store.close()


def add_runs(url: str, name: str, count: int) -> None:
    """``count`` more runs like the others, written after the last one (as new traffic arrives)."""
    store = open_store(url)
    try:
        existing = sum(c.runs for c in store.run_counts(name) if c.kind == "run")
        workflow_id = store.list_runs(workflow=name, limit=1)[0].workflow_id
        rng = random.Random(existing)
        for i in range(existing, existing + count):
            write_run(store, workflow_id, name, i, time.time() - 3600 + i % 3600, rng)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000, help="runs of 20 steps (default 50 000: 1M records)")
    parser.add_argument("--db", default=None, help="database URL (default: a cached SQLite file per --runs)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "orchestrator-bench"),
                        help="where the SQLite file lives between invocations")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is shown")
    parser.add_argument("--fresh-summary", action="store_true",
                        help="empty the analytics summary first and time the read that rebuilds it")
    parser.add_argument("--add-runs", type=int, default=0, metavar="N",
                        help="after the table, write N more runs and time the reads that summarise them")
    opts = parser.parse_args()
    cache = Path(opts.cache)
    url = opts.db or f"sqlite:///{cache / f'analytics-{opts.runs}.db'}"
    name = f"bench-analytics-{opts.runs}"
    build(url, opts.runs, name, cache / "workflow")
    store = open_store(url)
    try:
        newest = store.list_runs(workflow=name, limit=1)[0].run_id
        attributed = store.attributions(workflow=name)
        traced = attributed[-1].run_id if attributed else newest
    finally:
        store.close()
    commands = {
        "stats": ["stats", "--workflow", name],
        "stats --json": ["stats", "--workflow", name, "--json"],
        "stats --period day --since 14d": ["stats", "--workflow", name, "--period", "day", "--since", "14d"],
        "report": ["report", "--workflow", name],
        "runs": ["runs"],
        "show RUN": ["show", newest],
        "trace RUN": ["trace", traced],
    }
    print(f"{'command':<30} {'wall s':>8} {'peak RSS MB':>12}  (median of {opts.repeat}; target < 1 s, < 200 MB)")
    if opts.fresh_summary:
        forget_summary(url)
        row("stats, first read (summarises)", [timed([*commands["stats"], "--db", url])])
    for label, args in commands.items():
        row(label, [timed([*args, "--db", url]) for _ in range(opts.repeat)])
    if opts.add_runs:
        add_runs(url, name, opts.add_runs)
        row(f"stats after {opts.add_runs} new runs", [timed([*commands["stats"], "--db", url])])
        row("stats again", [timed([*commands["stats"], "--db", url])])
        add_runs(url, name, opts.add_runs)
        row(f"report after {opts.add_runs} new runs", [timed([*commands["report"], "--db", url])])


if __name__ == "__main__":
    main()
