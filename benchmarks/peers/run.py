"""Our orchestrator beside LangGraph, Burr, Hamilton, DBOS and raw sqlite3, at equal durability.

Run it as ``/tmp/peersvenv/bin/python benchmarks/peers/run.py`` (peers installed with the
``bench-peers`` extra). Why it is built this way:

- Equal durability: every engine's SQLite connection is set to WAL and the same
  ``synchronous`` level (FULL beside FULL, NORMAL beside NORMAL; levels are never compared
  with each other). Each engine's own stock setting is printed beside the forced one.
- Interleaved rounds: each round runs every engine once, in a shuffled order, so drift of
  the machine (disk cache, thermal, neighbours) spreads over all engines instead of biasing
  whichever ran last. Medians over rounds are printed, and ratios to ours are taken per
  round, reported as the median with the min-max spread of the per-round ratios.
- Isolation: each (engine, round) runs in its own subprocess, so an engine's global state
  (DBOS's background threads, thread pools, imported modules) cannot touch the next
  engine's numbers, and a crash or a missing package costs one cell, never the run.

Workloads: a chain of trivial steps (µs/step) at FULL, at NORMAL and with no persistence;
a fan-out of ``--width`` steps each ``await asyncio.sleep(0.05)`` plus one join (wall s, at
FULL, at NORMAL and with no persistence); sequential 5-step runs per second at FULL and with no
persistence, each run a new run id.

The map workloads (``--workloads map``, also part of a full run): ``--items`` no-op items mapped
one instance each and collected into a list (µs per item, at FULL, at NORMAL and with no
persistence), by ours (``for_each:``, async steps), LangGraph (``Send`` map-reduce) and Hamilton
(``Parallelizable``/``Collect``); beside ours, the same work as a static fan-out of ``--items``
steps written out in the workflow. Then the peak RSS of one ``--memory-items`` map of ours, each
in a fresh interpreter (``resource.getrusage``), on the SQLite store at its default level and on
the memory store. These tables live between markers in RESULTS.md: a run of one group of
workloads rewrites its own tables and keeps the other's.

The no-persistence numbers also bound what a target can ask: a target that allows, beyond the
floor's own writes, less time than an engine spends with no persistence at all cannot be met by
that engine, whatever its store does. The last table sets each such allowance beside them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from engines import REFERENCE, REGISTRY, NotInstalled, make  # noqa: E402
from engines.base import SLEEP, Engine, Level, Unsupported  # noqa: E402

RESULTS = HERE / "RESULTS.md"
MAP_BEGIN, MAP_END = "<!-- map workloads: begin -->", "<!-- map workloads: end -->"
WORKER_TIMEOUT = 300.0
"""Seconds one engine's round may take before it is reported as timed out."""


@dataclass(frozen=True)
class Metric:
    """One printed table: which level it runs at and how to read its numbers."""

    key: str
    title: str
    unit: str
    level: str
    higher_is_better: bool = False
    group: str = "steps"
    """``steps`` (chain, fan-out, runs/s, bytes), ``map`` or ``memory``: which part of the report shows it."""


LEVEL_TITLES = {"full": "synchronous=FULL", "normal": "synchronous=NORMAL", "none": "no persistence"}
MAP_METRICS = [Metric(f"{kind}_{level}", f"{title}, {LEVEL_TITLES[level]}", "µs/item", level, group="map")
               for level in ("full", "normal", "none")
               for kind, title in (("map", "map of no-op items, one instance each, collected into a list"),
                                   ("static", "the same items as a static fan-out of steps"))]
MEMORY_METRICS = [Metric("rss_peak", "peak RSS of the map's process", "MB", "normal", group="memory"),
                  Metric("rss_base", "RSS after imports and a 10-item map", "MB", "normal", group="memory")]

