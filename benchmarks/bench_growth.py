"""Growth curves: what one unit costs as the number of units grows, where a path once grew faster than its work.

Run it as ``.venv/bin/python benchmarks/bench_growth.py CASE [--sizes 100 1000 10000] [--rounds 5]
[--against OTHER_TREE]``. Each case builds its situation at every size and prints the process CPU time per
unit at each (and, for ``tree``, the store calls), then the ratio of the largest size's cost to the smallest's:
a ratio above about 1.2 is a path whose cost grows with the number of units around it. The cases:

``maps``
    one ``for_each:`` step of N no-op items (per item).
``loops``
    one ``for_each:`` over a ``repeat:`` step of N items, each loop's first iteration failing its gate, so N
    loops pause side by side (per item): every loop once asked each waiting unit whether it was its own.
``tree``
    one approval of a pause inside one of N paused child runs of a map, with the continuation of the tree
    (store calls and CPU per decision; the unit is the decision, so the ratio compares whole decisions).
``poll``
    one idle poll of a worker (claims, recovery, due reviews, dead holders) beside N paused runs.
``prompts``
    rendering one step's prompt N times, as N model calls do (per render).
``first_call``
    the latency recorded of a process's first N model calls against a local scripted server (per call), beside
    the wall time of the whole calls: the first one imports the SDK, which the recorded latency must not hold.
``stats``
    peak resident memory (MB) of the ``stats``, ``report`` and ``runs`` commands, each in a process of its
    own, over a database of N step records (the unit is the command, so the ratio compares whole peaks).

With ``--against OTHER_TREE`` (a checkout of another version, e.g. ``git archive main | tar -x -C /tmp/base``)
each round measures this tree and then the other in fresh processes (the order alternating by round), and
the table shows both medians: a before and after under the same load. Wall-clock numbers belong here, never
in pytest.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FLOW = ROOT / "tests" / "fixtures" / "flow"

DEFAULT_SIZES = {"maps": [100, 1000, 10_000], "loops": [100, 400, 4000], "tree": [20, 200],
                 "prompts": [100, 1000, 10_000], "first_call": [1, 10],
                 "poll": [10, 10_000], "stats": [100_000, 1_000_000]}


# -- the cases: each returns {size: (cost per unit, extra columns)} for this tree ------------------------------

async def _noop(item: Any = None) -> dict[str, Any]:
    return {"n": 1}


async def _unsure(item: Any = None, iteration: int | None = None) -> dict[str, Any]:
    return {"confidence": 0.1}


def _map_workflow(size: int, *, loops: bool) -> Any:
    from orchestrator.bind.python_workflow import Workflow

    wf = Workflow(f"growth-{'loops' if loops else 'maps'}", inputs={"items": {"type": "array"}})
    if loops:
        wf.step(id="each", for_each="$inputs.items", inputs={"item": "$item", "iteration": "$iteration"},
                repeat={"until": "iteration >= 3", "max": 3},
                gates=[{"gate": "range", "field": "confidence", "min": 0.5}])(_unsure)
    else:
        wf.step(id="each", for_each="$inputs.items", inputs={"item": "$item"})(_noop)
    return wf.bind()


def case_map(size: int, *, loops: bool) -> tuple[float, dict[str, Any]]:
    """CPU µs per item of one execution of the map (its instances paused when ``loops``)."""
    import anyio

    from orchestrator.engine.executor import Executor
    from orchestrator.store import open_store

    os.environ["ORCHESTRATOR_MAX_ITEMS"] = str(max(size, 10_000))
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/growth.db")
        try:
            executor = Executor(store, _map_workflow(size, loops=loops))
            began = time.process_time()
            result = anyio.run(executor.start, {"items": list(range(size))})
            cpu = time.process_time() - began
        finally:
            store.close()
    assert result.status == ("paused" if loops else "succeeded"), result.status
    return cpu / size * 1e6, {}


def counting_store(store: Any) -> Any:
    """``store`` behind a layer that counts every call of the Store interface, by method."""
    from orchestrator.store.delegating import FORWARDED, DelegatingStore, concrete

    class Counting(DelegatingStore):
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.url = inner.url
            self.calls: collections.Counter[str] = collections.Counter()

        def target(self) -> Any:
            return self.inner

    def counted(name: str) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return getattr(self.inner, name)(*args, **kwargs)
        return call

    for name in FORWARDED:
        setattr(Counting, name, counted(name))
    return concrete(Counting)(store)


def case_tree(size: int) -> tuple[float, dict[str, Any]]:
    """CPU µs and store calls of approving one pause among ``size`` paused child runs, the tree continued."""
    from orchestrator.api import Orchestrator

    sys.path.insert(0, str(FLOW))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["STEP_LOG"] = f"{tmp}/steps.log"
        with Orchestrator(f"sqlite:///{tmp}/growth.db") as orc:
            paused = orc.run(FLOW / "tree_map.yaml", {"count": size, "unclear": list(range(size))})
            assert paused.status == "paused" and len(paused.paused_steps) == size, paused.status
            counted = orc.store = counting_store(orc.store)
            began = time.process_time()
            after = orc.approve(paused.run_id, step="per_ticket[3] > classify")
            cpu = time.process_time() - began
            assert after.status == "paused" and len(after.paused_steps) == size - 1, after.status
            return cpu * 1e6, {"store calls": sum(counted.calls.values())}


def case_poll(size: int) -> tuple[float, dict[str, Any]]:
    """CPU µs of one idle poll of a worker (median of 50) beside ``size`` paused runs."""
    from orchestrator.engine.executor import new_lease
    from orchestrator.service.worker import Worker, WorkOptions
    from orchestrator.store import open_store
    from orchestrator.store.rows import NewRun

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/growth.db")
        try:
            workflow_id = store.register_workflow("growth-poll", "1", {"name": "growth-poll", "steps": []}, None,
                                                  "growth-poll")
            for _ in range(size):
                store.create_run(NewRun(workflow_id, "growth-poll", {}, status="paused"))
            worker = Worker(store, WorkOptions(once=True))
            times = []
            for _ in range(50):
                began = time.process_time()
                assert worker.claim_one(new_lease()) is None
                assert worker.idle_checks() is False
                times.append(time.process_time() - began)
        finally:
            store.close()
    return statistics.median(times) * 1e6, {}


def case_prompts(size: int) -> tuple[float, dict[str, Any]]:
    """CPU µs per render of one step's prompt and system templates, ``size`` renders (as ``size`` calls)."""
    from orchestrator.llm.prompt import render_prompt

    system, prompt = "You classify support tickets.", "Classify: {{ ticket }}\nAnswer with one word."
    began = time.process_time()
    for i in range(size):
        render_prompt(prompt, {"ticket": f"ticket {i}"}, system=system)
    return (time.process_time() - began) / size * 1e6, {}


