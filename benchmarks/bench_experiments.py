"""What reusing unchanged steps saves an experiment: 1 000 examples on a 5-step workflow whose last step changed.

Run it as ``.venv/bin/python benchmarks/bench_experiments.py [--examples 1000] [--parallel 4] [--db URL]``.
It stores one run per example of ``v1`` (five Python steps in a chain, no model), makes a dataset of
those runs, then runs the experiment of ``v2``, where only the last step's function changed, twice on
the same dataset: ``--reuse unchanged`` (the default: the four upstream steps' recorded outputs are
copied, only the last step executes) and ``--reuse none`` (every step executes), after one small
experiment of each kind as a warm-up. It prints, per
mode, the step executions counted inside the step functions, the executions and model calls the
experiment reports, what reuse says it saved, and wall and process CPU time, with their ratios.

The steps are trivial on purpose: what is measured is the orchestrator's cost per step execution
(recording it, or copying a recorded one), the part reuse can remove. A step that calls a model or
does real work saves that work on top. Wall-clock numbers belong here, never in pytest.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator import Workflow
from orchestrator.api import Orchestrator

EXECUTIONS: dict[str, int] = {}
_LOCK = threading.Lock()


def _count(step: str) -> None:
    with _LOCK:
        EXECUTIONS[step] = EXECUTIONS.get(step, 0) + 1


def parse(x: int) -> dict[str, int]:
    _count("parse")
    return {"x": x}


def enrich(parse: dict[str, int]) -> dict[str, int]:
    _count("enrich")
    return {**parse, "square": parse["x"] ** 2}


def score_item(enrich: dict[str, int]) -> dict[str, int]:
    _count("score")
    return {**enrich, "score": enrich["square"] % 97}


def decide(score: dict[str, int]) -> dict[str, Any]:
    _count("decide")
    return {**score, "keep": score["score"] > 40}


def report_v1(decide: dict[str, Any]) -> str:
    _count("report")
    return f"{decide['x']}: {'kept' if decide['keep'] else 'dropped'}"


def report_v2(decide: dict[str, Any]) -> str:
    """The changed last step: a different function, so a different version hash."""
    _count("report")
    return f"item {decide['x']} {'kept' if decide['keep'] else 'dropped'} (score {decide['score']})"


def workflow(report: Any) -> Workflow:
    wf = Workflow("bench-experiments", inputs={"x": "integer"}, output="report")
    wf.step(id="parse", inputs={"x": "$inputs.x"})(parse)
    wf.step(id="enrich", inputs={"parse": "parse"})(enrich)
    wf.step(id="score", inputs={"enrich": "enrich"})(score_item)
    wf.step(id="decide", inputs={"score": "score"})(decide)
    wf.step(id="report", inputs={"decide": "decide"})(report)
    return wf


def measure(orch: Orchestrator, v2: Workflow, dataset: str, reuse: str, parallel: int) -> dict[str, Any]:
    EXECUTIONS.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    detail = orch.experiment(v2, dataset, name=f"{dataset}-{reuse}", parallel=parallel, reuse=reuse)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    summary = detail.summary
    return {"reuse": reuse, "runs": summary["runs"], "statuses": dict(summary["statuses"]),
            "counted": sum(EXECUTIONS.values()), "by_step": dict(EXECUTIONS),
            "step_executions": summary["step_executions"], "model_calls": summary["model_calls"],
            "saved": summary["reuse"]["step_executions_saved"], "wall": wall, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=4, help="experiment runs at once (experiment run --parallel)")
    parser.add_argument("--db", help="database URL (default: a SQLite file in a temporary directory)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        with Orchestrator(db) as orch:
            v1, v2 = workflow(report_v1), workflow(report_v2)
            started = time.perf_counter()
            for x in range(args.examples):
                orch.run(v1, {"x": x})
            stored = time.perf_counter() - started
            orch.dataset("bench", from_runs=True, workflow="bench-experiments", limit=args.examples)
            orch.dataset("warm-up", from_runs=True, workflow="bench-experiments", limit=5)
            for reuse in ("unchanged", "none"):  # first-use costs (imports, caches) land outside the measurement
                measure(orch, v2, "warm-up", reuse, args.parallel)
            rows = [measure(orch, v2, "bench", reuse, args.parallel) for reuse in ("unchanged", "none")]

    load = os.getloadavg()
    print(f"{args.examples} examples, 5-step workflow, last step changed, --parallel {args.parallel}; "
          f"{args.examples} source runs stored in {stored:.1f} s; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    header = ("| --reuse   | runs | step executions (counted) | reported | saved by reuse | model calls | wall  "
              "| CPU   |")
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for row in rows:
        assert row["counted"] == row["step_executions"], row  # the experiment reports what the steps did
        print(f"| {row['reuse']:<9} | {row['runs']:>4} | {row['counted']:>25} | {row['step_executions']:>8} "
              f"| {row['saved']:>14} | {row['model_calls']:>11} | {row['wall']:5.1f}s | {row['cpu']:5.1f}s |")
    reused, full = rows
    print(f"none / unchanged: step executions {full['counted'] / max(1, reused['counted']):.1f}x, "
          f"wall {full['wall'] / reused['wall']:.2f}x, CPU {full['cpu'] / reused['cpu']:.2f}x; "
          f"statuses {reused['statuses']} / {full['statuses']}")


if __name__ == "__main__":
    main()
