"""Datasets and experiments as stored: plain data the store writes and reads back.

A **dataset** is a named list of examples that only grows: adding examples makes a new version, and
version N is every example added by version N or before, so an experiment that names the version it
ran can be repeated on exactly the same examples later. An **example** is a workflow's inputs, the
reference answer its evaluator compares with and a label (a person's verdict, ``"correct"`` or
``"incorrect"``, or any JSON), with the run it was taken from when it came from one.

An **experiment** ran one workflow version on one dataset version: one run (kind ``experiment``) per
example, each linked to its example with what reusing the source run's unchanged steps saved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.spec.records import iso


@dataclass(frozen=True, slots=True)
class NewExample:
    """An example to add to a dataset."""

    inputs: dict[str, Any]
    reference: Any = None
    """JSON data: the answer the workflow's evaluator compares with (None: none)."""
    label: Any = None
    """A person's verdict on the source run (``"correct"``, ``"incorrect"``) or any JSON (None: none)."""
    source_run_id: str | None = None
    """The stored run the example was taken from (None: added from a file)."""


@dataclass(frozen=True, slots=True)
class ExampleView:
    """One stored example of a dataset."""

    id: int
    dataset: str
    version: int
    """The dataset version that added it."""
    position: int
    """Its place in the dataset (1-based), in the order examples were added."""
    inputs: dict[str, Any]
    reference: Any
    label: Any
    source_run_id: str | None
    created_at: float

    def to_json(self) -> dict[str, Any]:
        """The example as ``dataset show --json`` lists it."""
        return {"id": self.id, "position": self.position, "version": self.version, "inputs": self.inputs,
                "reference": self.reference, "label": self.label, "source_run_id": self.source_run_id}

    def export_json(self) -> dict[str, Any]:
        """One line of ``dataset export``: what ``dataset add --file`` reads back."""
        line: dict[str, Any] = {"inputs": self.inputs, "reference": self.reference, "label": self.label}
        if self.source_run_id is not None:
            line["source_run_id"] = self.source_run_id
        return line


@dataclass(frozen=True, slots=True)
class DatasetView:
    """A dataset at its latest version."""

    id: int
    name: str
    version: int
    examples: int
    """How many examples its latest version holds."""
    created_at: float
    updated_at: float
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "size": self.examples,
                "description": self.description, "created_at": iso(self.created_at),
                "updated_at": iso(self.updated_at)}


@dataclass(frozen=True, slots=True)
class NewExperiment:
    """An experiment to store before its runs start."""

    name: str
    dataset: str
    dataset_version: int
    workflow_id: int
    workflow: str
    params: dict[str, Any] = field(default_factory=dict)
    """How it runs: reuse policy, parallelism, queued or not, side effects."""


@dataclass(frozen=True, slots=True)
class ExperimentView:
    """A stored experiment."""

    id: int
    name: str
    dataset: str
    dataset_version: int
    workflow_id: int
    workflow: str
    status: str
    """``running`` while its runs are being started or executed here, ``queued`` once its runs were handed to
    workers, ``finished`` when every run ended (paused ones included)."""
    params: dict[str, Any]
    summary: dict[str, Any]
    """What the experiment counted when it finished: runs by status, reuse savings."""
    created_at: float
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dataset": self.dataset, "dataset_version": self.dataset_version,
                "workflow": self.workflow, "workflow_id": self.workflow_id, "status": self.status,
                "params": self.params, "summary": self.summary, "created_at": iso(self.created_at),
                "updated_at": iso(self.updated_at)}


@dataclass(frozen=True, slots=True)
class ExperimentRunLink:
    """One run of an experiment: its example, and what reusing the source run's records saved it."""

    example_id: int
    run_id: str
    reused_steps: tuple[str, ...] = ()
    """The steps whose recorded outputs were taken from the example's source run instead of executed."""
    saved_model_calls: int = 0
    saved_tokens: int = 0
    saved_cost: float = 0.0
    saved_seconds: float = 0.0
    """What those steps took when they ran in the source run."""
