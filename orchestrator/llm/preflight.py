"""The model configuration of a workflow, checked before any model call.

A paid call whose answer cannot be used is the worst way to find a typo: an ``output_schema``
that is no JSON Schema, or a price file (``$ORCHESTRATOR_LLM_PRICES``) that is missing or
malformed, would fail the step only after the model answered. :func:`config_problems` finds
both when the workflow is bound (``validate``, and every run before anything is stored).
:func:`key_warnings` names an ``api_key_env`` whose variable is not set: a local endpoint is
then called without a key, a remote one fails at its first call, so it is said up front.
"""

from __future__ import annotations

import os
from typing import Any

from orchestrator.spec.llm_errors import LLMError
from orchestrator.spec.model import WorkflowSpec

JUDGE_GATE = "llm_judge"


def calls_a_model(spec: WorkflowSpec) -> bool:
    """Whether any step or gate of the workflow calls a model."""
    return any(step.calls_model or any(g.gate == JUDGE_GATE for g in step.gates) for step in spec.steps)


def price_file_problem() -> str | None:
    """Why the ``$ORCHESTRATOR_LLM_PRICES`` file cannot be used (None when unset or fine)."""
    from orchestrator.llm.pricing import price_table

    try:
        price_table()
    except LLMError as exc:
        return str(exc)
    return None


def schema_problem(schema: Any) -> str | None:
    """Why an ``output_schema`` (an inline dict, or the object a reference resolved to) is unusable."""
    if isinstance(schema, dict):
        from jsonschema import validators
        from jsonschema.exceptions import SchemaError

        try:
            validators.validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            where = "/".join(map(str, exc.absolute_path))
            return f"is not a JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
        return None
    from orchestrator.llm.structured import schema_of

    try:
        schema_of(schema)
    except Exception as exc:  # noqa: BLE001 (pydantic raises several kinds for a type it cannot describe)
        return f"{schema!r} is neither a pydantic model nor a type with a JSON Schema: {type(exc).__name__}"
    return None


def key_warnings(spec: WorkflowSpec) -> list[str]:
    """One line per step whose explicitly named ``api_key_env`` is not set in this environment."""
    from orchestrator.llm.providers.openai_provider import is_local_url
    from orchestrator.llm.step import step_config

    warnings = []
    for step in spec.steps:
        if not step.calls_model:
            continue
        config = step_config(spec, step)
        if config.provider != "openai" or "api_key_env" not in config.model_fields_set \
                or os.environ.get(config.api_key_env):
            continue
        url = config.resolved_base_url() or ""
        then = (f"{url} is on this machine, so it is called without a key" if is_local_url(url)
                else f"its calls to {url} will fail until it is set")
        warnings.append(f"step {step.id!r}: api_key_env names ${config.api_key_env}, which is not set; {then}")
    return warnings
