"""Which steps of two versions of a workflow differ: one version hash per step.

An experiment reuses a source run's recorded output of a step only while the step is the same, and
a comparison names the changed steps a flip can be blamed on; both ask this module. A step's hash
covers everything that can change what it returns:

- its definition as written (type, ``run``, inputs, ``params``, prompt, system, output schema, gates,
  retry and timeout policy, ``when``, ``for_each``, ``repeat``, ...);
- the code it calls: the source of its function and of its gates' functions or classes, when Python can
  show it (so ``run: steps:answer`` resolving to a changed file next to another YAML file is a change);
- for a step that calls a model, the workflow's ``llm:`` defaults it inherits (a new default model);
- what its consumers declare they need (``needs``), since it is injected into its context and prompt;
- for a ``workflow:`` step, the hashes of its child workflow's steps.

The code is read as it is now: runs store their workflow's definition, not its code, so a function
edited in place looks the same in both versions; name another function (``run: steps:answer_v2``)
or keep the new version's code in its own file to make the change visible.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from typing import Any

from orchestrator.bind.binding import BoundStep, BoundWorkflow
from orchestrator.core import jsonio


def _code_of(target: Any) -> str:
    """The source of a function or of an object's class, else its qualified name."""
    fn = getattr(target, "__wrapped__", target)
    for candidate in (fn, type(fn)):
        if inspect.isfunction(candidate) or inspect.ismethod(candidate) or inspect.isclass(candidate):
            try:
                return inspect.getsource(candidate)
            except (OSError, TypeError):
                pass
    return f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def _definitions(workflow: BoundWorkflow) -> dict[str, Any]:
    return {str(s.get("id")): s for s in workflow.definition.get("steps", []) if isinstance(s, Mapping)}


def _step_hash(workflow: BoundWorkflow, step: BoundStep, definition: Any) -> str:
    parts: dict[str, Any] = {
        "definition": definition,
        "code": _code_of(step.function.fn),
        "gates": [_code_of(gate.check) for gate in step.gates],
        "needs": step.injected_json,
    }
    if step.spec.calls_model:
        parts["llm"] = workflow.definition.get("llm")
    if step.child is not None:
        parts["child"] = step_hashes(step.child)
    canonical = json.dumps(json.loads(jsonio.dumps(parts)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def step_hashes(workflow: BoundWorkflow) -> dict[str, str]:
    """The version hash of every step of a bound workflow, by step id."""
    definitions = _definitions(workflow)
    return {sid: _step_hash(workflow, step, definitions.get(sid)) for sid, step in workflow.steps.items()}


def changed_steps(before: Mapping[str, str], after: Mapping[str, str], order: tuple[str, ...]) -> list[str]:
    """The steps of ``after`` (in its ``order``) whose hash differs from ``before``'s, or that ``before`` lacks;
    steps ``before`` has and ``after`` lacks come last (a removed step is a change too)."""
    changed = [sid for sid in order if before.get(sid) != after.get(sid)]
    return changed + sorted(sid for sid in before if sid not in after)
