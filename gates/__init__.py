"""Built-in quality gates and the factory that builds gates from workflow specs.

A gate is a tiny object with one method, ``check(output, ctx) -> GateResult``. Importing this
package registers every built-in gate in :data:`BUILTIN_GATES`, so ``build_gate`` can find
them by their YAML name. Heavy dependencies (jsonschema, sentence-transformers) are imported
lazily inside the gates that need them, keeping ``import gates`` cheap for the CLI.
"""

from __future__ import annotations

from gates.base import BUILTIN_GATES, Gate, GateConfigError, GateEvaluation, evaluate, normalize, register
from gates.evidence import Evidence
from gates.factory import FunctionGate, build_gate, construct_gate
from gates.llm_judge import LLMJudge
from gates.max_words import MaxWords
from gates.min_items import MinItems
from gates.not_empty import NotEmpty
from gates.one_of import OneOf
from gates.paths import FieldNotFound, get_field
from gates.range import Range
from gates.regex import Regex
from gates.required_fields import RequiredFields
from gates.schema import Schema
from gates.similarity import Similarity
from orchestrator.spec.model import GateResult

__all__ = [
    "BUILTIN_GATES",
    "Evidence",
    "FieldNotFound",
    "FunctionGate",
    "Gate",
    "GateConfigError",
    "LLMJudge",
    "GateEvaluation",
    "GateResult",
    "MaxWords",
    "MinItems",
    "NotEmpty",
    "OneOf",
    "Range",
    "Regex",
    "RequiredFields",
    "Schema",
    "Similarity",
    "build_gate",
    "construct_gate",
    "evaluate",
    "get_field",
    "normalize",
    "register",
]