METRICS = [
    Metric("chain_full", "chain, persisted after every step, synchronous=FULL", "µs/step", "full"),
    Metric("chain_normal", "chain, persisted after every step, synchronous=NORMAL", "µs/step", "normal"),
    Metric("chain_none", "chain, no persistence", "µs/step", "none"),
    Metric("fanout", "fan-out of async 50 ms sleeps + join, synchronous=FULL", "s", "full"),
    Metric("fanout_normal", "fan-out of async 50 ms sleeps + join, synchronous=NORMAL", "s", "normal"),
    Metric("fanout_none", "fan-out of async 50 ms sleeps + join, no persistence", "s", "none"),
    Metric(
        "rps_full", "sequential 5-step runs, new run id each, synchronous=FULL", "runs/s", "full", higher_is_better=True
    ),
    Metric("rps_none", "sequential 5-step runs, new run id each, no persistence", "runs/s", "none",
           higher_is_better=True),
    Metric("bytes_full", "database growth per persisted step of the chain", "bytes/step", "full"),
    *MAP_METRICS,
    *MEMORY_METRICS,
]


@dataclass(frozen=True)
class Target:
    """A goal read off the tables: ``engine``'s metric over ``baseline``'s (or over a constant), per round."""

    goal: str
    metric: str
    engine: str
    baseline: str | float
    limit: float
    at_least: bool = False
    baseline_metric: str | None = None
    """The baseline's metric when it is not ``metric`` (ours' map over ours' static fan-out)."""


ASYNC, SYNC, INLINE, RAW = "ours (async steps)", "ours (sync steps)", "ours (inline sync steps)", "raw sqlite3"
MAP_ENGINES = (ASYNC, "LangGraph", "Hamilton")
"""The engines the map workloads run on: ours with async steps, and the peers' own dynamic maps."""
MEMORY_JOBS = {"ours, SQLite store (synchronous=NORMAL, the default)": "sqlite",
               "ours, memory:// store": "memory"}
"""Rows of the memory table: each round runs one fresh interpreter per store."""
MEMORY_LIMIT_MB = 200.0
SYNC_FULL = Target("sync steps at FULL: µs/step at most 1.5x the raw floor", "chain_full", SYNC, RAW, 1.5)
RUNS_FULL = Target("async 5-step runs/s at FULL: at least 0.8x the raw floor's", "rps_full", ASYNC, RAW, 0.8,
                   at_least=True)
NORMAL = Target("async steps at NORMAL: µs/step at most 1.5x the raw floor", "chain_normal", ASYNC, RAW, 1.5)
FANOUT = Target("fan-out at default concurrency: within 1.1x of one 50 ms sleep", "fanout", ASYNC, SLEEP, 1.1)
TARGETS = [
    Target("async steps at FULL: µs/step at most 1.2x the raw INSERT+COMMIT floor", "chain_full", ASYNC, RAW, 1.2),
    SYNC_FULL,
    Target("sync steps with inline: true at FULL: at most 1.5x the raw floor", "chain_full", INLINE, RAW, 1.5),
    RUNS_FULL,
    Target("sync 5-step runs/s at FULL: at least 0.8x the raw floor's", "rps_full", SYNC, RAW, 0.8, at_least=True),
    NORMAL,
    Target("sync steps at NORMAL: µs/step at most 1.5x the raw floor", "chain_normal", SYNC, RAW, 1.5),
    FANOUT,
    Target("same, at the store's default synchronous=NORMAL", "fanout_normal", ASYNC, SLEEP, 1.1),
    Target("no persistence (memory:// store): at most 2x Hamilton's µs/step", "chain_none", ASYNC, "Hamilton", 2.0),
    Target("bytes per small step: at most 200 (ratio column: bytes / 200)", "bytes_full", ASYNC, 1.0, 200.0),
]


MAP_TARGETS = [
    *(Target(f"map at {LEVEL_TITLES[level]}: µs/item at most 1.2x the static fan-out's", f"map_{level}", ASYNC,
             ASYNC, 1.2, baseline_metric=f"static_{level}") for level in ("full", "normal", "none")),
    *(Target(f"peak RSS of one --memory-items map, {job}: under {MEMORY_LIMIT_MB:.0f} MB (ratio column: MB)",
             "rss_peak", job, 1.0, MEMORY_LIMIT_MB) for job in MEMORY_JOBS),
]


