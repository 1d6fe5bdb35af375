"""Workflow inputs: convert ``--input key=value`` strings to the declared types."""

from __future__ import annotations

import json
import math
from typing import Any

from orchestrator.core import jsonio
from orchestrator.core.errors import InputError
from orchestrator.spec.model import WorkflowSpec

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def convert(name: str, declared: str, raw: Any) -> Any:
    """One value to its declared type; strings from the command line are parsed, JSON values checked."""
    try:
        if declared == "string":
            if isinstance(raw, str):
                return raw
            raise ValueError
        if declared == "integer":
            if isinstance(raw, bool):
                raise ValueError
            if isinstance(raw, int):
                return raw
            return int(str(raw).strip())
        if declared == "number":
            if isinstance(raw, bool):
                raise ValueError
            number = float(raw) if isinstance(raw, (int, float)) else float(str(raw).strip())
            if not math.isfinite(number):  # float() accepts "nan" and "inf"; JSON and the store do not
                raise InputError(f"input {name!r} must be a finite number; got {raw!r}")
            return number
        if declared == "boolean":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError
        expected = dict if declared == "object" else list
        value = json.loads(raw, parse_constant=jsonio.reject_constant) if isinstance(raw, str) else raw
        if not isinstance(value, expected):
            raise ValueError
        found = jsonio.non_finite(value)
        if found is not None:
            where = f" field {found[0]!r}" if found[0] else ""
            raise InputError(f"input {name!r}{where} is {found[1]}; JSON has no {found[1].lstrip('-')}")
        return value
    except (ValueError, json.JSONDecodeError):
        raise InputError(f"input {name!r} must be {'an' if declared[0] in 'aeiou' else 'a'} {declared}; "
                         f"got {raw!r}") from None


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict, with a clear error for a pair without ``=``."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise InputError(f"--input {pair!r} must look like key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def resolve_inputs(spec: WorkflowSpec, given: dict[str, Any]) -> dict[str, Any]:
    """Check names, fill defaults and convert types; raises InputError naming the input. A null given for an
    input that has a default takes the default (a loop's ``$previous`` is null on its first iteration)."""
    unknown = sorted(set(given) - set(spec.inputs))
    if unknown:
        raise InputError(f"workflow {spec.name!r} has no input {unknown[0]!r}; declared inputs: {sorted(spec.inputs)}")
    values: dict[str, Any] = {}
    for name, decl in spec.inputs.items():
        if name in given and not (given[name] is None and decl.default is not None):
            values[name] = convert(name, decl.type, given[name])
        elif decl.default is not None:
            values[name] = decl.default
        else:
            raise InputError(f"workflow {spec.name!r} needs input {name!r} ({decl.type}); pass --input {name}=...")
    return values
