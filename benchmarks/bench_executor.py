"""Executor + store benchmark, measured side by side with the floors it cannot beat.

Run it as ``.venv/bin/python benchmarks/bench_executor.py`` (about a minute on 2 cores).
Every scenario persists to a fresh SQLite file in a temp dir, with the store's own
pragmas (WAL, ``synchronous=NORMAL``). Printed, and written into ``benchmarks/RESULTS.md``
(between the markers, so notes around the table survive):

- a 1000-step chain of trivial steps, sync callables (worker thread) and async callables
  (no thread) separately, in µs per persisted step, beside two floors: a plain Python loop
  calling the same functions, and raw ``sqlite3`` doing one INSERT + COMMIT per step into
  a comparable table (the ratio to that floor is the headline);
- the same chain with a cheap gate (``not_empty``) on every step, minus the chain without;
- a 100-way fan-out of 50 ms ``anyio.sleep`` steps (wall time, and its ratio to 50 ms);
- sequential 5-step runs per second on one store: through the public ``start_run`` (a new
  event loop and Executor per run, as the CLI and workers do) with async and with sync steps,
  and through ``Executor.start`` inside one event loop;
- bytes stored per small step (file growth after a checkpoint, page counts, ``dbstat``);
- load time (Python API -> checked spec -> Executor) reported apart from execution.

Wall-clock numbers belong here, never in pytest: each target is a PASS/MISS column.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from orchestrator.bind.binding import BoundWorkflow  # noqa: E402
from orchestrator.bind.python_workflow import Workflow  # noqa: E402
from orchestrator.bind.threads import DEFAULT_CONCURRENCY  # noqa: E402
from orchestrator.engine.executor import Executor  # noqa: E402
from orchestrator.service.runner import start_run  # noqa: E402
from orchestrator.store import NewRun, Store, open_store  # noqa: E402
from orchestrator.store.sqlite import apply_pragmas  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN, END = "<!-- bench_executor:begin -->", "<!-- bench_executor:end -->"

# Targets. Peers are compared only in benchmarks/peers/run.py, measured beside ours at equal durability.
TARGET_RATIO_TO_SQLITE = 1.5
TARGET_FANOUT_RATIO = 1.2
TARGET_RUNS_PER_SECOND = 450.0
TARGET_BYTES_PER_STEP = 300.0
SLEEP = 0.05


# -- the step functions ---------------------------------------------------------------------

def inc(value: int) -> int:
    return value + 1


async def ainc(value: int) -> int:
    return value + 1


async def nap(value: int) -> int:
    await anyio.sleep(SLEEP)
    return value


async def gather(**values: int) -> int:
    return len(values)


# -- building workflows -----------------------------------------------------------------------

def chain_spec(n: int, fn: Callable[..., Any], *, gate: str | None = None, name: str = "bench-chain") -> BoundWorkflow:
    wf = Workflow(name, inputs={"x": {"type": "integer", "default": 0}}, output=f"s{n - 1}")
    gates = [gate] if gate else []
    wf.step(id="s0", inputs={"value": "$inputs.x"}, gates=gates)(fn)
    for i in range(1, n):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"}, gates=gates)(fn)
    return wf.bind()


def fanout_spec(width: int) -> BoundWorkflow:
    wf = Workflow("bench-fanout", inputs={"x": {"type": "integer", "default": 0}}, output="join")
    wf.step(id="root", inputs={"value": "$inputs.x"})(ainc)
    for i in range(width):
        wf.step(id=f"nap{i}", inputs={"value": "root"})(nap)
    wf.step(id="join", inputs={f"v{i}": f"nap{i}" for i in range(width)})(gather)
    return wf.bind()


def bind_twice(n: int) -> tuple[float, float]:
    """Seconds for the first ``Workflow.bind()`` of an n-step chain and for a second one (cached per process)."""
    wf = Workflow("bench-bind", inputs={"x": {"type": "integer", "default": 0}}, output=f"s{n - 1}")
    wf.step(id="s0", inputs={"value": "$inputs.x"})(ainc)
    for i in range(1, n):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"})(ainc)
    t = time.perf_counter()
    first = wf.bind()
    t1 = time.perf_counter()
    again = wf.bind()
    t2 = time.perf_counter()
    assert again is first
    return t1 - t, t2 - t1


def single_spec() -> BoundWorkflow:
    wf = Workflow("bench-single", inputs={"x": {"type": "integer", "default": 0}})
    wf.step(id="nap", inputs={"value": "$inputs.x"})(nap)
    return wf.bind()


# -- helpers ----------------------------------------------------------------------------------

@dataclass
class Timed:
    load: float  # Python API -> checked spec -> Executor (seconds)
    execute: float  # create_run + every step + finish (seconds)
    status: str


class TempDB:
    """A fresh SQLite file per measurement, removed afterwards."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="bench-executor-")
        self.path = Path(self.dir.name) / "bench.db"
        self.url = f"sqlite:///{self.path}"

    def __enter__(self) -> TempDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dir.cleanup()


