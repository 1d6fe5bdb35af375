"""Reusing recorded answers.

Replaying or resuming a run should not pay for, or wait on, model calls whose prompt did not
change, and should give the same answer as before. A cache entry is a whole
:class:`~orchestrator.spec.llm_records.LLMRecord` (every model and tool turn of an attempt), keyed by
what determines the answer: provider, model, the initial messages, sampling settings,
response format and tools. Stored records carry that key (``cache_key``) so
:meth:`ResponseCache.preload` can fill a cache from the store before a replay.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.llm.providers.base import ChatRequest
from orchestrator.spec.llm_records import LLMRecord


def cache_key(provider: str, request: ChatRequest) -> str:
    """sha256 of the canonical JSON of everything that determines the answer."""
    payload = {"provider": provider, **request.cache_fields()}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ResponseCache:
    """An in-memory map from cache key to the record of the attempt that answered it."""

    def __init__(self) -> None:
        self._entries: dict[str, LLMRecord] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> LLMRecord | None:
        return self._entries.get(key)

    def put(self, key: str, record: LLMRecord) -> None:
        self._entries[key] = record

    def preload(self, records: Iterable[LLMRecord | Mapping[str, Any]]) -> int:
        """Add stored records (models or their JSON dicts); records without a key are skipped.
        Returns how many were added. Later records win."""
        added = 0
        for item in records:
            record = item if isinstance(item, LLMRecord) else LLMRecord.model_validate(item)
            if record.cache_key:
                self._entries[record.cache_key] = record
                added += 1
        return added
