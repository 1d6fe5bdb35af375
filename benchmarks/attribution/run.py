"""Attribution accuracy on controlled bifurcation tasks: top-1 / top-3 and replay cost per method.

    .venv/bin/python benchmarks/attribution/run.py            # full grid, writes RESULTS.md
    .venv/bin/python benchmarks/attribution/run.py --quick    # a small grid, prints only
    .venv/bin/python benchmarks/attribution/run.py --families-only   # only families.py; rewrites their section

Each task (see generate.py) is run once through the real executor into a scratch SQLite store,
then attributed with every method. A method is right at top-1 when its blamed step is the
injected fault, and at top-3 when the fault is among its three most blamed candidates. For
``shapley --by agent`` the unit is the faulty step's agent. Cost is the number of step
executions the method paid for (replays reuse recorded outputs and cache identical
sub-executions, so it is far below replays x steps).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from families import FAMILIES  # noqa: E402
from generate import COVERAGES, FAILURES, Task, generate  # noqa: E402

from orchestrator.attribution.methods import attribute  # noqa: E402
from orchestrator.service.runner import start_run  # noqa: E402
from orchestrator.store import Store, open_store  # noqa: E402

METHODS = (("trace", "step"), ("counterfactual", "step"), ("difference", "step"), ("shapley", "step"),
           ("shapley", "agent"))
SIZES = (5, 8, 12, 20, 50, 100)
SAMPLES = 16
FAMILY_SIZES = (8, 12, 20, 50)
FAMILY_SEEDS = 3
FAMILIES_BEGIN, FAMILIES_END = "<!-- families: begin -->", "<!-- families: end -->"
"""RESULTS.md markers around the families section, so ``--families-only`` can rewrite just that part."""


@dataclass
class Row:
    task: Task
    method: str
    top1: bool
    top3: bool
    cost: int
    seconds: float
    confidence: float


def label(method: str, by: str) -> str:
    return method if by == "step" else f"{method} --by {by}"


def evaluate(task: Task, store: Store, samples: int, run_id: str | None = None) -> list[Row]:
    """Attribute one task's run (``run_id``, else a fresh run) with every method."""
    if run_id is None:
        run_id = start_run(store, task.workflow, {}).run_id
    rows = []
    for method, by in METHODS:
        started = time.perf_counter()
        result = attribute(store, run_id, method, by=by, workflow=task.workflow,
                           samples=samples if method == "shapley" and task.n > 12 else None)
        seconds = time.perf_counter() - started
        if by == "agent":
            truth = task.faulty_agent
            ranked = [c.agent for c in result.candidates]
            top1 = result.blamed_step is not None and ranked[0] == truth
        else:
            truth = task.faulty
            ranked = [c.step_id for c in result.candidates]
            top1 = result.blamed_step == truth
        rows.append(Row(task, label(method, by), top1, truth in ranked[:3], result.cost, seconds,
                        result.confidence))
    return rows


def pct(values: list[bool]) -> str:
    return f"{100 * sum(values) / len(values):.0f}%" if values else "-"


def table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def render(rows: list[Row], sizes: tuple[int, ...], seeds: int, elapsed: float, extra: list[Row] = ()) -> str:
    methods = [label(m, b) for m, b in METHODS]
    by_method_cov: dict[tuple[str, str], list[Row]] = defaultdict(list)
    by_method_type: dict[tuple[str, str], list[Row]] = defaultdict(list)
    by_method_size: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        by_method_cov[(r.method, r.task.gates)].append(r)
        by_method_type[(r.method, r.task.failure)].append(r)
        by_method_size[(r.method, r.task.n)].append(r)
    tasks = len({r.task.name for r in rows})
    out = [f"{tasks} tasks: sizes {list(sizes)} x failure types {list(FAILURES)} x gate coverage "
           f"{list(COVERAGES)} x {seeds} seed(s); deterministic steps; shapley exact up to 12 players, "
           f"{SAMPLES} sampled permutations above. Total time {elapsed:.0f} s.", "",
           "Accuracy and cost by method and gate coverage (all sizes and failure types):", ""]
    body = []
    for m in methods:
        for cov in COVERAGES:
            rs = by_method_cov[(m, cov)]
            body.append([m, cov, pct([r.top1 for r in rs]), pct([r.top3 for r in rs]),
                         f"{sum(r.cost for r in rs) / len(rs):.0f}", f"{sum(r.seconds for r in rs) / len(rs):.2f}",
                         f"{sum(r.confidence for r in rs) / len(rs):.2f}"])
    out += [table(["method", "gates", "top-1", "top-3", "step executions", "seconds", "mean confidence"], body), ""]
    out += ["Top-1 by failure type (all gate coverages):", ""]
    out += [table(["method", *FAILURES], [[m, *(pct([r.top1 for r in by_method_type[(m, f)]]) for f in FAILURES)]
                                          for m in methods]), ""]
    trace_rows = [r for r in rows if r.method == "trace"]
    out += ["How `trace` degrades as gate coverage falls (top-1 / top-3 by failure type):", ""]
    body = []
    for cov in COVERAGES:
        cells = []
        for f in FAILURES:
            rs = [r for r in trace_rows if r.task.gates == cov and r.task.failure == f]
            cells.append(f"{pct([r.top1 for r in rs])} / {pct([r.top3 for r in rs])}")
        body.append([cov, *cells])
    out += [table(["gates", *FAILURES], body), ""]
    if extra:
        out += ["Without declared baselines (each step's reference is a fresh re-execution of itself), "
                f"gates on all steps, sizes {sorted({r.task.n for r in extra})}, top-1 by failure type:", ""]
        extra_methods = [label(m, b) for m, b in METHODS if m != "trace"]
        out += [table(["method", *FAILURES],
                      [[m, *(pct([r.top1 for r in extra if r.method == m and r.task.failure == f])
                             for f in FAILURES)] for m in extra_methods]), "",
                "On deterministic steps a re-execution reproduces the fault, so replay methods see no "
                "difference: they need a reference (a `baseline`, or a reviewer's edit) that behaves as the step "
                "should. `trace` is unaffected (it replays nothing).", ""]
    out += ["Mean step executions by workflow size:", ""]
    out += [table(["method", *(str(n) for n in sizes)],
                  [[m, *(f"{sum(r.cost for r in by_method_size[(m, n)]) / max(1, len(by_method_size[(m, n)])):.0f}"
                         for n in sizes)] for m in methods]), ""]
    return "\n".join(out)


