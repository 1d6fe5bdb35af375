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

A link whose upstream digest is unknown (a record written before the digest columns existed)
gives no inputs digest: the record is reported as not covered rather than guessed. Digests
written by earlier versions (24 hex characters) never equal the current ones, so records from
before and after an upgrade fall into separate groups: the report may miss variation across the
upgrade, but never reports variation that is not there.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from orchestrator.store.bounded import BoundedCache
from orchestrator.store.rows import NewStepRecord

DigestLookup = Callable[[Iterable[int]], Mapping[int, str | None]]
"""Output digests of stored records by id (ids not stored are left out)."""


CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
"""Key order does not matter, no whitespace. Built once: ``json.dumps`` with options builds an encoder
per call, which was a third of a digest's cost."""

DIGEST_BYTES = 9
"""72 bits, written as 12 base64url characters: two per record is 24 bytes (was 48 as hex). A
collision only merges two groups of one step's records in the report, and at 72 bits that needs
billions of distinct outputs of one step."""


def value_digest(value: Any) -> str:
    """A short content hash of a JSON value (key order does not matter)."""
    digest = hashlib.blake2b(CANONICAL.encode(value).encode(), digest_size=DIGEST_BYTES).digest()
    return base64.urlsafe_b64encode(digest).decode()


def output_digest(output: str | None) -> str | None:
    """The digest of an output's JSON text; None for a record without output."""
    if output is None:
        return None
    return value_digest(json.loads(output))


def linked_records(inputs: Any) -> list[int]:
    """Ids of the records an inputs document links to."""
    if not isinstance(inputs, dict):
        return []
    return [v["$record"] for v in inputs.values() if type(v) is dict and "$record" in v]


def inputs_digest(inputs: str | None, lookup: DigestLookup) -> str | None:
    """The digest of an inputs document with its links resolved through ``lookup`` (see the module doc)."""
    if inputs is None:
        return None
    value = json.loads(inputs)
    links = linked_records(value)
    if not links:
        return value_digest(value)
    found = lookup(links)
    resolved = {}
    for param, item in value.items():
        if type(item) is dict and "$record" in item:  # parsed JSON: plain dicts only
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
        record.output_digest = output_digest(record.output)
        record.inputs_digest = inputs_digest(record.inputs, lambda ids: self.cache.lookup(ids, self.fallback))

    def remember(self, record_id: int, record: NewStepRecord) -> None:
        self.cache.remember(record_id, record.output_digest)
