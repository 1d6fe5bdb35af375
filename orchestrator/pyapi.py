"""Define workflows in Python: a :class:`Workflow` object and its ``step`` decorator.

The decorator records the same keys a YAML step has, and ``Workflow.spec`` produces the same
:class:`~orchestrator.model.WorkflowSpec` a YAML file would, with ``run`` set to the
function's ``module:qualname``, so a Python definition and its YAML twin compare equal.
Inputs left out are inferred from parameter names, as Hamilton does: a parameter named like
a workflow input reads ``$inputs.NAME``, one named like an earlier step reads that step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from orchestrator.model import GateSpec, StepSpec, WorkflowSpec


def _gate_spec(gate: Any) -> GateSpec:
    if isinstance(gate, GateSpec):
        return gate
    if isinstance(gate, (str, dict)):
        return GateSpec.model_validate(gate)
    spec = GateSpec(gate=getattr(gate, "name", None) or getattr(gate, "__name__", type(gate).__name__))
    spec._obj = gate
    return spec


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

        Keyword options mirror the YAML step keys (``id``, ``type``, ``agent``, ``inputs``, ``after``,
        ``needs``, ``description``, ``gates``, ``on_gate_fail``, ``retry``, ``timeout``, ``baseline``,
        ``verifies``, ``side_effects``, ``review_timeout``, ``on_review_timeout``).
        """
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self._steps.append((func, options))
            return func

        return register(fn) if fn is not None else register

    @staticmethod
    def _ref(fn: Any) -> str | None:
        if isinstance(fn, str) or fn is None:
            return fn
        return f"{fn.__module__}:{fn.__qualname__}"

    @property
    def spec(self) -> WorkflowSpec:
        """The checked-in-shape spec; callables are bound so it runs in this process."""
        steps: list[StepSpec] = []
        known: set[str] = set()
        for fn, options in self._steps:
            opts = dict(options)
            step_id = opts.pop("id", fn.__name__)
            gates = [_gate_spec(g) for g in opts.pop("gates", [])]
            baseline = opts.pop("baseline", None)
            inputs = opts.pop("inputs", None)
            if inputs is None:
                inputs = self._infer_inputs(fn, known)
            step = StepSpec(id=step_id, run=self._ref(fn), inputs=inputs, baseline=self._ref(baseline),
                            gates=gates, **opts)
            for src, dst in zip(gates, step.gates, strict=True):
                dst._obj = src._obj
            step._fn = fn
            if baseline is not None and not isinstance(baseline, str):
                step._baseline_fn = baseline
            steps.append(step)
            known.add(step_id)
        spec = WorkflowSpec(name=self.name, version=self.version, description=self.description,
                            inputs=self.inputs, steps=steps, output=self.output,
                            outcome=self._ref(self.outcome), outcome_threshold=self.outcome_threshold)
        if self.outcome is not None and not isinstance(self.outcome, str):
            spec._outcome_fn = self.outcome
        return spec

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
