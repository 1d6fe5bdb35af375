"""Content digests of a step record's inputs and output, computed once when the record is written.

The reporting checklist asks, per step, how often the same inputs gave different outputs. Hashing
millions of stored outputs at report time costs more than the report is worth, so every store
writes two short digests with each record and the report groups them in SQL.

- ``output_digest``: a hash of the output's canonical JSON (key order does not matter).
- ``inputs_digest``: a hash of the inputs with each ``{"$record": id, "field": f}`` link replaced
  by ``(the linked record's output_digest, f)``. Two attempts count as having the same inputs when
  their constants are equal and each link names an equal upstream output and the same field (a
  link to a field of two different upstream outputs counts as different inputs even if the field
  values agree: the check is conservative, never reporting variation that is not there).

Canonical JSON is ``jsonio.dumps`` (compact, one spelling per value) of the value with every object's
keys in sorted order. A record's writer that still has the values its texts were dumped from gives
them with the record (``NewStepRecord.output_value``, ``inputs_value``): the digest then never parses
the text back, and where the value's keys are already in order (a number, a string, a list of them,
an object written in key order) the text itself is canonical and its bytes are hashed as they are,
the value serialised once. Otherwise the text is parsed and dumped canonically.

A link whose upstream digest is unknown (a record written before the digest columns existed)
gives no inputs digest: the record is reported as not covered rather than guessed. Digests
written by earlier versions never equal the current ones (each version hashes with its own
personalisation; the first ones were 24 hex characters), so records from before and after an
upgrade fall into separate groups: the report may miss variation across the upgrade, but never
reports variation that is not there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pydantic_core

from orchestrator.core import jsonio
from orchestrator.store.bounded import BoundedCache
from orchestrator.store.rows import NOT_KEPT, NewStepRecord

DigestLookup = Callable[[Iterable[int]], Mapping[int, str | None]]
"""Output digests of stored records by id (ids not stored are left out)."""


DIGEST_BYTES = 9
"""72 bits, written as 12 base64url characters: two per record is 24 bytes (was 48 as hex). A
collision only merges two groups of one step's records in the report, and at 72 bits that needs
billions of distinct outputs of one step."""

PERSONALISATION = b"\x02"
"""Hashed before every text (a byte no JSON text starts with): digests of this scheme never equal those of
an earlier one (see the module doc)."""

_SCALARS = frozenset({str, int, float, bool, type(None)})


class NotPlainJson(Exception):
    """A value holds something a canonical form cannot be read from directly (a tuple, a model, a key that
    is not a string): its dumped text is parsed instead."""


def canonical(value: Any) -> Any:
    """``value`` with every object's keys in sorted order: ``value`` itself (no copy) where they already are,
    new containers only where something moved. NotPlainJson for anything but dicts with string keys,
    lists and JSON scalars (exact types: a subclass may dump otherwise)."""
    shape = type(value)
    if shape in _SCALARS:
        return value
    if shape is dict:
        keys = [*value]
        try:
            ordered = sorted(keys)
        except TypeError:  # keys of several types
            raise NotPlainJson from None
        moved = ordered != keys
        out = {}
        for key in ordered:
            if type(key) is not str:
                raise NotPlainJson
            item = value[key]
            if type(item) not in _SCALARS:
                new = canonical(item)
                moved = moved or new is not item
                item = new
            out[key] = item
        return out if moved else value
    if shape is list:
        if set(map(type, value)) <= _SCALARS:  # a list of scalars at C speed
            return value
        items = [canonical(item) for item in value]
        return value if all(map(operator.is_, items, value)) else items
    raise NotPlainJson


def _hash(data: bytes) -> str:
    digest = hashlib.blake2b(PERSONALISATION + data, digest_size=DIGEST_BYTES).digest()
    return base64.urlsafe_b64encode(digest).decode()


def value_digest(value: Any, text: str | None = None) -> str:
    """A short content hash of JSON data (key order does not matter). ``text``: ``jsonio.dumps(value)``,
    when the caller has it: hashed as it is where it is already canonical."""
    try:
        ordered = canonical(value)
    except NotPlainJson:
        if text is None:
            text = jsonio.dumps(value)
        ordered = canonical(json.loads(text))  # parsed JSON is plain
        return _hash(pydantic_core.to_json(ordered))
    if ordered is value and text is not None:
        return _hash(text.encode())
    return _hash(pydantic_core.to_json(ordered))


def output_digest(output: str | None, value: Any = NOT_KEPT) -> str | None:
    """The digest of an output's JSON text; None for a record without output. ``value``: what the text
    was dumped from, if known (then the text is not parsed)."""
    if output is None:
        return None
    if value is NOT_KEPT:
        return value_digest(json.loads(output))  # a text of unknown spelling is dumped anew
    return value_digest(value, output)


def linked_records(inputs: Any) -> list[int]:
    """Ids of the records an inputs document links to."""
    if not isinstance(inputs, dict):
        return []
    return [v["$record"] for v in inputs.values() if type(v) is dict and "$record" in v]


def inputs_digest(inputs: str | None, lookup: DigestLookup, value: Any = NOT_KEPT) -> str | None:
    """The digest of an inputs document with its links resolved through ``lookup`` (see the module doc).
    ``value``: what the text was dumped from, if known (then the text is not parsed)."""
    if inputs is None:
        return None
    text: str | None = inputs
    if value is NOT_KEPT or type(value) is not dict:
        value, text = json.loads(inputs), None  # a text of unknown spelling is dumped anew
    links = linked_records(value)
    if not links:
        return value_digest(value, text)
    found = lookup(links)
    resolved = {}
    for param, item in value.items():
        if type(item) is dict and "$record" in item:
            upstream = found.get(item["$record"])
            if upstream is None:
                return None
            resolved[param] = {"$output": upstream, "field": item.get("field")}
        else:
            resolved[param] = item
    return value_digest(resolved)


class DigestCache:
    """Recently written output digests by record id, so a consumer's write rarely needs a query.

    Bounded: a long-lived worker keeps only the latest ``size`` entries; a miss falls back to
    the store's own lookup.
    """

    def __init__(self, size: int | None = None) -> None:
        self.digests: BoundedCache[int, str | None] = BoundedCache(size)

    def remember(self, record_id: int, digest: str | None) -> None:
        self.digests[record_id] = digest

    def lookup(self, ids: Iterable[int], fallback: DigestLookup) -> dict[int, str | None]:
        wanted = list(ids)
        out = {i: self.digests[i] for i in wanted if i in self.digests}
        missing = [i for i in wanted if i not in out]
        if missing:
            out.update(fallback(missing))
        return out


class RecordDigests:
    """What a store's write path calls: :meth:`fill` a record's digests before the INSERT, then
    :meth:`remember` its id, so the records consuming it find its output digest without a query."""

    def __init__(self, fallback: DigestLookup, size: int | None = None) -> None:
        self.fallback = fallback
        self.cache = DigestCache(size)

    def fill(self, record: NewStepRecord) -> None:
        record.output_digest = output_digest(record.output, record.output_value)
        record.inputs_digest = inputs_digest(record.inputs, self.lookup, record.inputs_value)

    def lookup(self, ids: Iterable[int]) -> dict[int, str | None]:
        return self.cache.lookup(ids, self.fallback)

    def remember(self, record_id: int, record: NewStepRecord) -> None:
        self.cache.remember(record_id, record.output_digest)
