"""JSON in and out of the store. Step outputs must be JSON: pydantic models and dataclasses
are converted, anything else (a socket, a generator, a set, a datetime, bytes) is refused with
the field and the type named, and so is a NaN or an infinity anywhere inside (JSON has neither;
see :func:`dumps_strict`). Nothing is converted silently: a set would be stored in hash order
(another order in every process), a generator consumed, a datetime written without its time zone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from typing import Any

import pydantic_core
from pydantic import BaseModel

MAX_DEPTH = 200
"""How deeply JSON values may nest (objects and arrays inside each other), in files read and in step
outputs: past it Python's parser and the serializer run out of stack, so the value is refused instead."""


class NotSerializableError(TypeError):
    """A value cannot be stored as JSON."""


class NonFiniteError(NotSerializableError):
    """A value holds NaN or an infinity, which JSON cannot represent."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        where = f"output field {path!r}" if path else "output"
        super().__init__(f"{where} is {kind}; JSON has no {kind.lstrip('-')}")


class NotJsonError(NotSerializableError):
    """A value holds something that is not JSON data (a set, bytes, a datetime, a tuple key...)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        where = f"output field {path!r}" if path else "output"
        super().__init__(f"{where} {problem}")


_ADVICE = {
    "set": "JSON has no sets (return a list, e.g. sorted(...))",
    "bytes": "JSON has no bytes (decode it to text, or base64-encode it)",
    "datetime": "return an ISO 8601 string with its time zone (value.isoformat())",
    "iterator": "it would be consumed once (return a list)",
}


def _problem(value: Any) -> str:
    """Why a value that is neither JSON data, a pydantic model nor a dataclass is refused."""
    import datetime
    from collections.abc import Iterator

    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(value, (set, frozenset)):
        return f"is {article} {kind}; {_ADVICE['set']}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"is {kind}; {_ADVICE['bytes']}"
    if isinstance(value, (datetime.date, datetime.time)):
        return f"is {article} {kind}; {_ADVICE['datetime']}"
    if isinstance(value, Iterator):
        return f"is {article} {kind}; {_ADVICE['iterator']}"
    return f"is {article} {kind}; return JSON data, a pydantic model or a dataclass"


