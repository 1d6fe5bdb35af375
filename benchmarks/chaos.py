"""Chaos: random SIGKILLs of runs, resumes and workers, then a count of what went wrong.

Not a timed test: a story told N times. Each round starts a real process (`orchestrator run`,
`orchestrator resume` of an unfinished run, or `orchestrator worker` over queued and interrupted
runs), lets it work for a random moment and kills it with SIGKILL. At the end one recovering
worker drains everything. The workflow mixes sync and async steps with a fan-out; every step
appends a line to a log when it starts, so executions are counted from outside, beside the
stored records. Printed (all must be zero except the first):

- runs correct: finished with the expected output;
- completed steps re-executed: a step started again after its record was committed;
- duplicate records: more than one executed, succeeded record of one step in one run;
- lost records: a succeeded run missing a step's succeeded record;
- stuck runs: runs not finished after the final drain.

Run: ``.venv/bin/python benchmarks/chaos.py --kills 100 [--db postgresql://postgres@127.0.0.1:5432/test]``.

``--backlog 400`` times something else: two workers work through 400 queued runs while an
``orchestrator run`` is SIGKILLed inside its run; printed is how long after the kill that run continued (about a
lease: workers take interrupted runs over before queued ones) and how many steps of other runs
started meanwhile.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.store import open_store  # noqa: E402

LEASE = 1.0
WIDTH = 4

STEPS_PY = '''
import asyncio, os, time

def _log(step, ctx):
    with open(os.environ["CHAOS_LOG"], "a") as f:
        f.write(f"{ctx.run_id} {step} {time.time():.6f}\\n")

def root(x: int, ctx) -> int:
    _log("root", ctx); time.sleep(0.05); return x

async def branch(value: int, ctx) -> int:
    _log(ctx.step_id, ctx); await asyncio.sleep(0.08); return value + 1

def join(ctx, **values: int) -> int:
    _log("join", ctx); time.sleep(0.05); return sum(values.values())

async def tail(value: int, ctx) -> int:
    _log(ctx.step_id, ctx); await asyncio.sleep(0.05); return value * 2
'''


def workflow_yaml() -> str:
    """root -> WIDTH async branches -> join (sync) -> t1 -> t2 (async): output 2*2*(WIDTH*(x+1))."""
    lines = ["name: chaos", "inputs:", "  x: {type: integer}", "steps:",
             "  - {id: root, run: 'chaos_steps:root', inputs: {x: $inputs.x}}"]
    for i in range(WIDTH):
        lines.append(f"  - {{id: b{i}, run: 'chaos_steps:branch', inputs: {{value: root}}}}")
    joined = ", ".join(f"v{i}: b{i}" for i in range(WIDTH))
    lines.append(f"  - {{id: join, run: 'chaos_steps:join', inputs: {{{joined}}}}}")
    lines.append("  - {id: t1, run: 'chaos_steps:tail', inputs: {value: join}}")
    lines.append("  - {id: t2, run: 'chaos_steps:tail', inputs: {value: t1}}")
    return "\n".join(lines) + "\n"


def expected(x: int) -> int:
    return 4 * WIDTH * (x + 1)


STEP_IDS = ["root", *(f"b{i}" for i in range(WIDTH)), "join", "t1", "t2"]


class Chaos:
    """One chaos session against one database."""

    def __init__(self, db: str, workdir: Path, seed: int) -> None:
        self.db = db
        self.dir = workdir
        self.rng = random.Random(seed)
        self.log = workdir / "steps.log"
        self.log.touch()
        (workdir / "chaos_steps.py").write_text(STEPS_PY)
        self.workflow = workdir / "chaos.yaml"
        self.workflow.write_text(workflow_yaml())
        self.env = {**os.environ, "CHAOS_LOG": str(self.log), "ORCHESTRATOR_LEASE_SECONDS": str(LEASE),
                    "PYTHONPATH": str(ROOT)}
        self.inputs: dict[str, int] = {}
        self.kinds: Counter[str] = Counter()

    def orchestrator(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "orchestrator", *args, "--db", self.db], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def unfinished(self) -> list[str]:
        with open_store(self.db) as store:
            return [r.run_id for r in store.list_runs(kind="run", limit=100000)
                    if r.status not in ("succeeded", "failed", "rejected")]

    def one_round(self) -> None:
        action = self.rng.choices(["run", "queue+worker", "resume", "worker"], weights=[4, 2, 3, 2])[0]
        pending = self.unfinished()
        if action == "resume" and not pending:
            action = "run"
        x = self.rng.randrange(1000)
        if action == "run":
            proc = self.orchestrator("run", str(self.workflow), "--input", f"x={x}")
        elif action == "queue+worker":
            subprocess.run([sys.executable, "-m", "orchestrator", "run", str(self.workflow), "--queue", "--input",
                            f"x={x}", "--db", self.db], env=self.env, capture_output=True, check=True)
            proc = self.orchestrator("worker", "--poll", "0.05")
        elif action == "resume":
            proc = self.orchestrator("resume", self.rng.choice(pending))
        else:
            proc = self.orchestrator("worker", "--poll", "0.05")
        self.kinds[action] += 1
        time.sleep(self.rng.uniform(0.05, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def drain(self, timeout: float) -> None:
        """One recovering worker finishes every queued and interrupted run."""
        worker = self.orchestrator("worker", "--poll", "0.1")
        deadline = time.time() + timeout
        try:
            while self.unfinished() and time.time() < deadline:
                time.sleep(0.3)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)

    def measure(self) -> dict[str, int]:
        executions: dict[tuple[str, str], list[float]] = {}
        for line in self.log.read_text().splitlines():
            run_id, step, at = line.split()
            executions.setdefault((run_id, step), []).append(float(at))
        out = Counter[str]()
        with open_store(self.db) as store:
            runs = store.list_runs(kind="run", limit=100000)
            for run in runs:
                records = store.step_records(run.run_id)
                done = [r for r in records if r.status == "succeeded" and r.origin == "executed"]
                by_step = Counter(r.step_id for r in done)
                out["duplicate records"] += sum(n - 1 for n in by_step.values() if n > 1)
                for rec in done:
                    starts = executions.get((run.run_id, rec.step_id), [])
                    out["completed steps re-executed"] += sum(1 for t in starts if t > rec.ended_at)
                if run.status == "succeeded":
                    out["lost records"] += sum(1 for s in STEP_IDS if s not in by_step)
                    x = run.inputs.get("x")
                    out["runs correct"] += int(run.output == expected(int(x)))
                    out["runs wrong"] += int(run.output != expected(int(x)))
                else:
                    out["stuck runs"] += 1
            out["runs"] = len(runs)
        return dict(out)


def recovery_under_backlog(chaos: Chaos, backlog: int, workers: int = 2) -> tuple[float, int]:
    """Two workers busy with a backlog of queued runs; an ``orchestrator run`` is SIGKILLed inside its run:
    seconds from the kill until that run's next step starts, and how many steps of other runs started
    meanwhile."""
    from orchestrator.bind.loader import load_workflow
    from orchestrator.service.runner import enqueue_run

    bound = load_workflow(chaos.workflow)
    with open_store(chaos.db) as store:
        for x in range(backlog):
            enqueue_run(store, bound, {"x": x})
    fresh = [chaos.orchestrator("worker", "--poll", "0.05") for _ in range(workers)]
    try:
        while len(chaos.log.read_text().splitlines()) < 20:  # the backlog is being worked on
            time.sleep(0.01)
        victim = chaos.orchestrator("run", str(chaos.workflow), "--input", "x=1")
        killed_run = None
        with open_store(chaos.db) as store:
            while killed_run is None:
                killed_run = next((r.run_id for r in store.list_runs(status="running")
                                   if (r.owner or "").endswith(f":{victim.pid}")), None)
        while f"{killed_run} root" not in chaos.log.read_text():
            time.sleep(0.005)
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time()
        victim.wait()
        while True:
            later = [(run_id, float(at)) for run_id, _, at in
                     (line.split() for line in chaos.log.read_text().splitlines()) if float(at) > killed_at]
            resumed = [at for run_id, at in later if run_id == killed_run]
            if resumed:
                return resumed[0] - killed_at, sum(1 for run_id, at in later if run_id != killed_run
                                                   and at < resumed[0])
            time.sleep(0.05)
    finally:
        for proc in fresh:
            proc.send_signal(signal.SIGTERM)
        for proc in fresh:
            proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--db", default=None, help="a database URL (default: a fresh SQLite file)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=0,
                        help="instead: time the take-over of a SIGKILLed run behind this many queued runs")
    args = parser.parse_args(argv)
    if args.backlog:
        with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
            db = fresh_postgres_schema(args.db) if args.db and args.db.startswith("postgres") \
                else args.db or f"sqlite:///{tmp}/chaos.db"
            seconds, before = recovery_under_backlog(Chaos(db, Path(tmp), args.seed), args.backlog)
        print(f"recovery under a backlog of {args.backlog} queued runs on {db.split('?')[0].split('@')[-1]}: the "
              f"killed run continued {seconds:.2f} s after the SIGKILL (lease {LEASE:g} s), after "
              f"{before} step start(s) of other runs")
        return 0
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        db = args.db or f"sqlite:///{tmp}/chaos.db"
        if args.db and args.db.startswith("postgres"):
            db = fresh_postgres_schema(args.db)
        chaos = Chaos(db, Path(tmp), args.seed)
        started = time.time()
        for _ in range(args.kills):
            chaos.one_round()
        chaos.drain(timeout=120)
        result = chaos.measure()
    print(f"chaos: {args.kills} SIGKILLs on {db.split('?')[0].split('@')[-1]} in {time.time() - started:.0f} s "
          f"({', '.join(f'{k} {v}' for k, v in sorted(chaos.kinds.items()))}), lease {LEASE:g} s")
    print("| measure | count | target |")
    print("|---|---|---|")
    for key in ("runs", "runs correct", "runs wrong", "completed steps re-executed", "duplicate records",
                "lost records", "stuck runs"):
        target = "" if key in ("runs", "runs correct") else "0"
        print(f"| {key} | {result.get(key, 0)} | {target} |")
    bad = sum(result.get(k, 0) for k in ("runs wrong", "completed steps re-executed", "duplicate records",
                                          "lost records", "stuck runs"))
    return 1 if bad else 0


def fresh_postgres_schema(url: str) -> str:
    """A new schema for this session, so the counts see only its runs."""
    import secrets
    from urllib.parse import quote

    import sqlalchemy as sa

    from orchestrator.store import normalize_url

    schema = f"chaos_{secrets.token_hex(4)}"
    with sa.create_engine(normalize_url(url)).begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


if __name__ == "__main__":
    sys.exit(main())