def evaluate_families(store: Store, sizes: tuple[int, ...], seeds: int, samples: int) -> list[Row]:
    """Every registered family (families.py) at every size and seed, driven to its outcome, then attributed."""
    rows: list[Row] = []
    for family in FAMILIES.values():
        for n in sizes:
            for seed in range(seeds):
                made = family.make(n, seed)
                rows.extend(evaluate(made.task, store, samples, made.drive(store, made.task)))
    return rows


def render_families(rows: list[Row], sizes: tuple[int, ...], seeds: int) -> str:
    """Top-1 / top-3 per family and method, between the markers ``--families-only`` rewrites."""
    methods = [label(m, b) for m, b in METHODS]
    out = [FAMILIES_BEGIN, "", f"Task families beyond the grid (families.py), sizes {list(sizes)} x {seeds} seed(s):",
           ""]
    for family in FAMILIES.values():
        out += [f"- `{family.name}`: {family.description}."]
    out += ["", table(["family", "method", "top-1", "top-3", "step executions", "mean confidence"],
                      [[f, m, pct([r.top1 for r in rs]), pct([r.top3 for r in rs]),
                        f"{sum(r.cost for r in rs) / len(rs):.0f}", f"{sum(r.confidence for r in rs) / len(rs):.2f}"]
                       for f in FAMILIES for m in methods
                       if (rs := [r for r in rows if r.task.failure == f and r.method == m])]), "", FAMILIES_END]
    return "\n".join(out)


def splice_families(path: Path, section: str) -> None:
    """Replace the families section of RESULTS.md (or append it) and keep everything else."""
    text = path.read_text()
    if FAMILIES_BEGIN in text and FAMILIES_END in text:
        head, rest = text.split(FAMILIES_BEGIN, 1)
        text = head + section + rest.split(FAMILIES_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(n) for n in SIZES))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--quick", action="store_true", help="sizes 5,8,20 and one seed; print only")
    parser.add_argument("--output", default=str(Path(__file__).parent / "RESULTS.md"))
    parser.add_argument("--families-only", action="store_true",
                        help="run only the task families and rewrite their section of the output file")
    args = parser.parse_args(argv)
    sizes = (5, 8, 20) if args.quick else tuple(int(s) for s in args.sizes.split(","))
    seeds = 1 if args.quick else args.seeds
    family_sizes = (8, 12) if args.quick else FAMILY_SIZES
    family_seeds = 1 if args.quick else FAMILY_SEEDS
    if args.families_only:
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{tmp}/bench.db")
            section = render_families(evaluate_families(store, family_sizes, family_seeds, args.samples),
                                      family_sizes, family_seeds)
            store.close()
        print(section)
        if not args.quick:
            splice_families(Path(args.output), section)
        return 0
    rows: list[Row] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        for n in sizes:
            for failure in FAILURES:
                for cov in COVERAGES:
                    for seed in range(seeds):
                        rows.extend(evaluate(generate(n, failure, cov, seed), store, args.samples))
            print(f"  size {n} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        extra: list[Row] = []
        for n in [n for n in sizes if n <= 20]:
            for failure in FAILURES:
                extra.extend(evaluate(generate(n, failure, "all", 0, baselines=False), store, args.samples))
        family_rows = evaluate_families(store, family_sizes, family_seeds, args.samples)
        store.close()
    text = render(rows, sizes, seeds, time.perf_counter() - started, extra)
    text += "\n" + render_families(family_rows, family_sizes, family_seeds) + "\n"
    print(text)
    if not args.quick:
        Path(args.output).write_text("# Attribution accuracy on controlled bifurcation tasks\n\n"
                                     "Generated by `.venv/bin/python benchmarks/attribution/run.py`; see "
                                     "generate.py for the tasks.\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
