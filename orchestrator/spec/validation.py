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
