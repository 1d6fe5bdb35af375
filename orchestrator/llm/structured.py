"""Structured output: the schema the model is asked for, and checking what it returned.

A step's ``output_schema`` is either a pydantic model class (Python workflows) or an inline
JSON Schema dict (YAML workflows). Either way the stored output is plain JSON, so a pydantic
result is dumped back to a dict: the store and downstream steps never see model instances.
Errors are short readable strings because they are fed back to the model in a re-ask and
shown to reviewers.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from pydantic import BaseModel, TypeAdapter, ValidationError

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def _is_model(source: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(source, type) and issubclass(source, BaseModel)


def schema_of(source: Any) -> dict[str, Any]:
    """The JSON Schema of a pydantic model, a dict schema (returned as is) or any type pydantic knows."""
    if isinstance(source, dict):
        return source
    if _is_model(source):
        return source.model_json_schema()
    return TypeAdapter(source).json_schema()


def parse_json(text: str) -> Any:
    """JSON from a model answer, tolerating a Markdown code fence around it."""
    match = _FENCE.match(text)
    return json.loads(match.group(1) if match else text)


def _where(path: Any) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    return f"${parts}"


def validate(schema_source: Any, text: str) -> tuple[Any, list[str]]:
    """``(value, errors)``: the validated JSON value (``None`` with errors when invalid)."""
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]
    if isinstance(schema_source, dict):
        return _validate_dict(schema_source, data)
    try:
        if _is_model(schema_source):
            return schema_source.model_validate(data).model_dump(mode="json"), []
        adapter: TypeAdapter[Any] = TypeAdapter(schema_source)
        return adapter.dump_python(adapter.validate_python(data), mode="json"), []
    except ValidationError as exc:
        return None, [f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors()]


def _validate_dict(schema: dict[str, Any], data: Any) -> tuple[Any, list[str]]:
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return None, [f"the output schema itself is invalid: {exc.message}"]
    errors = sorted(cls(schema).iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        return None, [f"{_where(e.absolute_path)}: {e.message}" for e in errors]
    return data, []
