"""Datasets: made from stored runs (``dataset create --from-runs``) or a JSONL file (``dataset add``).

From runs, each example is a run's inputs, its reference answer (when one was stored) and its label:
``"correct"`` or ``"incorrect"`` by the run's latest outcome (a person's label when one was given after
the evaluator's score), None when it has none; the run id is kept, so an experiment can reuse the run's
unchanged steps and ``compare`` can name it ``baseline``. The runs are chosen with the filters of
``orchestrator runs`` (:func:`orchestrator.service.listing.run_query`), newest first.

From a file, each non-empty line is ``{"inputs": {...}, "reference": ..., "label": ...}`` (``reference``,
``label`` and ``source_run_id`` optional); the first bad line stops everything, named ``FILE:LINE``, and
nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.core import jsonio
from orchestrator.core.errors import InputError
from orchestrator.core.files import MAX_JSON_BYTES, UnreadableFileError, read_capped
from orchestrator.service.names import check_names
from orchestrator.spec.datasets import DatasetView, NewExample
from orchestrator.store import Store
from orchestrator.store.triage import RunQuery

LINE_KEYS = ("inputs", "reference", "label", "source_run_id")
MAX_NAME = 200


def check_dataset_name(name: str) -> None:
    """A dataset or experiment name: not empty, no control characters, not ``baseline`` (compare's word)."""
    if not name.strip() or len(name) > MAX_NAME or any(ord(c) < 32 for c in name):
        raise InputError(f"name {name!r} must be 1 to {MAX_NAME} printable characters")
    check_names(name=name)
    if name == "baseline":
        raise InputError("\"baseline\" names a dataset's source runs in `experiment compare`; choose another name")


def examples_from_runs(store: Store, query: RunQuery) -> list[NewExample]:
    """One example per run the query keeps (its ``limit`` runs at most), newest first."""
    page = store.triage_runs(query)
    return [NewExample(inputs=row.run.inputs, reference=row.run.reference,
                       label=None if row.outcome_correct is None else ("correct" if row.outcome_correct
                                                                         else "incorrect"),
                       source_run_id=row.run.run_id) for row in page.rows]


def create_from_runs(store: Store, name: str, query: RunQuery, *, description: str | None = None) -> DatasetView:
    """A new dataset (version 1) of the runs ``query`` keeps; InputError, nothing stored, when it exists or no
    run matches."""
    check_dataset_name(name)
    examples = examples_from_runs(store, query)
    if not examples:
        raise InputError(f"no runs match these filters; dataset {name!r} was not created (list the runs with "
                         "`orchestrator runs` and the same filters)")
    return store.add_examples(name, examples, create=False, description=description)


def read_examples(path: Path) -> list[NewExample]:
    """Every line of an examples file; InputError naming ``FILE:LINE`` of the first bad one."""
    try:
        text = read_capped(path, MAX_JSON_BYTES).decode("utf-8")
    except OSError as exc:
        raise InputError(f"--file {path}: {exc.strerror}") from None
    except UnreadableFileError as exc:
        raise InputError(f"--file {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"--file {path}: not a text file (UTF-8): byte at offset {exc.start} is not UTF-8") from None
    found: list[NewExample] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = jsonio.loads_document(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}:{exc.colno}: invalid JSON: {exc.msg}") from None
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
        found.append(_example(value, where))
    if not found:
        raise InputError(f"{path}: no examples (one JSON object per line: {{\"inputs\": {{...}}, \"reference\": ..., "
                         "\"label\": ...}})")
    return found


def _example(value: Any, where: str) -> NewExample:
    if not isinstance(value, dict):
        raise InputError(f"{where}: each line must be a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - set(LINE_KEYS))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {unknown}; a line has {list(LINE_KEYS)} (inputs required)")
    inputs = value.get("inputs")
    if not isinstance(inputs, dict):
        got = "missing" if "inputs" not in value else f"a {type(inputs).__name__}"
        raise InputError(f"{where}: \"inputs\" must be a JSON object of the workflow's inputs ({got})")
    source = value.get("source_run_id")
    if source is not None and not isinstance(source, str):
        raise InputError(f"{where}: \"source_run_id\" must be a run id (a string)")
    return NewExample(inputs=inputs, reference=value.get("reference"), label=value.get("label"),
                      source_run_id=source)


def examples_from_values(values: Iterable[Any]) -> list[NewExample]:
    """Examples given as mappings (``{"inputs": {...}, "reference": ..., "label": ...}``), checked as file lines
    are; a bad one is named by its index."""
    found = [_example(value, f"examples[{i}]") for i, value in enumerate(values)]
    if not found:
        raise InputError("examples: none given")
    return found


def add_from_file(store: Store, name: str, path: Path) -> DatasetView:
    """Add a file's examples as the dataset's next version (creating it when missing)."""
    check_dataset_name(name)
    return store.add_examples(name, read_examples(path))


def export_lines(store: Store, name: str, *, version: int | None = None) -> list[str]:
    """The dataset's examples as JSONL lines, readable by :func:`read_examples`."""
    return [json.dumps(e.export_json(), ensure_ascii=False) for e in store.examples(name, version=version)]
