"""``orchestrator run FILE --input-file inputs.jsonl``: one run per line, many at once in one process.

Every line is read and checked before the first run starts, so a bad line (not JSON, not an
object, an input the workflow does not declare) stops everything with its file and line number
(exit 2) instead of leaving half a batch behind. Runs then execute concurrently, at most
``--parallel`` at a time, each on its own thread and event loop against the one store (the store
is safe to share between threads). The workflow is loaded and bound once for the whole batch.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.bind.binding import BoundWorkflow
    from orchestrator.engine.run_state import RunResult
    from orchestrator.store import Store


def is_bulk(path: Path) -> bool:
    """``.jsonl``, or a file with more than one non-empty line that each parse as JSON (a
    pretty-printed single object spans lines too, so it stays one run's inputs)."""
    from orchestrator.cli.common import read_json_text
    from orchestrator.core.errors import InputError
    from orchestrator.core.jsonio import loads_document

    if path.suffix == ".jsonl":
        return True
    try:
        lines = [line for line in read_json_text(path, "--input-file").splitlines() if line.strip()]
    except InputError:
        return False  # the single-object reader reports it
    if len(lines) < 2:
        return False
    try:
        loads_document(lines[0])
        loads_document(lines[1])
    except ValueError:
        return False
    return True


def read_lines(path: Path, option: str = "--input-file") -> list[tuple[int, dict[str, Any]]]:
    """(line number, inputs) of every non-empty line; InputError naming the file and line of the first bad one."""
    from orchestrator.cli.common import read_json_text
    from orchestrator.core import jsonio
    from orchestrator.core.errors import InputError

    text = read_json_text(path, option)
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = jsonio.loads_document(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{option} {path}:{number}:{exc.colno}: invalid JSON: {exc.msg}") from None
        except ValueError as exc:
            raise InputError(f"{option} {path}:{number}: {exc}") from None
        if not isinstance(value, dict):
            raise InputError(f"{option} {path}:{number}: each line must be a JSON object of inputs, "
                             f"not {type(value).__name__}")
        rows.append((number, value))
    if not rows:
        raise InputError(f"{option} {path}: no lines of inputs")
    return rows


REFERENCE_KEY = "$reference"
"""A line's reference answer (for an evaluator that declares ``reference``); plain ``reference`` works
too unless the workflow has an input of that name."""


def split_reference(values: dict[str, Any], input_names: Iterable[str]) -> tuple[dict[str, Any], Any]:
    """(inputs, reference answer or None) of one line or ``--input-file`` object; see :data:`REFERENCE_KEY`."""
    inputs = dict(values)
    reference = inputs.pop(REFERENCE_KEY, None)
    if "reference" in inputs and "reference" not in set(input_names):
        plain = inputs.pop("reference")
        reference = plain if reference is None else reference
    return inputs, reference


@dataclass
class BulkItem:
    """One line's run: what it came to, or why it could not run."""

    line: int
    inputs: dict[str, Any]
    result: RunResult | None = None
    error: str | None = None
    reference: Any = None
    """The line's reference answer, stored on its run; None without one."""

    @property
    def status(self) -> str:
        return self.result.status if self.result is not None else "failed"

    def note(self) -> str:
        """The waiting step(s) of a paused run, or the error of a failed one."""
        if self.result is None:
            return self.error or ""
        if self.result.status == "paused":
            return "waiting at " + ", ".join(self.result.paused_steps)
        return self.result.error or ""

    def to_json(self, workflow: str) -> dict[str, Any]:
        r = self.result
        return {"line": self.line, "run_id": r.run_id if r else None, "workflow": workflow, "status": self.status,
                "output": r.output if r else None, "paused_steps": list(r.paused_steps) if r else [],
                "error": (r.error if r else self.error)}


@dataclass
class BulkProgress:
    """A count of finished runs on stderr, rewritten in place (terminals only)."""

    total: int
    enabled: bool
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self) -> None:
        with self.lock:
            self.done += 1
            if self.enabled:
                sys.stderr.write(f"\r{self.done}/{self.total} runs finished")
                sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_all(store: Store, workflow: BoundWorkflow, items: list[BulkItem], *, parallel: int,
            run: Callable[[Store, BoundWorkflow, BulkItem], RunResult], progress: BulkProgress) -> None:
    """Execute every item's run, at most ``parallel`` at once; each item gets its result or error."""
    from orchestrator.core.errors import OrchestratorError

    def one(item: BulkItem) -> None:
        try:
            item.result = run(store, workflow, item)
        except OrchestratorError as exc:
            item.error = str(exc)
        except Exception as exc:  # one run's crash must not lose the others' results
            item.error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            progress.finished()

    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="orchestrator run") as pool:
        list(pool.map(one, items))
    progress.close()


def exit_status(items: list[BulkItem]) -> str:
    """The batch's status for its exit code: failed if any failed, else paused if any paused."""
    statuses = {item.status for item in items}
    for status in ("failed", "rejected", "paused", "running", "queued"):
        if status in statuses:
            return status
    return "succeeded"


def bulk_run(workflow: BoundWorkflow, input_file: Path, pairs: dict[str, Any], *, db: str | None, as_json: bool,
             parallel: int, max_concurrency: int, queue: bool, otel: str | None) -> None:
    """The ``run`` command with a file of many inputs: check every line, run them all, print a summary.

    ``--input`` pairs apply to every line (a line's own keys win). Exits with the batch's code.
    """
    import typer
    from rich.markup import escape
    from rich.table import Table

    from orchestrator.cli.common import err, exit_code, open_store, out, print_json, status_markup
    from orchestrator.core.errors import InputError
    from orchestrator.service.runner import start_run, wait_for_review_timeouts
    from orchestrator.spec.inputs import resolve_inputs

    items = []
    for number, values in read_lines(input_file):
        line_inputs, reference = split_reference(values, workflow.spec.inputs)
        given = {**pairs, **line_inputs}
        try:
            resolve_inputs(workflow.spec, given)  # every line is checked before anything is stored
        except InputError as exc:
            raise InputError(f"--input-file {input_file}:{number}: {exc}") from None
        items.append(BulkItem(number, given, reference=reference))
    store = open_store(db)
    if queue:
        from orchestrator.service.runner import enqueue_run

        ids = []
        for item in items:
            ids.append(enqueue_run(store, workflow, item.inputs, reference=item.reference))
        if as_json:
            print_json([store.get_run(run_id).summary_json() for run_id in ids])
        else:
            out.print(f"{len(ids)} runs queued", highlight=False)
        return

    def execute(store: Store, workflow: BoundWorkflow, item: BulkItem) -> RunResult:
        result = start_run(store, workflow, item.inputs, max_concurrency=max_concurrency, otel=otel,
                           reference=item.reference)
        return wait_for_review_timeouts(store, result, max_concurrency=max_concurrency)

    run_all(store, workflow, items, parallel=parallel, run=execute,
            progress=BulkProgress(len(items), enabled=err.is_terminal and not as_json))
    if as_json:
        print_json([item.to_json(workflow.name) for item in items])
    else:
        table = Table(title=escape(f"{len(items)} runs of {workflow.name}"), expand=False)
        for column in ("line", "run", "status", "waiting step / error"):
            table.add_column(column)
        for item in items:
            table.add_row(str(item.line), item.result.run_id if item.result else "-",
                          status_markup(item.status), escape(item.note()[:100]))
        out.print(table)
        counts: dict[str, int] = {}
        for item in items:
            counts[item.status] = counts.get(item.status, 0) + 1
        out.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())), highlight=False)
    raise typer.Exit(exit_code(exit_status(items)))
