"""``schema``: the output matches a pydantic model or an inline JSON Schema.

The most common silent failure in an agent pipeline is a step that returns *something*
shaped almost right; later steps then read ``None`` where a price should be. This gate stops
the run at the step that produced the wrong shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, to_jsonable
from orchestrator.bind.resolve import resolve_callable
from orchestrator.core.errors import ResolveError
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult

MAX_ERRORS_SHOWN = 3
"""How many validation errors a reason lists; the rest are counted and kept in details."""


def _resolve_model(model: Any, base_dir: str | Path | None) -> type:
    if isinstance(model, str):
        try:
            model = resolve_callable(model, base_dir)
        except ResolveError as exc:
            raise GateConfigError(f"parameter 'model': {exc}") from None
    if not (isinstance(model, type) and callable(getattr(model, "model_validate", None))):
        raise GateConfigError(f"parameter 'model' must name a pydantic model class, got {model!r}")
    return model


@register
@dataclasses.dataclass(frozen=True)
class Schema:
    """Validate the output (or one ``field`` of it) against exactly one of ``model`` or ``schema``.

    Args:
        model: ``"module:PydanticModel"`` (resolved next to the workflow file) or the class
            itself; validated with ``model_validate``.
        schema: an inline JSON Schema, validated with the ``jsonschema`` package.
        field: optional dotted path of the part of the output to validate.
    """

    name: ClassVar[str] = "schema"
    model: str | type | None = None
    schema: dict[str, Any] | None = None
    field: str | None = None
    _model_cls: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _validator: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def prepare_params(cls, params: dict[str, Any], *, base_dir: str | Path | None) -> dict[str, Any]:
        """Resolve a ``model`` reference next to the workflow file, not just on the import path."""
        if isinstance(params.get("model"), str) and params.get("schema") is None:
            params = {**params, "model": _resolve_model(params["model"], base_dir)}
        return params

    def __post_init__(self) -> None:
        if (self.model is None) == (self.schema is None):
            raise GateConfigError(
                "give exactly one of 'model' (a pydantic model) or 'schema' (a JSON Schema)")
        if self.model is not None:
            object.__setattr__(self, "_model_cls", _resolve_model(self.model, None))
            return
        if not isinstance(self.schema, Mapping):
            raise GateConfigError(
                f"parameter 'schema' must be a mapping (a JSON Schema), got {self.schema!r}")
        import jsonschema  # lazy: keep `import gates` light

        validator_cls = jsonschema.validators.validator_for(self.schema)
        try:
            validator_cls.check_schema(self.schema)
        except jsonschema.SchemaError as exc:
            path = ".".join(str(p) for p in exc.absolute_path) or "(root)"
            raise GateConfigError(
                f"parameter 'schema' is not a valid JSON Schema at {path}: {exc.message}") from None
        object.__setattr__(self, "_validator", validator_cls(self.schema))

    def _errors(self, value: Any) -> list[tuple[str, str]]:
        """(path, message) pairs, at most a few dozen, in document order."""
        if self._model_cls is not None:
            from pydantic import ValidationError

            try:
                self._model_cls.model_validate(value, from_attributes=not isinstance(value, Mapping))
            except ValidationError as exc:
                return [(".".join(str(p) for p in err["loc"]) or "(root)", err["msg"])
                        for err in exc.errors()]
            return []
        errors = sorted(self._validator.iter_errors(to_jsonable(value)),
                        key=lambda e: [(0, p, "") if isinstance(p, int) else (1, 0, str(p))
                                       for p in e.absolute_path])
        return [(".".join(str(p) for p in e.absolute_path) or "(root)", e.message) for e in errors]

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        against = f"model {self._model_cls.__name__}" if self._model_cls is not None else "the JSON Schema"
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc), details={"field": self.field})
        errors = self._errors(value)
        if not errors:
            return GateResult(passed=True, score=1.0, reason=f"{describe(self.field)} matches {against}")
        shown = "; ".join(f"{path}: {msg}" for path, msg in errors[:MAX_ERRORS_SHOWN])
        more = f"; and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        noun = "error" if len(errors) == 1 else "errors"
        return GateResult(
            passed=False,
            score=0.0,
            reason=f"{describe(self.field)} does not match {against}: {len(errors)} {noun}: {shown}{more}",
            details={"errors": [{"path": p, "message": m} for p, m in errors[:50]],
                     "error_count": len(errors)},
        )