def run_workflow(build: Callable[[], BoundWorkflow], url: str, *, max_concurrency: int = DEFAULT_CONCURRENCY,
                 store: Store | None = None) -> Timed:
    own = store is None
    store = store or open_store(url)
    try:
        t0 = time.perf_counter()
        spec = build()
        executor = Executor(store, spec, max_concurrency=max_concurrency)
        load = time.perf_counter() - t0
        box: dict[str, Any] = {}

        async def main() -> None:
            started = time.perf_counter()
            result = await executor.start({"x": 0})
            box["execute"] = time.perf_counter() - started
            box["status"] = result.status

        gc.collect()
        anyio.run(main)
        return Timed(load, box["execute"], box["status"])
    finally:
        if own:
            store.close()


def median_of(repeat: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeat))


def sqlite_size(path: Path) -> dict[str, int]:
    """Checkpoint the WAL into the main file, then measure it three ways."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        out = {"file": path.stat().st_size, "used": (pages - free) * page_size, "dbstat": -1}
        try:
            out["dbstat"] = int(con.execute(
                "SELECT sum(pgsize - unused) FROM dbstat WHERE name IN "
                "(SELECT name FROM sqlite_master WHERE tbl_name = 'step_records')").fetchone()[0] or 0)
        except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
            pass
        return out
    finally:
        con.close()


# -- floors -------------------------------------------------------------------------------------

def floor_python_sync(n: int) -> float:
    t = time.perf_counter()
    value = 0
    for _ in range(n):
        value = inc(value)
    return (time.perf_counter() - t) / n


def floor_python_async(n: int) -> float:
    async def loop() -> float:
        t = time.perf_counter()
        value = 0
        for _ in range(n):
            value = await ainc(value)
        return time.perf_counter() - t

    return anyio.run(loop) / n


_BARE_DDL = """CREATE TABLE step_records (id INTEGER PRIMARY KEY, run_pk INTEGER NOT NULL,
 workflow_id INTEGER NOT NULL, step_id TEXT NOT NULL, step_type TEXT NOT NULL, agent TEXT NOT NULL,
 attempt INTEGER NOT NULL, status TEXT NOT NULL, origin TEXT NOT NULL, started_at REAL NOT NULL,
 ended_at REAL NOT NULL, inputs TEXT, output TEXT, error_type TEXT, error_message TEXT,
 consumed TEXT, injected TEXT)"""

_INSERT = ("INSERT INTO step_records (run_pk, workflow_id, step_id, step_type, agent, attempt, status, origin, "
           "started_at, ended_at, inputs, output, error_type, error_message, consumed, injected) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def floor_sqlite(n: int, *, same_schema: bool, level: str = "normal") -> float:
    """One INSERT + COMMIT per step with the store's pragmas; rows shaped like a chain step's record.

    ``same_schema`` uses the store's own DDL (indexes, foreign key to runs); otherwise a bare
    table with the same columns and no secondary index.
    """
    with TempDB() as db:
        if same_schema:
            with open_store(f"{db.url}?synchronous={level}") as store:  # the real schema, one workflow + run
                wid = store.register_workflow("floor", "1", {"name": "floor"}, None, "floor")
                store.create_run(NewRun(wid, "floor", {}))
        con = sqlite3.connect(db.path)
        apply_pragmas(con, level)
        if not same_schema:
            con.execute(_BARE_DDL)
            con.commit()
        t = time.perf_counter()
        prev = None
        for i in range(n):
            now = time.time()
            inputs = f'{{"value":{{"$record":{prev}}}}}' if prev else '{"value":0}'
            consumed = f'[[{prev},"s{i - 1}",0.000041]]' if prev else None
            cur = con.execute(_INSERT, (1, 1, f"s{i}", "reasoning", f"s{i}", 1, "succeeded", "executed",
                                        now, now, inputs, str(i + 1), None, None, consumed, None))
            prev = cur.lastrowid
            con.commit()
        elapsed = time.perf_counter() - t
        con.close()
    return elapsed / n


# -- scenarios --------------------------------------------------------------------------------

def chain(n: int, fn: Callable[..., Any], gate: str | None = None,
          level: str = "normal") -> tuple[Timed, dict[str, int], dict[str, int]]:
    """One chain run in a fresh DB; also the DB size before and after it (for bytes per step)."""
    with TempDB() as db:
        url = f"{db.url}?synchronous={level}"
        with open_store(url) as store:
            store.register_workflow("warm", "1", {"name": "warm"}, None, "warm")  # the schema exists
        before = sqlite_size(db.path)
        timed = run_workflow(lambda: chain_spec(n, fn, gate=gate), url)
        after = sqlite_size(db.path)
    if timed.status != "succeeded":
        raise SystemExit(f"chain run ended {timed.status}")
    return timed, before, after


def runs_per_second(fn: Callable[..., Any], seconds: float, min_runs: int, *, one_loop: bool = False) -> float:
    """Sequential 5-step runs on one store: ``start_run`` each (a new event loop and Executor per
    run), or with ``one_loop`` a new Executor per run inside one ``anyio.run``."""
    spec = chain_spec(5, fn, name=f"bench-five-{fn.__name__}")
    with TempDB() as db, open_store(db.url) as store:
        start_run(store, spec, {"x": 0})  # warm-up: workflow registered, code paths imported

        def check(status: str) -> None:
            if status != "succeeded":
                raise SystemExit(f"5-step run ended {status}")

        if one_loop:
            async def loop() -> tuple[int, float]:
                count, t = 0, time.perf_counter()
                while count < min_runs or time.perf_counter() - t < seconds:
                    check((await Executor(store, spec).start({"x": count})).status)
                    count += 1
                return count, time.perf_counter() - t

            count, elapsed = anyio.run(loop)
        else:
            count, t = 0, time.perf_counter()
            while count < min_runs or time.perf_counter() - t < seconds:
                check(start_run(store, spec, {"x": count}).status)
                count += 1
            elapsed = time.perf_counter() - t
    return count / elapsed


def floor_fanout(width: int) -> float:
    """The fan-out's floor: ``width`` anyio tasks that each sleep, then INSERT + COMMIT one row."""
    with TempDB() as db:
        con = sqlite3.connect(db.path, check_same_thread=False)
        apply_pragmas(con, "normal")
        con.execute(_BARE_DDL)
        con.commit()

        async def one(i: int) -> None:
            await anyio.sleep(SLEEP)
            now = time.time()
            con.execute(_INSERT, (1, 1, f"nap{i}", "reasoning", f"nap{i}", 1, "succeeded", "executed",
                                  now, now, '{"value":{"$record":1}}', "1", None, None, '[[1,"root",0.0]]', None))
            con.commit()

        async def main() -> float:
            t = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(width):
                    tg.start_soon(one, i)
            return time.perf_counter() - t

        elapsed = anyio.run(main)
        con.close()
    return elapsed


