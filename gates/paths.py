"""Shared helpers for gates: dotted field paths, text extraction and reason formatting.

Every built-in gate that takes a ``field`` parameter reads it through :func:`get_field`, so
``a.b.0.c`` means the same thing everywhere: dict keys, list indexes, and attributes of
pydantic models, dataclasses or any other object. A missing field is a property of the
*output* (a verdict), not a broken gate, so it raises :class:`FieldNotFound`, which gates turn
into ``passed=False`` with the message as the reason.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "FieldNotFound",
    "get_field",
    "describe",
    "iter_strings",
    "to_jsonable",
    "to_text",
    "preview",
    "fmt_number",
    "type_name",
    "is_number",
    "is_sequence",
]

_MISSING = object()


class FieldNotFound(LookupError):
    """A dotted field path does not exist in an output; the message says where it stopped."""


def is_sequence(value: Any) -> bool:
    """True for lists, tuples and other sequences that are not text or bytes."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def is_number(value: Any) -> bool:
    """True for ints and floats, but not bools (``True`` is not a score)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def type_name(value: Any) -> str:
    """A short, reviewer-friendly name for a value's type (``list``, ``dict``, ``Invoice``)."""
    if value is None:
        return "None"
    return type(value).__name__


def _step(current: Any, part: str) -> Any:
    """Follow one path segment; return ``_MISSING`` when it is not there."""
    if isinstance(current, Mapping):
        if part in current:
            return current[part]
        if part.lstrip("-").isdigit() and int(part) in current:
            return current[int(part)]
        return _MISSING
    if is_sequence(current):
        if part.lstrip("-").isdigit():
            index = int(part)
            if -len(current) <= index < len(current):
                return current[index]
        return _MISSING
    if current is None or isinstance(current, str | int | float | bool | bytes):
        return _MISSING
    if part.startswith("_"):
        return _MISSING  # private attributes are not part of an output's shape
    return getattr(current, part, _MISSING)


def _shape(value: Any) -> str:
    """Describe what was found where a path stopped, so the reason says what to fix."""
    if isinstance(value, Mapping):
        keys = [str(k) for k in list(value)[:8]]
        more = ", ..." if len(value) > 8 else ""
        return f"a dict with keys [{', '.join(keys)}{more}]" if keys else "an empty dict"
    if is_sequence(value):
        return f"a {type_name(value)} of {len(value)} items"
    return f"a {type_name(value)}"


def get_field(value: Any, path: str | None) -> Any:
    """Return the value at a dotted ``path`` inside ``value`` (the value itself for no path).

    Segments are dict keys (an all-digit segment also tries the int key), list indexes
    (negative ones count from the end) or attribute names, so pydantic models and
    dataclasses work like dicts.

    Raises:
        FieldNotFound: naming the full path, the segment that failed and what was there.
    """
    if path is None or path == "":
        return value
    current = value
    walked: list[str] = []
    for part in path.split("."):
        found = _step(current, part)
        if found is _MISSING:
            at = f" at '{'.'.join(walked)}'" if walked else ""
            raise FieldNotFound(f"field '{path}' not found: no '{part}'{at} in {_shape(current)}")
        current = found
        walked.append(part)
    return current


def describe(path: str | None) -> str:
    """How a reason refers to the checked value: ``field 'price'`` or ``output``."""
    return f"field '{path}'" if path else "output"


def to_jsonable(value: Any) -> Any:
    """Convert pydantic models, dataclasses, tuples and sets into plain JSON-like data.

    Used wherever a gate needs to look *inside* arbitrary step outputs (JSON Schema
    validation, string search, lexical similarity) without caring how the step built them.
    """
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if is_sequence(value) or isinstance(value, set | frozenset):
        return [to_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic v2 model
        return to_jsonable(dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


def iter_strings(value: Any) -> Iterator[str]:
    """Yield every string (and the text of every int) inside ``value``, recursively.

    Dict *values* are searched, not keys: keys are the output's schema, values are what the
    step said. Ints are included because ids are often numeric.
    """
    data = to_jsonable(value)
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, int) and not isinstance(item, bool):
            yield str(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def to_text(value: Any) -> str:
    """The text of a value: strings as they are, anything else as compact sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), sort_keys=True, ensure_ascii=False, default=str)


def preview(value: Any, limit: int = 60) -> str:
    """A short ``repr`` for reasons, cut with an ellipsis so a reviewer's line stays readable."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt_number(value: float) -> str:
    """Format a number for a reason: ints as-is, floats without noise (``0.7``, not ``0.7000``)."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    return str(value)