# -- the worker: one engine, one round, in its own process ------------------------------------


def _cell(fn: Any, *args: Any, caveat: str = "") -> dict[str, Any]:
    """A number (with what differs from the asked setting), or why there is none; never raises,
    so one workload cannot sink the others."""
    try:
        gc.collect()
        value = float(fn(*args))
        return {"value": value, "note": caveat} if caveat else {"value": value}
    except Unsupported as exc:
        return {"na": str(exc)}
    except Exception as exc:  # an engine bug or an API change: reported in the cell
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"}


def worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every workload of one engine in the groups asked for: each level in a fresh temp dir, a short
    warm-up first."""
    out: dict[str, Any] = {"name": name, "durability": {}, "results": {}}
    try:
        engine: Engine = make(name)
    except NotInstalled as exc:
        out["missing"] = str(exc)
        return out
    out["version"] = engine.version()
    out["stock"] = engine.stock
    if "steps" in args.workloads:
        step_workloads(engine, out, args.chain, args.width, args.runs_seconds, args.warmup)
    if "map" in args.workloads and name in MAP_ENGINES:
        map_workloads(engine, out, args.items, args.map_repeats)
    return out


def levels(engine: Engine, out: dict[str, Any], first: str) -> Iterator[Level]:
    """Each level the engine can be set up at, in a fresh temp dir, torn down after the caller's
    workloads; a level it cannot take is reported in the ``first`` workload's cell."""
    level: Level
    for level in ("full", "normal", "none"):
        with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
            try:
                out["durability"][level] = engine.setup(Path(tmp), level)
            except Unsupported as exc:
                out["results"][f"{first}_{level}"] = {"na": str(exc)}
                continue
            except Exception as exc:
                out["results"][f"{first}_{level}"] = {"error": f"setup: {type(exc).__name__}: {exc}"[:200]}
                continue
            try:
                yield level
            finally:
                engine.teardown()


def map_workloads(engine: Engine, out: dict[str, Any], items: int, repeats: int) -> None:
    """The map of ``items`` no-op items (and, for ours, the static fan-out of as many steps) at each
    level, after a 20-item warm-up of each: ``repeats`` times, map and fan-out alternating in a random
    order (so neither always runs on the warmer process), the median kept."""
    for level in levels(engine, out, "map"):
        pairs = [("map", engine.map_us_per_item), ("static", engine.static_fanout_us_per_item)]
        random.shuffle(pairs)
        for _, measure in pairs:
            _cell(measure, 20)
        cells: dict[str, list[dict[str, Any]]] = {kind: [] for kind, _ in pairs}
        for _ in range(repeats):
            for kind, measure in pairs:
                cells[kind].append(_cell(measure, items, caveat=engine.caveat(kind)))
        for kind, got in cells.items():
            out["results"][f"{kind}_{level}"] = _median_cell(got)


