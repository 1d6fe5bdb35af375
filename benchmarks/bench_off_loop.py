"""What handing each store call to a thread costs: runs per second with a run's store calls off the event
loop against on it, for a worker draining a queue and for ``start_run_async`` (the async API's path).

Run it as ``.venv/bin/python benchmarks/bench_off_loop.py [--runs 200] [--rounds 5] [--concurrency 4]
[--step-ms 0] [--pg postgresql://postgres@127.0.0.1:5432/test]``. Each round enqueues ``--runs`` runs of a
chain of 5 async steps, then one in-process worker (``--concurrency`` runs at once, ``once``) works through
them, once with each setting (which goes first alternates by round); a value is runs per second over the
drain. Then, as many runs started one after another with ``start_run_async``, each setting in turn. On a
fresh SQLite file (WAL, ``synchronous=NORMAL``, the store's own setting) and, with ``--pg``, on a database of
its own beside the given one (created, and dropped at the end).

Why it matters: off the loop, a run that waits on the database (a held SQLite write lock, a server's round
trip or restart) no longer stalls the other runs in flight on the loop; the price is a thread hand-over and
back per store call (about 100-200 µs, 11 of them for a run of 5 steps). With no-op steps (``--step-ms 0``)
the price is all there is to see; with steps that wait (``--step-ms 20``, a model call's order of magnitude)
it disappears into the waits. The async API always pays it (the caller's loop is shared); a worker pays it
only for a server, whose calls wait on a network, and keeps an embedded database's calls on its loop (the
column "default").

Wall-clock numbers belong here, never in pytest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from orchestrator.bind.loader import load_workflow  # noqa: E402
from orchestrator.service.runner import enqueue_run, start_run_async  # noqa: E402
from orchestrator.service.worker import Worker, WorkOptions  # noqa: E402
from orchestrator.store import open_store  # noqa: E402

STEPS = 5

STEPS_PY = '''
import asyncio, os

WAIT = float(os.environ.get("BENCH_WORKER_STEP_MS", "0")) / 1000


async def step(value: int) -> int:
    if WAIT:
        await asyncio.sleep(WAIT)
    return value + 1
'''


def workflow_yaml() -> str:
    lines = ["name: bench-worker", "inputs:", "  x: {type: integer}", "steps:",
             "  - {id: s0, run: 'bench_worker_steps:step', inputs: {value: $inputs.x}}"]
    lines += [f"  - {{id: s{i}, run: 'bench_worker_steps:step', inputs: {{value: s{i - 1}}}}}" for i in range(1, STEPS)]
    return "\n".join(lines) + "\n"


def drain_rate(url: str, workflow: Path, runs: int, concurrency: int, *, off_loop: bool) -> float:
    """Runs per second of one worker working through ``runs`` freshly queued runs."""
    bound = load_workflow(workflow)
    with open_store(url) as store:
        for x in range(runs):
            enqueue_run(store, bound, {"x": x})
        worker = Worker(store, WorkOptions(once=True, concurrency=concurrency, recover=False,
                                           store_calls_off_loop=off_loop))
        began = time.perf_counter()
        anyio.run(worker.run, False)
        elapsed = time.perf_counter() - began
        assert worker.summary.executed == runs, worker.summary
    return runs / elapsed


def start_rate(url: str, workflow: Path, runs: int, _concurrency: int, *, off_loop: bool) -> float:
    """Runs per second of ``runs`` runs started one after another with ``start_run_async``."""
    bound = load_workflow(workflow)

    async def one_after_another() -> float:
        began = time.perf_counter()
        for x in range(runs):
            result = await start_run_async(store, bound, {"x": x}, off_loop=off_loop)
            assert result.status == "succeeded", result
        return runs / (time.perf_counter() - began)

    with open_store(url) as store:
        return anyio.run(one_after_another)


def compare(rate: Callable[..., float], url: str, workflow: Path, runs: int, concurrency: int,
            rounds: int) -> list[tuple[float, float]]:
    """(off the loop, on the loop) runs/s per round, after one small warm-up of each."""
    rate(url, workflow, 5, concurrency, off_loop=True)
    rate(url, workflow, 5, concurrency, off_loop=False)
    pairs = []
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        rates = {mode: rate(url, workflow, runs, concurrency, off_loop=mode) for mode in order}
        pairs.append((rates[True], rates[False]))
    return pairs


@contextmanager
def private_postgres(url: str) -> Iterator[str]:
    """A database of its own on the server of ``url`` (its queue holds this benchmark's runs alone)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = "orchestrator_bench_worker"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def report(label: str, default: str, pairs: list[tuple[float, float]]) -> str:
    off = statistics.median(p[0] for p in pairs)
    on = statistics.median(p[1] for p in pairs)
    spread = ", ".join(f"{a:.0f}/{b:.0f}" for a, b in pairs)
    return (f"| {label} | {off:.0f} | {on:.0f} | {off / on:.2f}x | "
            f"{(1 / off - 1 / on) / STEPS * 1e6:+.0f} | {default} | {spread} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="queued runs per drain (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; medians reported (default 5)")
    parser.add_argument("--concurrency", type=int, default=4, help="runs a worker executes at once (default 4)")
    parser.add_argument("--step-ms", type=float, default=0.0, help="each step awaits this long (default 0)")
    parser.add_argument("--pg", help="also on PostgreSQL: a server URL (a database of its own is created)")
    args = parser.parse_args(argv)
    os.environ["BENCH_WORKER_STEP_MS"] = str(args.step_ms)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_worker_steps.py").write_text(STEPS_PY)
        workflow = folder / "bench_worker.yaml"
        workflow.write_text(workflow_yaml())
        sys.path.insert(0, str(folder))
        stores = {"SQLite NORMAL": f"sqlite:///{folder / 'bench.db'}"}
        with contextlib.ExitStack() as stack:
            if args.pg:
                stores["PostgreSQL"] = stack.enter_context(private_postgres(args.pg))
            for label, url in stores.items():
                with open_store(url) as store:
                    default = "on the loop" if store.embedded else "off the loop"
                for what, rate, chosen in (("worker", drain_rate, default), ("start_run_async", start_rate,
                                                                                "off the loop")):
                    pairs = compare(rate, url, workflow, args.runs, args.concurrency, args.rounds)
                    rows.append(report(f"{label}, {what}", chosen, pairs))
    print(f"{args.runs} runs of {STEPS} async steps ({args.step_ms:g} ms each) per drain, concurrency "
          f"{args.concurrency}, {args.rounds} rounds; runs/s, medians")
    print("| store | off the loop | on the loop | off/on | wall µs per step added off the loop | default "
          "| rounds (off/on) |")
    print("|---|---:|---:|---:|---:|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
