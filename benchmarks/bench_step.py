"""What one persisted step costs: µs per step of a 1000-step chain, through ``start_run`` and through
``start_run_async``, at ``synchronous=FULL``, at ``NORMAL`` and on ``memory://``, in process CPU time and
in wall time.

Run it as ``.venv/bin/python benchmarks/bench_step.py [--chain 1000] [--rounds 5] [--runs 3]
[--steps async|sync] [--levels full,normal,memory] [--apis start_run,start_run_async]
[--compare OTHER_TREE]``. Each round measures every cell in a fresh interpreter (one per tree and
round), ``--runs`` chains per cell after one warm-up chain, keeping the median; the two APIs alternate
run by run, each on a store of its own. With ``--compare`` the same rounds run against another
checkout of the project (the tree before a change), alternating which tree goes first round by
round, and each cell is printed for both trees with their ratio.

Why CPU time: the machine this runs on is shared; under a neighbour's load wall time swings by several
times where process CPU time (every thread of the process, so a store call handed to a worker thread
counts too) stays within about 10%. The async API's ratio to the blocking one is the price of running on
a caller's loop: each store call of ``start_run_async`` may be handed to a thread.

Wall-clock numbers belong here, never in pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LEVELS = ("full", "normal", "memory")
APIS = ("start_run", "start_run_async")

CELL = r'''
import gc, json, sys, tempfile, time
from pathlib import Path
import anyio
from orchestrator import Workflow, open_store, start_run
from orchestrator.service.runner import start_run_async

chain, runs, steps, levels, apis = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4].split(","), \
    sys.argv[5].split(",")

def inc(value):
    return value + 1

async def ainc(value):
    return value + 1

def workflow(n):
    wf = Workflow(f"bench-step-{n}", inputs={"x": "integer"}, output=f"s{n - 1}")
    fn = ainc if steps == "async" else inc
    wf.step(id="s0", inputs={"value": "$inputs.x"})(fn)
    for i in range(1, n):
        wf.step(id=f"s{i}", inputs={"value": f"s{i - 1}"})(fn)
    return wf.bind()

def one(store, bound, x, api):
    if api == "start_run":
        return start_run(store, bound, {"x": x})
    async def main():
        return await start_run_async(store, bound, {"x": x})
    return anyio.run(main)

out = {}
with tempfile.TemporaryDirectory() as tmp:
    bound, small = workflow(chain), workflow(5)
    for level in levels:
        stores = {api: open_store("memory://" if level == "memory" else
                                  f"sqlite:///{Path(tmp) / level}-{api}.db?synchronous={level}") for api in apis}
        try:
            for api in apis:  # imports, statements, the workflow rows
                one(stores[api], small, -1, api)
                one(stores[api], bound, -1, api)
            cpu, wall = {api: [] for api in apis}, {api: [] for api in apis}
            for x in range(runs):  # the APIs in alternation, which goes first alternating too
                for api in apis if x % 2 == 0 else apis[::-1]:
                    gc.collect()
                    c, w = time.process_time(), time.perf_counter()
                    result = one(stores[api], bound, x, api)
                    cpu[api].append((time.process_time() - c) / chain * 1e6)
                    wall[api].append((time.perf_counter() - w) / chain * 1e6)
                    assert result.status == "succeeded" and result.output == x + chain, result
        finally:
            for store in stores.values():
                store.close()
        for api in apis:
            out[f"{level} {api}"] = {"cpu": sorted(cpu[api])[runs // 2], "wall": sorted(wall[api])[runs // 2]}
print(json.dumps(out))
'''


def measure(tree: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One round of every cell, in a fresh interpreter importing the project from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-c", CELL, str(args.chain), str(args.runs), args.steps,
                               ",".join(args.levels), ",".join(args.apis)],
                              env=env, cwd=tmp, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{tree}: the measurement failed:\n{done.stderr}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def median(rounds: list[dict[str, dict[str, float]]], cell: str, what: str) -> float:
    return statistics.median(r[cell][what] for r in rounds)


def async_ratio(rounds: list[dict[str, dict[str, float]]], level: str) -> float:
    """CPU per step of ``start_run_async`` over that of ``start_run``."""
    return median(rounds, f"{level} start_run_async", "cpu") / median(rounds, f"{level} start_run", "cpu")


def table(trees: dict[str, list[dict[str, dict[str, float]]]], args: argparse.Namespace) -> list[str]:
    names = list(trees)
    lines = [f"chain of {args.chain} {args.steps} steps, {args.rounds} rounds, median of {args.runs} runs per round; "
             "µs per step, CPU (wall)"]
    if len(names) == 1 and len(args.apis) == 2:
        (rounds,) = trees.values()
        lines += ["| level | start_run | start_run_async | async/sync CPU | async/sync wall |",
                  "|---|---:|---:|---:|---:|"]
        for level in args.levels:
            s, a = f"{level} start_run", f"{level} start_run_async"
            lines.append(f"| {level} | {median(rounds, s, 'cpu'):.1f} ({median(rounds, s, 'wall'):.1f}) "
                         f"| {median(rounds, a, 'cpu'):.1f} ({median(rounds, a, 'wall'):.1f}) "
                         f"| {median(rounds, a, 'cpu') / median(rounds, s, 'cpu'):.2f}x "
                         f"| {median(rounds, a, 'wall') / median(rounds, s, 'wall'):.2f}x |")
        return lines
    old, new = names if len(names) == 2 else (names[0], names[0])
    lines += [f"| level | API | {old} CPU | {new} CPU | CPU {new}/{old} | {old} wall | {new} wall | wall {new}/{old} |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for level in args.levels:
        for api in args.apis:
            cell = f"{level} {api}"
            row = [level, api]
            for what in ("cpu", "wall"):
                before, after = median(trees[old], cell, what), median(trees[new], cell, what)
                row += [f"{before:.1f}", f"{after:.1f}", f"{after / before:.2f}x"]
            lines.append("| " + " | ".join(row) + " |")
    for name in names if len(args.apis) == 2 else ():
        ratios = [f"{level} {async_ratio(trees[name], level):.2f}x" for level in args.levels]
        lines.append(f"\nstart_run_async / start_run CPU, {name}: " + ", ".join(ratios))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chain", type=int, default=1000, help="steps in the chain (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; medians reported (default 5)")
    parser.add_argument("--runs", type=int, default=3, help="chains per cell and round; their median (default 3)")
    parser.add_argument("--steps", choices=("async", "sync"), default="async",
                        help="async step functions (on the loop) or sync ones (on a worker thread)")
    parser.add_argument("--levels", default=",".join(LEVELS), type=lambda text: text.split(","),
                        help="which of full,normal,memory to measure (default all three)")
    parser.add_argument("--apis", default=",".join(APIS), type=lambda text: text.split(","),
                        help="which of start_run,start_run_async to measure (default both)")
    parser.add_argument("--compare", type=Path, help="another checkout of the project, measured in alternation")
    args = parser.parse_args(argv)
    trees = {"this tree": ROOT} if args.compare is None else {"other": args.compare.resolve(), "this": ROOT}
    results: dict[str, list[Any]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            results[name].append(measure(trees[name], args))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print("\n".join(table(results, args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
