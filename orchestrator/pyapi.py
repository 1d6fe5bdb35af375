"""Define workflows in Python: a :class:`Workflow` object and its ``step`` decorator.

The decorator records the same keys a YAML step has, and ``Workflow.spec`` produces the same
:class:`~orchestrator.model.WorkflowSpec` a YAML file would, with ``run`` set to the
function's ``module:qualname``, so a Python definition and its YAML twin compare equal. The
functions themselves travel beside the spec (``Workflow.objects``), keyed by those references,
and :meth:`Workflow.bind` hands both to the binder. Inputs left out are inferred from parameter
names, as Hamilton does: a parameter named like a workflow input reads ``$inputs.NAME``, one
named like an earlier step reads that step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from orchestrator.binding import BoundWorkflow, bind, gate_object_key
from orchestrator.errors import SpecError, SpecProblem
from orchestrator.model import GateSpec, StepSpec, WorkflowSpec

STEP_KEYS = frozenset(StepSpec.model_fields) - {"run"}
"""The keywords ``@wf.step(...)`` accepts: the YAML step keys (``run`` is the function itself)."""


def _ref(fn: Any) -> str | None:
    if isinstance(fn, str) or fn is None:
        return fn
    return f"{fn.__module__}:{fn.__qualname__}"


def _where(fn: Callable[..., Any]) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        return f"{fn.__module__}"


class Workflow:
    """A workflow under construction in Python.

    Example::

        wf = Workflow("hello", inputs={"name": "string"}, output="shout")

        @wf.step(type="retrieval")
        def greet(name: str) -> dict: ...
    """

    def __init__(self, name: str, *, version: int | str = 1, description: str | None = None,
                 inputs: dict[str, Any] | None = None, output: str | None = None,
                 outcome: str | Callable[..., float] | None = None, outcome_threshold: float = 0.5) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.inputs = dict(inputs or {})
        self.output = output
        self.outcome = outcome
        self.outcome_threshold = outcome_threshold
        self._steps: list[tuple[Callable[..., Any], dict[str, Any]]] = []

    def step(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register ``fn`` as a step; usable as ``@wf.step`` or ``@wf.step(type=..., gates=[...])``.

        Keyword options are the YAML step keys (``id``, ``type``, ``agent``, ``inputs``, ``after``,
        ``needs``, ``description``, ``gates``, ``on_gate_fail``, ``retry``, ``timeout``, ``baseline``,
        ``verifies``, ``side_effects``, ``review_timeout``, ``on_review_timeout``); an unknown one is
        a SpecError naming it and the valid keys, as in YAML.
        """
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            unknown = sorted(set(options) - STEP_KEYS)
            if unknown:
                raise SpecError([SpecProblem(_where(func), f"steps.{options.get('id', func.__name__)}",
                                             f"unknown key {unknown[0]!r} in @{self.name}.step(...); "
                                             f"valid keys: {', '.join(sorted(STEP_KEYS))}")])
            self._steps.append((func, options))
            return func

        return register(fn) if fn is not None else register

    @property
    def spec(self) -> WorkflowSpec:
        """The workflow as plain data, equal to its YAML twin."""
        return self._build()[0]

    @property
    def objects(self) -> dict[str, Any]:
        """The Python objects the spec refers to: functions by ``module:qualname``, gate objects by position."""
        return self._build()[1]

    def bind(self, source: str | None = None) -> BoundWorkflow:
        """The workflow ready to run in this process."""
        spec, objects = self._build()
        return bind(spec, source=source, objects=objects, path=source or f"<workflow {self.name}>")

    def _build(self) -> tuple[WorkflowSpec, dict[str, Any]]:
        steps: list[StepSpec] = []
        objects: dict[str, Any] = {}
        known: set[str] = set()
        for fn, options in self._steps:
            opts = dict(options)
            step_id = opts.pop("id", fn.__name__)
            gates = []
            for index, gate in enumerate(opts.pop("gates", [])):
                spec, obj = _gate_spec(gate)
                gates.append(spec)
                if obj is not None:
                    objects[gate_object_key(step_id, index)] = obj
            baseline = opts.pop("baseline", None)
            inputs = opts.pop("inputs", None)
            if inputs is None:
                inputs = self._infer_inputs(fn, known)
            try:
                step = StepSpec(id=step_id, run=_ref(fn), inputs=inputs, baseline=_ref(baseline), gates=gates, **opts)
            except ValidationError as exc:
                raise SpecError([SpecProblem(_where(fn), f"steps.{step_id}.{'.'.join(map(str, e['loc']))}",
                                             f"{e['msg']} (got {e.get('input')!r})") for e in exc.errors()]) from None
            objects[str(step.run)] = fn
            if baseline is not None and not isinstance(baseline, str):
                objects[str(step.baseline)] = baseline
            steps.append(step)
            known.add(step_id)
        if self.outcome is not None and not isinstance(self.outcome, str):
            objects[str(_ref(self.outcome))] = self.outcome
        workflow = WorkflowSpec(name=self.name, version=self.version, description=self.description,
                                inputs=self.inputs, steps=steps, output=self.output,
                                outcome=_ref(self.outcome), outcome_threshold=self.outcome_threshold)
        return workflow, objects

    def _infer_inputs(self, fn: Callable[..., Any], known: set[str]) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for name, param in inspect.signature(fn).parameters.items():
            if name == "ctx" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            if name in known:
                inputs[name] = name
            elif name in self.inputs:
                inputs[name] = f"$inputs.{name}"
        return inputs


def _gate_spec(gate: Any) -> tuple[GateSpec, Any]:
    """A gate as the spec holds it, plus the object when one was given directly."""
    if isinstance(gate, GateSpec):
        return gate, None
    if isinstance(gate, (str, dict)):
        return GateSpec.model_validate(gate), None
    name = getattr(gate, "name", None) or getattr(gate, "__name__", type(gate).__name__)
    return GateSpec(gate=str(name)), gate