def thread_hop(n: int) -> float:
    """One ``anyio.to_thread.run_sync`` round trip: what every sync step pays on top of an async one."""
    import anyio.to_thread

    async def loop() -> float:
        await anyio.to_thread.run_sync(inc, 0)  # the worker thread exists
        t = time.perf_counter()
        for i in range(n):
            await anyio.to_thread.run_sync(inc, i)
        return time.perf_counter() - t

    return anyio.run(loop) / n


def gate_call(n: int) -> float:
    """One ``gates.base.evaluate`` of ``not_empty``: the gate protocol's own cost per gated step."""
    from gates.base import evaluate
    from gates.not_empty import NotEmpty
    from orchestrator.spec.context import StepContext

    gate, ctx = NotEmpty(), StepContext(run_id="r", step_id="s", workflow="w", agent="a", step_type="reasoning")
    t = time.perf_counter()
    for i in range(n):
        evaluate(gate, "not_empty", i, ctx)
    return (time.perf_counter() - t) / n


# -- the report ---------------------------------------------------------------------------------

@dataclass
class Row:
    metric: str
    value: str
    reference: str = ""
    ratio: str = ""
    target: str = ""
    verdict: str = ""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def render(rows: list[Row], header: str) -> str:
    cols = ["metric", "value", "reference", "ratio", "target", "PASS/MISS"]
    data = [[r.metric, r.value, r.reference, r.ratio, r.target, r.verdict] for r in rows]
    widths = [max(len(c), *(len(d[i]) for d in data)) for i, c in enumerate(cols)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [header, "", line(cols), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(d) for d in data]
    return "\n".join(out)


def write_results(table: str) -> None:
    block = f"{BEGIN}\n{table}\n{END}"
    if RESULTS.exists():
        text = RESULTS.read_text(encoding="utf-8")
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            RESULTS.write_text(head + block + tail, encoding="utf-8")
            return
        RESULTS.write_text(text.rstrip() + "\n\n" + block + "\n", encoding="utf-8")
        return
    RESULTS.write_text("# Benchmark results\n\nWritten by `benchmarks/bench_executor.py`; "
                       "notes outside the markers are kept.\n\n" + block + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="chain length (default 1000)")
    parser.add_argument("--width", type=int, default=100, help="fan-out width (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per scenario; medians reported")
    parser.add_argument("--runs-seconds", type=float, default=2.0,
                        help="how long to measure each runs-per-second figure")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    n, repeat = args.steps, max(1, args.repeat)
    us = 1e6
    t_all = time.perf_counter()

    # floors
    py_sync = median_of(repeat, lambda: floor_python_sync(n)) * us
    py_async = median_of(repeat, lambda: floor_python_async(n)) * us
    sql_same = median_of(repeat, lambda: floor_sqlite(n, same_schema=True)) * us
    sql_bare = median_of(repeat, lambda: floor_sqlite(n, same_schema=False)) * us
    floor = sql_same
    hop = median_of(repeat, lambda: thread_hop(n)) * us
    gate_floor = median_of(repeat, lambda: gate_call(n)) * us

    # chains
    def chains(fn: Callable[..., Any], gate: str | None = None,
               level: str = "normal") -> tuple[float, float, int, dict[str, int]]:
        results = [chain(n, fn, gate, level) for _ in range(repeat)]
        execute = statistics.median(r[0].execute for r in results) / n * us
        load = statistics.median(r[0].load for r in results)
        before, after = results[0][1], results[0][2]
        growth = {k: after[k] - before[k] for k in after}
        return execute, load, after["dbstat"] >= 0, growth

    sync_us, sync_load, _, _ = chains(inc)
    async_us, async_load, has_dbstat, growth = chains(ainc)
    gated_us, _, _, _ = chains(ainc, "not_empty")
    gate_us = gated_us - async_us
    # the same pair with synchronous=FULL (an fsync per commit: safe against power loss too)
    sql_full = median_of(repeat, lambda: floor_sqlite(n, same_schema=True, level="full")) * us
    async_full_us, _, _, _ = chains(ainc, level="full")

    # fan-out
    def fan() -> float:
        with TempDB() as db:
            timed = run_workflow(lambda: fanout_spec(args.width), db.url)  # the default concurrency
        if timed.status != "succeeded":
            raise SystemExit(f"fan-out run ended {timed.status}")
        return timed.execute

    def one() -> float:
        with TempDB() as db:
            return run_workflow(single_spec, db.url).execute

    binds = [bind_twice(n) for _ in range(repeat)]
    bind_first = statistics.median(b[0] for b in binds)
    bind_again = statistics.median(b[1] for b in binds)
    fan_s = median_of(repeat, fan)
    fan_floor = median_of(repeat, lambda: floor_fanout(args.width))
    one_s = median_of(repeat, one)

    rps_async = runs_per_second(ainc, args.runs_seconds, 50)
    rps_sync = runs_per_second(inc, args.runs_seconds, 50)
    rps_loop_sync = runs_per_second(inc, args.runs_seconds, 50, one_loop=True)

    bytes_file = growth["file"] / n
    bytes_used = growth["used"] / n
    bytes_dbstat = growth["dbstat"] / n if has_dbstat else None

    rows = [
        Row("floor: plain Python loop, sync fn", f"{py_sync:.3f} µs/step"),
        Row("floor: plain Python loop, async fn", f"{py_async:.3f} µs/step"),
        Row("floor: raw sqlite3 INSERT+COMMIT, same schema", f"{sql_same:.1f} µs/step", "", "1.00x"),
        Row("floor: raw sqlite3 INSERT+COMMIT, bare table", f"{sql_bare:.1f} µs/step", "",
            f"{sql_bare / floor:.2f}x"),
        Row("floor: anyio.to_thread.run_sync round trip", f"{hop:.1f} µs/call"),
        Row("floor: gates.base.evaluate(not_empty) call", f"{gate_floor:.1f} µs/call"),
        Row(f"chain {n}, sync steps (worker thread)", f"{sync_us:.1f} µs/step", f"{floor:.1f} µs",
            f"{sync_us / floor:.2f}x", f"<= {TARGET_RATIO_TO_SQLITE}x",
            verdict(sync_us / floor <= TARGET_RATIO_TO_SQLITE)),
        Row("  same, beside sqlite floor + thread hop", f"{sync_us:.1f} µs/step", f"{floor + hop:.1f} µs",
            f"{sync_us / (floor + hop):.2f}x"),
        Row(f"chain {n}, async steps", f"{async_us:.1f} µs/step", f"{floor:.1f} µs",
            f"{async_us / floor:.2f}x", f"<= {TARGET_RATIO_TO_SQLITE}x",
            verdict(async_us / floor <= TARGET_RATIO_TO_SQLITE)),
        Row(f"chain {n}, async + not_empty gate", f"{gated_us:.1f} µs/step", f"{floor:.1f} µs",
            f"{gated_us / floor:.2f}x"),
        Row("floor: raw sqlite3 INSERT+COMMIT, synchronous=FULL", f"{sql_full:.1f} µs/step", "", "1.00x"),
        Row(f"chain {n}, async steps, synchronous=FULL", f"{async_full_us:.1f} µs/step", f"{sql_full:.1f} µs",
            f"{async_full_us / sql_full:.2f}x", f"<= {TARGET_RATIO_TO_SQLITE}x",
            verdict(async_full_us / sql_full <= TARGET_RATIO_TO_SQLITE)),
        Row("gate overhead (not_empty, per step)", f"{gate_us:.1f} µs/step"),
        Row(f"load {n}-step chain (API -> spec -> Executor)", f"{sync_load * 1e3:.1f} ms",
            f"exec {sync_us * n / 1e3:.1f} ms", f"{sync_load / (sync_us * n / us):.2f}x of exec"),
        Row(f"bind {n}-step chain: first, then again (cached)", f"{bind_first * 1e3:.1f} ms",
            f"again {bind_again * 1e3:.2f} ms", f"{bind_again / bind_first:.3f}x"),
        Row(f"fan-out {args.width} x {SLEEP * 1e3:.0f} ms async sleeps (+root, join)", f"{fan_s * 1e3:.1f} ms",
            f"{SLEEP * 1e3:.0f} ms", f"{fan_s / SLEEP:.2f}x", f"<= {TARGET_FANOUT_RATIO}x",
            verdict(fan_s / SLEEP <= TARGET_FANOUT_RATIO)),
        Row("  same, beside anyio tasks sleeping + raw INSERT+COMMIT each", f"{fan_s * 1e3:.1f} ms",
            f"{fan_floor * 1e3:.1f} ms", f"{fan_s / fan_floor:.2f}x"),
        Row(f"one {SLEEP * 1e3:.0f} ms step workflow", f"{one_s * 1e3:.1f} ms", f"{SLEEP * 1e3:.0f} ms",
            f"{one_s / SLEEP:.2f}x"),
        *[Row(f"5-step runs/s, {label}", f"{rps:.0f} runs/s", "", f"{1e3 / rps:.2f} ms/run",
              f">= {TARGET_RUNS_PER_SECOND:.0f}/s", verdict(rps >= TARGET_RUNS_PER_SECOND))
          for label, rps in (("start_run, async steps", rps_async), ("start_run, sync steps", rps_sync),
                             ("one event loop, sync steps", rps_loop_sync))],
        Row("bytes per small step (file growth)", f"{bytes_file:.0f} B", "", "",
            f"<= {TARGET_BYTES_PER_STEP:.0f} B", verdict(bytes_file <= TARGET_BYTES_PER_STEP)),
        Row("bytes per small step (used pages)", f"{bytes_used:.0f} B"),
    ]
    if bytes_dbstat is not None:
        rows.append(Row("bytes per small step (dbstat, step_records+indexes)", f"{bytes_dbstat:.0f} B"))
    header = (f"bench_executor: {_dt.date.today().isoformat()}, Python {platform.python_version()}, "
              f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, {platform.machine()}; "
              f"median of {repeat}; total {time.perf_counter() - t_all:.0f} s")
    table = render(rows, header)
    print(table)
    if not args.no_write:
        write_results(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
