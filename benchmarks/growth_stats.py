"""The ``stats`` case of ``bench_growth.py``: peak memory of the read commands over N step records.

A database of N records is built (once; cached under the temp directory) from ``bench_analytics.py``'s runs: a
seed of SEED_RUNS runs of its 20-step workflow is written through the Store interface, each record given a model
call (as an LLM step's), then copied with plain SQL (new run ids, inputs and output digests of their own, every
row's key moved past the last) until it holds N records: writing a million records one commit at a time takes
many minutes. Then ``stats`` (first with the summary emptied, as after an upgrade:
it summarises every record), ``stats`` again, ``report`` and ``runs`` run, each in a process of its own, and
their peak resident memory (``os.wait4``) is reported.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED_RUNS = 500
"""Runs written through the Store interface; the rest are copies of them."""
STEPS = 20
COPIED = {"runs": {"id", "run_id"}, "step_records": {"id", "run_pk"}, "gate_results": {"id", "run_pk", "record_id"},
          "outcomes": {"id", "run_pk"}, "attributions": {"id", "run_pk"}, "model_calls": {"id", "run_pk", "record_id"}}
"""The tables copied, and the columns each copy changes (keys moved past the last, run ids made new)."""
MESSAGES = '[{"role": "user", "content": "' + "Summarise the ticket and say what it needs. " * 10 + '"}]'
RESPONSE = "The ticket asks for a refund of a double charge; it needs the billing team. " * 3


def build(path: Path, records: int) -> str:
    """A SQLite file of at least ``records`` step records; the workflow's name."""
    name = f"bench-analytics-{SEED_RUNS}"
    url = f"sqlite:///{path}"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_analytics import build as build_seed

        build_seed(url, SEED_RUNS, name, path.parent / "workflow")
        with sqlite3.connect(path) as conn:
            conn.execute(f"""INSERT INTO model_calls (run_pk, record_id, step_id, attempt, purpose, gate, provider,
                             model, started_at, ended_at, input_tokens, output_tokens, cost, finish_reason, messages,
                             response)
                             SELECT run_pk, id, step_id, attempt, 'step', NULL, 'openai', 'gpt-4o-mini', started_at,
                             started_at + 0.8, 420, 90, 0.0001, 'stop', '{MESSAGES}', '{RESPONSE}'
                             FROM step_records""")
    with sqlite3.connect(path) as conn:
        have = conn.execute("SELECT COUNT(*) FROM step_records").fetchone()[0]
        copy = 0
        while have < records:
            copy += 1
            _copy_seed(conn, copy)
            have = conn.execute("SELECT COUNT(*) FROM step_records").fetchone()[0]
    return name


def _copy_seed(conn: sqlite3.Connection, copy: int) -> None:
    """Copy the seed runs (the first SEED_RUNS + 1 runs and what belongs to them) once more."""
    top = {table: conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0] for table in COPIED}
    seed_runs = conn.execute("SELECT MAX(id) FROM (SELECT id FROM runs ORDER BY id LIMIT ?)",
                             (SEED_RUNS + 1,)).fetchone()[0]
    seed = {"runs": seed_runs, **{t: conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t} WHERE run_pk <= ?",
                                                  (seed_runs,)).fetchone()[0] for t in COPIED if t != "runs"}}
    for table, changed in COPIED.items():
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        values = []
        for column in columns:
            if column == "id":
                values.append(f"id + {top[table]}")
            elif column == "run_id":
                values.append(f"run_id || 'c{copy}'")
            elif column == "run_pk":
                values.append(f"run_pk + {top['runs']}")
            elif column == "record_id":
                values.append(f"record_id + {top['step_records']}")
            elif column in ("inputs_digest", "output_digest"):  # each copy a run of inputs of its own
                values.append(f"{column} || 'c{copy}'")
            else:
                values.append(column)
        assert changed <= set(columns)
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM {table} "
                     "WHERE id <= ? ORDER BY id", (seed[table],))
    conn.commit()


def peak_mb(args: list[str]) -> float:
    """Peak resident memory (MB) of one CLI command, run as a process of its own (from the measured tree: ``-m``
    imports from the working directory first)."""
    import orchestrator

    process = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, cwd=Path(orchestrator.__file__).parent.parent)
    _, status, usage = os.wait4(process.pid, 0)
    assert process.stderr is not None
    error = process.stderr.read().decode()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"orchestrator {' '.join(args)} failed: {error}")
    return usage.ru_maxrss / 1024


def measure_stats(sizes: list[int]) -> dict[int, tuple[float, dict[str, Any]]]:
    """Per size: the largest peak (MB) of the commands, and each command's."""
    import hashlib

    import orchestrator

    tree = hashlib.sha256(str(Path(orchestrator.__file__).parent).encode()).hexdigest()[:8]
    cache = Path(tempfile.gettempdir()) / f"orchestrator-growth-{tree}"  # per tree: schema versions differ
    cache.mkdir(exist_ok=True)
    out: dict[int, tuple[float, dict[str, Any]]] = {}
    for size in sizes:
        path = cache / f"stats-{size}.db"
        name = build(path, size)
        url = f"sqlite:///{path}"
        with sqlite3.connect(path) as conn:  # the summary emptied: the first read summarises every record
            for table in ("analytics_inputs", "analytics_days", "analytics_series", "analytics_outcomes",
                          "analytics_trajectories", "analytics_runs", "analytics_state"):
                conn.execute(f"DELETE FROM {table}")
        peaks = {"stats (summarises)": peak_mb(["stats", "--workflow", name, "--db", url]),
                 "stats": peak_mb(["stats", "--workflow", name, "--db", url]),
                 "report": peak_mb(["report", "--workflow", name, "--db", url]),
                 "runs": peak_mb(["runs", "--db", url])}
        out[size] = (max(peaks.values()), {k: round(v) for k, v in peaks.items()})
    return out