def _median_cell(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of the cells that hold a number (with their note), else the first cell's reason."""
    values = [c["value"] for c in cells if "value" in c]
    if not values:
        return cells[0]
    return {**next(c for c in cells if "value" in c), "value": statistics.median(values)}


def step_workloads(engine: Engine, out: dict[str, Any], chain: int, width: int, runs_seconds: float,
                   warmup: int) -> None:
    """The chain, fan-out, runs/s and bytes workloads at each level."""
    for level in levels(engine, out, "chain"):
        _cell(engine.chain_us_per_step, warmup)  # imports, caches, prepared statements
        out["results"][f"chain_{level}"] = _cell(engine.chain_us_per_step, chain)
        _cell(engine.fanout_seconds, min(width, 4))
        fanout = "fanout" if level == "full" else f"fanout_{level}"
        out["results"][fanout] = _cell(engine.fanout_seconds, width, caveat=engine.caveat("fanout"))
        if level != "normal":
            out["results"][f"rps_{level}"] = _cell(engine.runs_per_second, runs_seconds)
        if level == "full":
            out["results"]["bytes_full"] = _cell(engine.bytes_per_step, chain)


def memory_worker(store: str, items: int) -> dict[str, Any]:
    """Peak RSS of one ``items``-item map of ours in this (fresh) process, and the RSS it had before:
    after the imports and a 10-item map on the same store."""
    from engines.ours import map_workflow

    from orchestrator import open_store, start_run

    with tempfile.TemporaryDirectory(prefix="bench-peers-rss-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'ours.db'}" if store == "sqlite" else "memory://"
        db = open_store(url)
        start_run(db, map_workflow(10), {"x": 10})
        before = _max_rss_mb()
        t = time.perf_counter()
        result = start_run(db, map_workflow(items), {"x": items})
        elapsed = time.perf_counter() - t
        if result.status != "succeeded" or result.output != items:
            raise RuntimeError(f"the map ended {result.status}: {result.error or result.output}")
        return {"rss_base": {"value": before}, "rss_peak": {"value": _max_rss_mb()},
                "seconds": elapsed}


def _max_rss_mb() -> float:
    """This process's peak resident set so far (``ru_maxrss`` is in KiB on Linux), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def run_worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run :func:`worker` for ``name`` (or :func:`memory_worker` for a row of :data:`MEMORY_JOBS`) in a
    subprocess and read its JSON line back."""
    job = ["--memory-worker", MEMORY_JOBS[name]] if name in MEMORY_JOBS else ["--worker", name]
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        *job,
        "--workloads",
        ",".join(args.workloads),
        "--items",
        str(args.items),
        "--memory-items",
        str(args.memory_items),
        "--map-repeats",
        str(args.map_repeats),
        "--chain",
        str(args.chain),
        "--width",
        str(args.width),
        "--runs-seconds",
        str(args.runs_seconds),
        "--warmup",
        str(args.warmup),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT, env={**os.environ, "PYTHONHASHSEED": "0"}
        )
    except subprocess.TimeoutExpired:
        return {"name": name, "crashed": f"timed out after {WORKER_TIMEOUT:.0f} s", "results": {}}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "crashed": f"exit {proc.returncode}: {tail[:200]}", "results": {}}


# -- the parent: rounds, medians, ratios, tables -----------------------------------------------


