"""JSON in and out of the store. Step outputs must be JSON: pydantic models and dataclasses
are converted, anything else (a socket, a generator) is refused with the type named.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic_core


class NotSerializableError(TypeError):
    """A value cannot be stored as JSON."""


def dumps(value: Any) -> str:
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError as exc:
        match = re.search(r"<class '([^']+)'>", str(exc))
        what = f"type {match.group(1)!r}" if match else str(exc)
        raise NotSerializableError(f"cannot store a value of {what} (return JSON data, a pydantic model "
                                   "or a dataclass)") from None


def to_plain(value: Any) -> Any:
    """The JSON form of a value (pydantic models and dataclasses become dicts)."""
    return json.loads(dumps(value))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
