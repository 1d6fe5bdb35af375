"""JSON in and out of the store. Step outputs must be JSON: pydantic models and dataclasses
are converted, anything else (a socket, a generator) is refused with the type named, and so
is a NaN or an infinity anywhere inside (JSON has neither; see :func:`dumps_strict`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pydantic_core


class NotSerializableError(TypeError):
    """A value cannot be stored as JSON."""


class NonFiniteError(NotSerializableError):
    """A value holds NaN or an infinity, which JSON cannot represent."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        where = f"output field {path!r}" if path else "output"
        super().__init__(f"{where} is {kind}; JSON has no {kind.lstrip('-')}")


def dumps(value: Any) -> str:
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError as exc:
        match = re.search(r"<class '([^']+)'>", str(exc))
        what = f"type {match.group(1)!r}" if match else str(exc)
        raise NotSerializableError(f"cannot store a value of {what} (return JSON data, a pydantic model "
                                   "or a dataclass)") from None


def dumps_strict(value: Any) -> str:
    """:func:`dumps`, refusing NaN and infinities anywhere inside with :class:`NonFiniteError` (naming the path)."""
    text = dumps(value)
    if "NaN" in text or "Infinity" in text:  # cheap test first; a string holding the word is walked and passes
        found = non_finite(json.loads(text))
        if found is not None:
            raise NonFiniteError(*found)
    return text


def _kind(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def non_finite(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(dotted path, "NaN" | "Infinity" | "-Infinity")`` of the first non-finite number in plain JSON data."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, _kind(value))
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def strict(value: Any) -> Any:
    """Plain JSON data with every non-finite float replaced by None, so ``json.dumps`` writes strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def reject_constant(name: str) -> Any:
    """``json.loads(..., parse_constant=reject_constant)``: refuse the NaN/Infinity that Python's json accepts."""
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def to_plain(value: Any) -> Any:
    """The JSON form of a value (pydantic models and dataclasses become dicts)."""
    return json.loads(dumps(value))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