class _Found(Exception):
    """Raised inside :func:`_check` with the problem; each container on the way out adds its key."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.keys: list[Any] = []


_PLAIN = frozenset({str, float, bool, type(None)})
_QUICK_INT_BITS = 4096
"""Integers up to this many bits (about 1233 digits) are within every digit limit, unchecked."""


def refuse_non_json(value: Any) -> None:
    """Raise :class:`NotJsonError` naming the first field that is not JSON data.

    JSON data is dicts with string keys (int keys are written as their digits, as ``json.dumps``
    does), lists, tuples, strings, numbers, booleans and None, nested at most :data:`MAX_DEPTH`
    deep; a pydantic model serializes as it declares, a dataclass's fields are checked like a dict's.
    """
    if type(value) in _PLAIN or _small_int(value):
        return
    try:
        _check(value, 0)
    except _Found as found:
        keys = found.keys[::-1]
        if found.problem.startswith("is nested deeper"):
            keys = keys[:1]  # the field it starts under; the full path is hundreds of keys long
        raise NotJsonError(".".join(map(str, keys)), found.problem) from None


def _small_int(item: Any) -> bool:
    return type(item) is int and item.bit_length() <= _QUICK_INT_BITS


def _check(item: Any, depth: int) -> None:
    """Walk ``item`` (not a plain scalar); exact types first, as step outputs are mostly dicts and lists."""
    kind = type(item)
    if kind is dict or kind is list or kind is tuple:
        _check_container(item, depth, kind is dict)
    elif isinstance(item, int):
        if item.bit_length() > _QUICK_INT_BITS:
            limit = sys.get_int_max_str_digits()
            if limit and item.bit_length() > limit * math.log2(10):
                raise _Found(f"is an integer of more than {limit} digits, which JSON readers refuse "
                             "(return it as a string)")
    elif isinstance(item, (str, float, BaseModel)):
        return
    elif isinstance(item, (dict, list, tuple)):
        _check_container(item, depth, isinstance(item, dict))
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        _check_container({f.name: getattr(item, f.name) for f in dataclasses.fields(item)}, depth, True)
    else:
        raise _Found(_problem(item))


def _check_container(item: Any, depth: int, is_dict: bool) -> None:
    if depth >= MAX_DEPTH:
        raise _Found(f"is nested deeper than {MAX_DEPTH} levels; flatten it")
    key: Any = None
    try:
        if is_dict:
            for key, sub in item.items():
                if type(key) is not str and (not isinstance(key, (str, int)) or isinstance(key, bool)):
                    problem = f"has a key of type {type(key).__name__} ({key!r}); JSON object keys are strings"
                    key = None
                    raise _Found(problem)
                if type(sub) not in _PLAIN and not _small_int(sub):
                    _check(sub, depth + 1)
        else:
            kinds = set(map(type, item))  # a long list of numbers or strings is checked at C speed
            if kinds <= _PLAIN or (kinds == {int} and max(map(int.bit_length, item)) <= _QUICK_INT_BITS):
                return
            for key, sub in enumerate(item):  # noqa: B007 (the except clause below reads it)
                if type(sub) not in _PLAIN and not _small_int(sub):
                    _check(sub, depth + 1)
    except _Found as found:
        if key is not None:
            found.keys.append(key)
        raise


def dumps(value: Any) -> str:
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError as exc:
        match = re.search(r"<class '([^']+)'>", str(exc))
        what = f"type {match.group(1)!r}" if match else str(exc)
        raise NotSerializableError(f"cannot store a value of {what} (return JSON data, a pydantic model "
                                   "or a dataclass)") from None


def dumps_strict(value: Any) -> str:
    """:func:`dumps` of a value from user code: anything but JSON data, a pydantic model or a dataclass
    is refused (:func:`refuse_non_json`), and so are NaN and infinities anywhere inside
    (:class:`NonFiniteError`), each naming the field."""
    refuse_non_json(value)
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


class TooDeepError(ValueError):
    """A JSON document nests deeper than :data:`MAX_DEPTH`."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested deeper than {MAX_DEPTH} levels")


def loads_document(text: str) -> Any:
    """Parse a JSON document a user gave (a file, a line of one): ValueError for what is not JSON,
    NaN and Infinity included (Python's json accepts them), :class:`TooDeepError` past :data:`MAX_DEPTH`."""
    if _nesting(text) > MAX_DEPTH:  # before parsing: Python's parser would recurse until the stack runs out
        raise TooDeepError()
    try:
        return json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise TooDeepError() from None


_KEPT = b'[]{}"'
_NOT_KEPT = bytes(b for b in range(256) if b not in _KEPT)
_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")


def _nesting(text: str) -> int:
    """How deeply arrays and objects nest in JSON text, without parsing it (at most ``MAX_DEPTH + 1``).

    All in C loops: escaped backslashes and quotes go, then every byte but brackets and quotes, then
    what lies between quotes (strings); each pass over what is left removes the innermost pairs.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    kept = text.replace("\\\\", "").replace('\\"', "").encode("utf-8", "surrogatepass").translate(None, _NOT_KEPT)
    brackets = b"".join(kept.split(b'"')[::2]).translate(_AS_PARENS)
    depth = 0
    while brackets and depth <= MAX_DEPTH:
        inner = brackets.replace(b"()", b"")
        if inner == brackets:
            break  # unbalanced: the parser says what is wrong
        brackets, depth = inner, depth + 1
    return depth


def to_plain(value: Any) -> Any:
    """The JSON form of a value (pydantic models and dataclasses become dicts)."""
    return json.loads(dumps(value))


def output_to_plain(value: Any) -> Any:
    """The JSON form of an output from user code (an edit, a replacement, a replayed step); refuses
    what :func:`dumps_strict` refuses, naming the field."""
    return json.loads(dumps_strict(value))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