def case_first_call(size: int) -> tuple[float, dict[str, Any]]:
    """The ``latency`` recorded of the first ``size`` model calls of a process against a local scripted server
    (µs per call), and the wall time of the whole calls: the first one imports the SDK."""
    import anyio

    from orchestrator.llm import LLMConfig, run_llm
    from tests.llm.fake_openai_server import FakeOpenAI, completion

    server = FakeOpenAI().start()
    try:
        config = LLMConfig.model_validate({"provider": "openai", "model": "fake", "base_url": server.base_url})
        recorded, whole = 0.0, 0.0
        for _ in range(size):
            server.respond(completion("ok"))
            began = time.perf_counter()
            outcome = anyio.run(lambda: run_llm(config=config, prompt="Say ok."))
            whole += time.perf_counter() - began
            recorded += outcome.record.latency
    finally:
        server.stop()
    return recorded / size * 1e6, {"whole call µs": round(whole / size * 1e6)}


CASES: dict[str, Callable[[int], tuple[float, dict[str, Any]]]] = {
    "prompts": case_prompts,
    "first_call": case_first_call,
    "maps": lambda n: case_map(n, loops=False),
    "loops": lambda n: case_map(n, loops=True),
    "tree": case_tree,
    "poll": case_poll,
}


# -- the driver -------------------------------------------------------------------------------------------------

def measure_here(case: str, sizes: list[int]) -> dict[int, tuple[float, dict[str, Any]]]:
    return {size: CASES[case](size) for size in sizes}


def measure_in(tree: Path, case: str, sizes: list[int]) -> dict[int, tuple[float, dict[str, Any]]]:
    """The case measured by a fresh process importing ``tree``'s orchestrator."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, case, "--sizes", *map(str, sizes), "--emit", str(tree)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{case} in {tree} failed:\n{out.stderr}")
    return {int(k): (v[0], v[1]) for k, v in json.loads(out.stdout.splitlines()[-1]).items()}


def print_table(label: str, rounds: list[dict[int, tuple[float, dict[str, Any]]]], sizes: list[int],
                unit: str) -> None:
    medians = {s: statistics.median(r[s][0] for r in rounds) for s in sizes}
    extras = rounds[-1][sizes[0]][1].keys()
    for size in sizes:
        more = " ".join(f"{k} {rounds[-1][size][1][k]}" for k in extras)
        print(f"  {label:<8} {size:>9}  {medians[size]:>12.1f} {unit}  {more}")
    ratio = medians[sizes[-1]] / medians[sizes[0]]
    print(f"  {label:<8} ratio {sizes[-1]}/{sizes[0]}: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=[*CASES, "stats"])
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout to measure in alternation with this one")
    parser.add_argument("--emit", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = args.sizes or DEFAULT_SIZES[args.case]
    if args.emit is not None:  # a measuring process of the driver below
        sys.path.insert(0, str(args.emit))
        if args.case == "stats":
            from growth_stats import measure_stats  # beside this file, whichever tree is measured

            print(json.dumps(measure_stats(sizes)))
        else:
            print(json.dumps(measure_here(args.case, sizes)))
        return
    trees = [ROOT] + ([args.against.resolve()] if args.against else [])
    results: dict[Path, list[dict[int, tuple[float, dict[str, Any]]]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            results[tree].append(measure_in(tree, args.case, sizes))
    unit = {"stats": "MB peak", "first_call": "recorded latency (wall) µs per call",
            "tree": "CPU µs per decision"}.get(args.case, "CPU µs per unit")
    print(f"{args.case}: {unit}, median of {args.rounds} rounds" + (" (interleaved)" if args.against else ""))
    for tree in trees:
        print_table("this" if tree == ROOT else "against", results[tree], sizes, "MB" if args.case == "stats" else "µs")


if __name__ == "__main__":
    main()