@dataclass
class Collected:
    """Everything known about one engine after all rounds."""

    name: str
    version: str = ""
    stock: str = ""
    missing: str = ""
    durability: dict[str, str] = field(default_factory=dict)
    values: dict[str, list[float | None]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    caveats: dict[str, str] = field(default_factory=dict)


def collect(rounds: list[dict[str, dict[str, Any]]], names: list[str]) -> dict[str, Collected]:
    """Fold the per-round worker outputs into per-engine series, aligned by round."""
    table = {n: Collected(n) for n in names}
    for per_round in rounds:
        for name in names:
            got, c = per_round[name], table[name]
            if "missing" in got:
                c.missing = got["missing"]
            c.version = got.get("version", c.version)
            c.stock = got.get("stock", c.stock)
            c.durability.update(got.get("durability", {}))
            for m in METRICS:
                cell = got.get("results", {}).get(m.key)
                series = c.values.setdefault(m.key, [])
                if cell and "value" in cell:
                    series.append(cell["value"])
                    if cell.get("note"):
                        c.caveats[m.key] = cell["note"]
                    continue
                series.append(None)
                if "crashed" in got:
                    c.notes.setdefault(m.key, f"crashed: {got['crashed']}")
                elif cell:
                    c.notes.setdefault(m.key, cell.get("na") or f"error: {cell.get('error')}")
    return table


def fmt(value: float, unit: str) -> str:
    """Enough digits to compare, no more."""
    if unit == "s":
        return f"{value:.3f} s"
    if value >= 100:
        return f"{value:.0f} {unit}"
    return f"{value:.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"


def render(table: dict[str, Collected], names: list[str], args: argparse.Namespace, elapsed: float) -> str:
    """The markdown report: versions and durability, then one table per workload."""
    ref = table[args.reference]
    lines = [
        "# Peer benchmark: our orchestrator beside LangGraph, Burr, Hamilton, DBOS and raw sqlite3",
        "",
        f"Written by `benchmarks/peers/run.py` on {_dt.date.today().isoformat()}: {args.rounds} interleaved rounds, "
        f"chain of {args.chain} steps, fan-out width {args.width}, runs/s measured for {args.runs_seconds:g} s; "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{elapsed:.0f} s in all.",
        "",
        f"Each cell is the median over rounds. *ratio* is engine ÷ {args.reference}, taken per round; the median "
        "is shown with the min-max of the per-round ratios. For µs/step and seconds lower is better; "
        "for runs/s higher is better. Levels are never compared with each other.",
        "",
        "## Engines and durability",
        "",
        *durability_table(table, names),
    ]
    for m in METRICS:
        if m.group != "steps":
            continue
        lines += [
            "",
            f"## {m.title} ({m.unit})",
            "",
            "| engine | median | ratio to ours | spread of ratio |",
            "|---|---|---|---|",
        ]
        ref_series = ref.values.get(m.key, [])
        lines += [metric_row(n, table[n], m.key, m.unit, ref_series) for n in names]
    lines += render_targets(table)
    lines += render_allowances(table)
    return "\n".join(lines) + "\n"


def durability_table(table: dict[str, Collected], names: list[str] | tuple[str, ...]) -> list[str]:
    """Each engine's version, the durability each level really ran at, and its stock setting."""
    lines = ["| engine | version | FULL run as | NORMAL run as | no persistence | stock setting |",
             "|---|---|---|---|---|---|"]
    for n in names:
        c = table[n]
        if c.missing:
            lines.append(f"| {n} | {c.missing} | | | | |")
            continue
        d = c.durability
        lines.append(
            f"| {n} | {c.version} | {d.get('full', 'n/a')} | {d.get('normal', 'n/a')} | "
            f"{d.get('none', 'n/a')} | {c.stock} |"
        )
    return lines


def metric_row(label: str, c: Collected, key: str, unit: str, ref_series: list[float | None]) -> str:
    """One table row: ``c``'s median of ``key``, and its per-round ratio to ``ref_series`` (median, min-max)."""
    if c.missing:
        return f"| {label} | {c.missing} | | |"
    series = c.values.get(key, [])
    got = [v for v in series if v is not None]
    if not got:
        return f"| {label} | n/a ({c.notes.get(key, 'not measured')}) | | |"
    ratios = [v / r for v, r in zip(series, ref_series, strict=False) if v is not None and r]
    median = fmt(statistics.median(got), unit)
    if key in c.caveats:
        median += f" ({c.caveats[key]})"
    if len(got) < len(series):
        median += f" ({len(got)}/{len(series)} rounds; {c.notes.get(key, '')})"
    if not ratios:
        return f"| {label} | {median} | n/a | |"
    spread = f"{min(ratios):.2f}x - {max(ratios):.2f}x"
    return f"| {label} | {median} | {statistics.median(ratios):.2f}x | {spread} |"


MAP_ROWS = [
    ("ours, `for_each:` map (async steps)", ASYNC, "map"),
    ("ours, the same items as a static fan-out of steps (async steps)", ASYNC, "static"),
    ("LangGraph, `Send` map-reduce", "LangGraph", "map"),
    ("Hamilton, `Parallelizable`/`Collect`", "Hamilton", "map"),
]
"""The map tables' rows: (label, engine, metric kind)."""


def render_map(table: dict[str, Collected], args: argparse.Namespace, elapsed: float,
               load: tuple[float, float]) -> str:
    """The map workloads' part of the report: durability, one table per level, memory, targets."""
    n = args.items
    lines = [
        "## Maps: one instance per item of a list known only at run time",
        "",
        f"Written by `benchmarks/peers/run.py --workloads map` on {_dt.date.today().isoformat()}: "
        f"{args.rounds} interleaved rounds, maps of {n} items (each round's value the median of "
        f"{args.map_repeats} runs), memory of a {args.memory_items}-item map; "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{elapsed:.0f} s in all; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end.",
        "",
        "Every engine runs the same map: a step returns the list `0 .. n-1`, one no-op instance per item "
        "returns its item (its result persisted at the level asked), one step counts the collected outputs; "
        "µs/item is the run's wall time over n. Ours maps with `for_each:` (async steps, default concurrency), "
        "and runs the same work as a static fan-out of n steps written in the workflow; LangGraph sends one "
        "`Send` per item from a conditional edge to a node whose outputs an `operator.add` reducer collects "
        "(`durability='sync'`); Hamilton yields the items from a `Parallelizable` node into a `Collect`, on "
        "its cache. Each cell is the median over rounds; *ratio* is the row ÷ ours' map, taken per round "
        "(median, and min-max over rounds).",
        "",
        *durability_table(table, [e for e in MAP_ENGINES if e in table]),
    ]
    for level in ("full", "normal", "none"):
        lines += ["", f"### {n} items, {LEVEL_TITLES[level]} (µs/item)", "",
                  "| engine | median | ratio to ours' map | spread of ratio |", "|---|---|---|---|"]
        ref_series = table[ASYNC].values.get(f"map_{level}", []) if ASYNC in table else []
        lines += [metric_row(label, table[engine], f"{kind}_{level}", "µs/item", ref_series)
                  for label, engine, kind in MAP_ROWS if engine in table]
    lines += ["", f"### Peak RSS of one {args.memory_items}-item map of ours, each in a fresh interpreter (MB)", "",
              "| store | peak RSS (median) | min - max | before the map (after imports and a 10-item map) |",
              "|---|---|---|---|"]
    for job in (j for j in MEMORY_JOBS if j in table):
        peaks = [v for v in table[job].values.get("rss_peak", []) if v is not None]
        bases = [v for v in table[job].values.get("rss_base", []) if v is not None]
        if not peaks:
            lines.append(f"| {job} | n/a ({table[job].notes.get('rss_peak', 'not measured')}) | | |")
            continue
        lines.append(f"| {job} | {statistics.median(peaks):.0f} MB | {min(peaks):.0f} - {max(peaks):.0f} MB | "
                     f"{statistics.median(bases):.0f} MB |")
    lines += render_targets(table, MAP_TARGETS, "Map targets")
    return "\n".join(lines) + "\n"


def merged_results(old: str, steps: str | None, maps: str | None) -> str:
    """RESULTS.md with the parts this run measured replaced and the others kept as they were."""
    if MAP_BEGIN in old and MAP_END in old:
        head, rest = old.split(MAP_BEGIN, 1)
        old_maps = rest.split(MAP_END, 1)[0].strip("\n") + "\n"
    else:
        head, old_maps = old, ""
    text = (steps if steps is not None else head).rstrip("\n") + "\n"
    map_part = maps if maps is not None else old_maps
    if map_part.strip():
        text += f"\n{MAP_BEGIN}\n{map_part.rstrip(chr(10))}\n{MAP_END}\n"
    return text


def render_targets(table: dict[str, Collected], targets: list[Target] = TARGETS,
                   title: str = "Targets") -> list[str]:
    """Each goal as measured: the per-round ratio's median and spread, and whether the median meets it."""
    lines = ["", f"## {title}", "", "| goal | measured (median) | spread | met |", "|---|---|---|---|"]
    for target in targets:
        series = table[target.engine].values.get(target.metric, []) if target.engine in table else []
        if isinstance(target.baseline, str):
            base_metric = target.baseline_metric or target.metric
            base_series = table[target.baseline].values.get(base_metric, []) if target.baseline in table else []
        else:
            base_series = [target.baseline] * len(series)
        ratios = [v / b for v, b in zip(series, base_series, strict=False) if v is not None and b]
        if not ratios:
            lines.append(f"| {target.goal} | not measured | | |")
            continue
        median = statistics.median(ratios)
        met = median >= target.limit if target.at_least else median <= target.limit
        unit = "" if not isinstance(target.baseline, str) and target.baseline == 1.0 else "x"
        lines.append(f"| {target.goal} | {median:.2f}{unit} | {min(ratios):.2f}{unit} - {max(ratios):.2f}{unit} | "
                     f"{'yes' if met else 'no'} |")
    return lines


@dataclass(frozen=True)
class Allowance:
    """A target read as a budget, beside what ``engines`` spend on ``spent_metric`` with no persistence."""

    name: str
    target: Target
    spent_metric: str
    engines: tuple[str, ...]

    def label(self) -> str:
        return f"{self.name}, {'at least' if self.target.at_least else 'at most'} {self.target.limit:g}x"


ALLOWANCES = [
    Allowance("steps at NORMAL", NORMAL, "chain_none", (ASYNC, SYNC, INLINE, "Hamilton", "Burr")),
    Allowance("sync steps at FULL", SYNC_FULL, "chain_none", (SYNC, INLINE)),
    Allowance("5-step runs/s at FULL", RUNS_FULL, "rps_none", (ASYNC, SYNC, INLINE, "Hamilton", "Burr", "LangGraph")),
    Allowance("fan-out beyond the sleep", FANOUT, "fanout_none", (ASYNC, RAW, "Hamilton", "Burr", "LangGraph")),
]


def median_of(table: dict[str, Collected], engine: str, metric: str) -> float | None:
    got = [v for v in table[engine].values.get(metric, []) if v is not None] if engine in table else []
    return statistics.median(got) if got else None


def budget_unit(target: Target) -> str:
    """What a budget is counted in: µs per run for a rate, ms beyond a constant baseline (the fan-out's
    sleep), else the metric's own unit."""
    if target.at_least:
        return "µs/run"
    if not isinstance(target.baseline, str):
        return "ms"
    return next(m.unit for m in METRICS if m.key == target.metric)


def in_budget_unit(target: Target, value: float) -> float:
    """A measured value of ``target``'s metric as a cost in :func:`budget_unit`."""
    if target.at_least:
        return 1e6 / value
    if not isinstance(target.baseline, str):
        return (value - target.baseline) * 1e3
    return value


def left_by(target: Target, table: dict[str, Collected]) -> float | None:
    """What ``target`` leaves beyond its baseline's own cost, in :func:`budget_unit`: the baseline's
    cost times the ratio, less the baseline's cost (for a rate, times one over the ratio)."""
    if isinstance(target.baseline, str):
        base = median_of(table, target.baseline, target.metric)
        if base is None:
            return None
        cost = in_budget_unit(target, base)
    else:
        cost = target.baseline * 1e3  # the sleep itself, in ms
    return (1 / target.limit - 1 if target.at_least else target.limit - 1) * cost


def render_allowances(table: dict[str, Collected]) -> list[str]:
    """Each target read as a budget: whether an engine's no-persistence cost (its in-memory bookkeeping
    included) alone already exceeds what the target leaves, whatever its store does."""
    lines = [
        "",
        "## What each target leaves beyond the floor's own work",
        "",
        "The floor's cost times the target's ratio, less the floor's cost, is all an engine may spend on "
        "everything but the floor's writes (its scheduling, its bookkeeping, its thread hand-offs, the "
        "part of its writes the floor does not make). With no persistence an engine spends at least "
        "that much on those, so where its no-persistence cost alone exceeds the allowance, the target "
        "is out of its reach whatever its store does. Medians of the rounds above.",
        "",
        "| target | left | engine | spent with no persistence | fits |",
        "|---|---|---|---|---|",
    ]
    for a in ALLOWANCES:
        target, unit = a.target, budget_unit(a.target)
        left = left_by(target, table)
        shown_left = "n/a" if left is None else fmt(left, unit)
        for engine in a.engines:
            value = median_of(table, engine, a.spent_metric)
            if value is None:
                lines.append(f"| {a.label()} | {shown_left} | {engine} | n/a | |")
                continue
            spent = in_budget_unit(target, value)
            fits = "" if left is None else ("yes" if spent <= left else "no")
            lines.append(f"| {a.label()} | {shown_left} | {engine} | {fmt(spent, unit)} | {fits} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--chain", type=int, default=1000, help="chain length (default 1000)")
    parser.add_argument("--width", type=int, default=100, help="fan-out width (default 100)")
    parser.add_argument("--runs-seconds", type=float, default=2.0, help="seconds per runs/s measurement")
    parser.add_argument("--warmup", type=int, default=50, help="warm-up chain length before each measurement")
    parser.add_argument("--items", type=int, default=1000, help="items of the map workloads (default 1000)")
    parser.add_argument("--map-repeats", type=int, default=3,
                        help="maps measured per engine, level and round, the median kept (default 3)")
    parser.add_argument("--memory-items", type=int, default=10_000,
                        help="items of the map whose peak RSS is measured (default 10000)")
    parser.add_argument("--workloads", default="steps,map", type=lambda text: [w.strip() for w in text.split(",")],
                        help="comma-separated groups: steps (chain, fan-out, runs/s, bytes), map (default both)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 2 rounds, chain 200, runs/s for 0.5 s, maps of 200 and 1000 items")
    parser.add_argument("--engines", help="comma-separated subset of: " + ", ".join(REGISTRY))
    parser.add_argument("--reference", default=REFERENCE, help=f"engine the ratios are to (default {REFERENCE!r})")
    parser.add_argument("--seed", type=int, default=None, help="seed the round shuffles")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return 0
    if args.memory_worker:
        print(json.dumps({"name": args.memory_worker, "results": memory_worker(args.memory_worker,
                                                                                args.memory_items)}))
        return 0
    unknown_groups = [w for w in args.workloads if w not in ("steps", "map")]
    if unknown_groups:
        parser.error(f"unknown workloads {unknown_groups[0]!r}; choose from steps, map")
    if args.quick:
        args.rounds, args.chain, args.runs_seconds, args.warmup = 2, 200, 0.5, 20
        args.items, args.memory_items, args.map_repeats = 200, 1000, 1
    names = [n.strip() for n in args.engines.split(",")] if args.engines else list(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        parser.error(f"unknown engine {unknown[0]!r}; choose from {', '.join(REGISTRY)}")
    if args.reference not in REGISTRY:
        parser.error(f"unknown reference engine {args.reference!r}")
    if "steps" not in args.workloads:
        names = [n for n in names if n in MAP_ENGINES]
    elif args.reference not in names:
        names.insert(0, args.reference)
    if "map" in args.workloads and not args.engines:
        names += [n for n in MAP_ENGINES if n not in names]
    jobs = names + (list(MEMORY_JOBS) if "map" in args.workloads else [])
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    rounds: list[dict[str, dict[str, Any]]] = []
    for r in range(1, args.rounds + 1):
        order = jobs[:]
        rng.shuffle(order)
        per_round: dict[str, dict[str, Any]] = {}
        for name in order:
            t = time.perf_counter()
            per_round[name] = got = run_worker(name, args)
            status = got.get("missing") or got.get("crashed") or "ok"
            print(f"round {r}/{args.rounds}: {name:<20} {time.perf_counter() - t:5.1f} s  {status}", flush=True)
        rounds.append(per_round)
    table = collect(rounds, jobs)
    elapsed = time.perf_counter() - t0
    steps = render(table, names, args, elapsed) if "steps" in args.workloads else None
    maps = (render_map(table, args, elapsed, (load_at_start, os.getloadavg()[0]))
            if "map" in args.workloads else None)
    report = merged_results(RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "", steps, maps)
    print()
    print(report)
    if not args.no_write:
        RESULTS.write_text(report, encoding="utf-8")
        print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
