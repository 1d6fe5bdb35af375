"""Content digests and the step-execution cache shared by every replay of one attribution.

A step's behaviour is keyed on (step, policy, digest of its keyword inputs): ``own`` is the
step's own callable, ``baseline`` its declared baseline, ``resample`` a fresh re-execution used
as a reference. The original run's records seed the ``own`` entries, so a step whose inputs are
unchanged reuses its recorded output, and a sub-execution that two replays share runs once.
Within one attribution the value of a coalition is therefore a deterministic function, which
the Shapley axioms need even when the steps themselves are not deterministic.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from orchestrator.spec.model import StepSpec, parse_reference
from orchestrator.spec.records import StepRecordView


def digest(value: Any) -> str:
    """A short content hash of a JSON value (key order does not matter)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def kwargs_key(parts: dict[str, str]) -> str:
    """The key of a step's inputs from the digests of its keyword arguments."""
    return digest(sorted(parts.items()))


@dataclass(frozen=True)
class Value:
    """A JSON value with its digest, computed once."""

    data: Any
    digest: str

    @classmethod
    def of(cls, data: Any) -> Value:
        return cls(data, digest(data))


class FieldMissing(Exception):
    """An input reference names a field the upstream output does not have."""


def get_field(value: Any, path: str) -> Any:
    """``STEP.field.sub`` extraction with the executor's semantics (dict keys, list indexes)."""
    from orchestrator.spec.model import field_value

    try:
        return field_value(value, path)
    except KeyError:
        raise FieldMissing(path) from None


@dataclass
class Entry:
    """One cached step output and where it came from."""

    value: Value
    source: str
    """``original`` (the run being attributed) or ``replay``."""
    record: StepRecordView | None = None


class StepCache:
    """(step, policy, inputs key) -> output, plus memoized field extraction."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, str], Entry] = {}
        self._fields: dict[tuple[str, str], Value | None] = {}
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, step_id: str, policy: str, key: str) -> Entry | None:
        entry = self.entries.get((step_id, policy, key))
        if entry is not None:
            self.hits += 1
        return entry

    def put(self, step_id: str, policy: str, key: str, value: Value, source: str,
            record: StepRecordView | None = None) -> None:
        with self._lock:
            self.entries.setdefault((step_id, policy, key), Entry(value, source, record))

    def field(self, value: Value, path: str) -> Value | None:
        """The digest-carrying field of a value, or None when it is missing."""
        slot = (value.digest, path)
        if slot not in self._fields:
            try:
                self._fields[slot] = Value.of(get_field(value.data, path))
            except FieldMissing:
                self._fields[slot] = None
        return self._fields[slot]


class InputKeys:
    """Computes input keys for a workflow's steps, from upstream values or from actual kwargs."""

    def __init__(self, steps: dict[str, StepSpec], workflow_inputs: dict[str, Any], cache: StepCache) -> None:
        self.steps = steps
        self.cache = cache
        self.input_digests = {k: digest(v) for k, v in workflow_inputs.items()}
        self.plan: dict[str, list[tuple[str, str, str, str | None]]] = {}
        """Per step: (param, kind, digest-or-step, field) with kind const | input | step."""
        for sid, step in steps.items():
            rows: list[tuple[str, str, str, str | None]] = []
            for param, ref in step.inputs.items():
                parsed = parse_reference(ref)
                if parsed is None:
                    rows.append((param, "const", digest(ref), None))
                elif parsed[0] == "input":
                    rows.append((param, "input", self.input_digests.get(parsed[1], digest(None)), None))
                elif parsed[0] in ("previous", "iteration"):  # a loop's own: its output follows from the rest
                    rows.append((param, "const", digest(ref), None))
                else:
                    rows.append((param, "step", parsed[1], parsed[2]))
            rows.extend((param, "const", digest(value), None) for param, value in step.params.items())
            self.plan[sid] = rows

    def from_values(self, step_id: str, outputs: dict[str, Value]) -> str | None:
        """The key from upstream outputs; None when an upstream output or field is missing."""
        parts: dict[str, str] = {}
        for param, kind, ref, fld in self.plan[step_id]:
            if kind != "step":
                parts[param] = ref
                continue
            upstream = outputs.get(ref)
            if upstream is None:
                return None
            if fld:
                sub = self.cache.field(upstream, fld)
                if sub is None:
                    return None
                parts[param] = sub.digest
            else:
                parts[param] = upstream.digest
        return kwargs_key(parts)

    @staticmethod
    def from_kwargs(kwargs: dict[str, Any]) -> str:
        """The key of the keyword arguments a step is actually called with."""
        return kwargs_key({param: digest(value) for param, value in kwargs.items()})
