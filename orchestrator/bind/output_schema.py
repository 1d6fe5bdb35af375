"""Checking a value against a step's ``output_schema`` outside a model call.

An LLM step validates the model's answer itself (and asks again on a mismatch); two other kinds of step
declare an ``output_schema`` too, and both check a value that no model produced: an approval step checks a
reviewer's edit of its proposal, and a Python step (``run:``) checks what its function returned.
"""

from __future__ import annotations

import json
from typing import Any

OUTPUT_SCHEMA_ERROR = "OutputSchemaError"
"""``error_type`` of a Python step's attempt whose output does not fit its ``output_schema``."""


def schema_errors(schema: Any, value: Any) -> list[str]:
    """Why ``value`` (plain JSON) does not fit ``schema`` (a pydantic model class, a JSON Schema dict, or None
    for no schema): one line per mismatch, each naming where (``$.refund.amount: ...``); empty when it fits."""
    if schema is None:
        return []
    from orchestrator.llm.structured import validate

    _, errors = validate(schema, json.dumps(value))
    return errors
