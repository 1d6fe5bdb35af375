"""The JSON Schema of the workflow file format, for editors (``orchestrator schema``)."""

from __future__ import annotations

from typing import Any

from orchestrator.spec.model import EXTENSION_PREFIX, WorkflowSpec


def workflow_json_schema() -> dict[str, Any]:
    schema = WorkflowSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "orchestrator workflow"
    schema["patternProperties"] = {f"^{EXTENSION_PREFIX}": {}}  # ignored keys, for YAML anchors
    defs = schema.get("$defs", {})
    gate = defs.get("GateSpec")
    if gate is not None:
        # YAML gates carry their parameters inline (`- gate: min_items` + `count: 3`), and the
        # short form is a bare name (`- not_empty`).
        gate["additionalProperties"] = True
        defs["GateSpec"] = {"anyOf": [gate, {"type": "string"}]}
    return schema
