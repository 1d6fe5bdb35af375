"""One line for each error pydantic finds in a workflow definition, the same from YAML and from Python.

pydantic's own text ends in a link to its documentation and says "Input should be a valid boolean";
a workflow's author is told instead which value was wrong and what to write, so that the loader
(file:line: key: message) and the Python API (step and key: message) say the same thing.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import ErrorDetails, PydanticCustomError

_STRICT_TYPES = {
    "bool_type": "is not a boolean; write true or false",
    "int_type": "is not a whole number",
    "float_type": "is not a number",
    "string_type": "is not a string",
}
"""Errors of the strict fields: a boolean is true or false and a count a whole number, never "yes" or 1.0."""


def error_message(err: ErrorDetails) -> str:
    """The message of one validation error, without its location (the caller names the key)."""
    kind, given = err["type"], err.get("input")
    if kind == "missing":
        return f"missing required key {err['loc'][-1]!r}"
    if kind == "value_error":  # the spec's own checks: their message names the value already
        return str(err["msg"]).removeprefix("Value error, ")
    if kind in _STRICT_TYPES:
        return f"{_shown(given)} {_STRICT_TYPES[kind]}"
    return f"{err['msg']} (got {_shown(given)})"


def _shown(value: Any) -> str:
    """A YAML author's view of a value: true/false and null as written in YAML, others as Python shows them."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return repr(value)


def no_boolean(value: Any) -> Any:
    """A number field's before-validator (seconds, a threshold): ``true`` is refused rather than read as 1.0.
    Number fields are not strict otherwise, since YAML 1.1 reads ``1e3`` (no dot) as a string that pydantic
    then reads as the number it is."""
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


def _union_member(loc: tuple[Any, ...], data: Any) -> int | None:
    """Where in ``loc`` pydantic put the name of a union's member (``tools[0].ToolRef.approve``): the first
    key that the data at that point does not hold. None when every key is the data's own."""
    cursor = data
    for position, item in enumerate(loc):
        if isinstance(item, str) and not (isinstance(cursor, dict) and item in cursor):
            return position if position else None
        try:
            cursor = cursor[item]
        except (KeyError, IndexError, TypeError):
            return None
    return None


def without_union_members(errors: list[Any], data: Any) -> list[Any]:
    """The errors of a union (``str | ToolRef``) as the member the value was meant for: a member whose shape
    the value does not have at all (a mapping is no string) is left out when another member has a deeper
    complaint, and the member's name is dropped from the location."""
    deeper: set[tuple[Any, ...]] = set()
    members: list[int | None] = []
    for err in errors:
        loc = tuple(err["loc"])
        at = _union_member(loc[:-1] if err["type"] == "missing" else loc, data)  # a missing key is absent
        members.append(at)
        if at is not None and len(loc) > at + 1:
            deeper.add(tuple(err["loc"][:at]))
    kept = []
    for err, at in zip(errors, members, strict=True):
        if at is None:
            kept.append(err)
        elif len(err["loc"]) > at + 1 or tuple(err["loc"][:at]) not in deeper:
            kept.append({**err, "loc": (*err["loc"][:at], *err["loc"][at + 1:])})
    return kept
