"""Start-up time of the CLI: what a user waits for before and around a small run.

Each command runs N times in a fresh interpreter (median and min wall time printed as a table),
beside ``python -c pass`` (the interpreter's own floor) and ``orchestrator --help`` (the CLI
without a store). The run is the hello example on a fresh SQLite file in a temp directory; the
first run of each database creates its schema, so that case is measured separately. Bytecode is
cached (in a temp directory) as for an installed package, even where PYTHONDONTWRITEBYTECODE is set.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 10]

Also prints which heavy packages the run imported (``sqlalchemy``, ``sqlmodel``, ``networkx``,
``textual``): the SQLite run path is meant to import none of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HELLO = REPO / "workflows" / "hello" / "hello.yaml"
HEAVY = ("sqlalchemy", "sqlmodel", "networkx", "textual")


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return elapsed


def heavy_imports(argv: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True)
    found = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    return sorted(found & set(HEAVY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    py = sys.executable
    env = {k: v for k, v in os.environ.items()
           if k not in ("ORCHESTRATOR_DB", "PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE")}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        # bytecode as an installed package has it, cached outside the source tree
        env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
        db = cwd / "bench.db"
        run = [py, "-m", "orchestrator", "run", str(HELLO), "--input", "name=x", "--db", f"sqlite:///{db}"]
        cases: list[tuple[str, list[str], bool]] = [
            ("python -c pass", [py, "-c", "pass"], False),
            ("orchestrator --help", [py, "-m", "orchestrator", "--help"], False),
            ("orchestrator run hello (new db)", run, True),
            ("orchestrator run hello", run, False),
        ]
        timed(run, cwd, env)  # warm the file cache and bytecode once
        rows = []
        for label, argv, fresh_db in cases:
            samples = []
            for _ in range(args.repeat):
                if fresh_db:
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{db}{suffix}").unlink(missing_ok=True)
                samples.append(timed(argv, cwd, env))
            rows.append((label, statistics.median(samples), min(samples)))
        heavy = heavy_imports(run, cwd, env)
    print(f"start-up, {args.repeat} runs each (wall time of a fresh interpreter)")
    print(f"{'command':<34} {'median ms':>10} {'min ms':>8}")
    for label, med, low in rows:
        print(f"{label:<34} {med * 1000:>10.0f} {low * 1000:>8.0f}")
    print(f"heavy packages imported by `run` on SQLite: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
