"""Define workflows in Python: a :class:`Workflow` object and its ``step`` decorator.

The decorator records the same keys a YAML step has, and ``Workflow.spec`` produces the same
:class:`~orchestrator.spec.model.WorkflowSpec` a YAML file would, with ``run`` set to the
function's ``module:qualname``, so a Python definition and its YAML twin compare equal. The
functions themselves travel beside the spec (``Workflow.objects``), keyed by step (two lambdas, or
two closures made by one factory, share a qualified name, and each step keeps its own function),
and :meth:`Workflow.bind` hands both to the binder. Inputs left out are inferred from parameter
names, as Hamilton does: a parameter named like a workflow input reads ``$inputs.NAME``, one
named like an earlier step reads that step.

LLM steps take the same keys as in YAML: ``@wf.llm(prompt=..., output_schema=Model, tools=[fn])``
decorates a function that post-processes the model's answer (it receives the step's inputs plus
``reply``), and ``wf.llm_step(id=..., prompt=...)`` declares one with no function. Objects given
for ``output_schema`` (a pydantic model class) and ``tools`` (callables) become ``module:qualname``
references in the spec and travel in ``Workflow.objects`` like step functions.

Control flow takes the YAML keys too: ``when=`` an expression (kept as the same string, so the YAML twin
compares equal) or a function called with the upstream outputs its parameters name (stored as a
:class:`~orchestrator.spec.model.ConditionCall`, the function travelling in ``objects`` like a step's);
``join=``, ``for_each=`` and ``max_parallel=``. On a mapped step a parameter named ``item`` reads
``$item`` and one named ``index`` reads ``$index``. ``repeat=`` takes ``{"until": ..., "max": N}`` or an
:class:`~orchestrator.spec.model.Repeat`; on such a step a parameter named ``previous`` reads ``$previous`` (the
previous iteration's output) and one named ``iteration`` reads ``$iteration``.

A step that runs another workflow as a child run is declared with ``wf.workflow_step(id=...,
workflow=child)``: ``child`` is another :class:`Workflow` (stored in the spec as ``module:variable``,
the object travelling in ``objects``) or a file path resolved next to this workflow's file, as in YAML.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from orchestrator.bind.binding import BoundWorkflow, DefinesWorkflow, bind, gate_object_key, step_object_key
from orchestrator.bind.loader import child_loader
from orchestrator.core.errors import SpecError, SpecProblem
from orchestrator.llm.step import REPLY_PARAMETER
from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.model import ConditionCall, GateSpec, StepSpec, ToolRef, WorkflowSpec
from orchestrator.spec.validation import error_message, without_union_members

STEP_KEYS = frozenset(StepSpec.model_fields) - {"run"}
"""The keywords ``@wf.step(...)`` and ``@wf.llm(...)`` accept: the YAML step keys (``run`` is the function itself)."""

LLM_KEYS = frozenset({"prompt", "system", "output_schema", "tools", "max_turns", "inject_needs", "max_tokens", "stream",
                      "llm"})
"""The keys that belong to LLM steps (``@wf.llm``, ``wf.llm_step``); all are also in :data:`STEP_KEYS`."""


class _Unreferable(ValueError):
    """An object given where a function, class or ``module:name`` string belongs, which has no name to store;
    ``key`` says where it was given (``baseline``, ``tools[1]``), once known."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


def _ref(fn: Any) -> str | None:
    if isinstance(fn, str) or fn is None:
        return fn
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise _Unreferable(f"{fn!r} is not a function, a class or a 'module:name' reference")
    return f"{module}:{name}"


def _spec_error(where: str, prefix: str, exc: ValidationError, given: Any = None) -> SpecError:
    """A SpecError of pydantic's errors, each at ``prefix`` and its key (``gates[0].timeout``), worded as the YAML
    loader words them; ``given``: the values validated, to tell a union's member from a key."""
    problems = []
    for err in without_union_members(list(exc.errors()), given):
        key = prefix
        for part in err["loc"]:
            key = f"{key}[{part}]" if isinstance(part, int) else f"{key}.{part}" if key else str(part)
        problems.append(SpecProblem(where, key, error_message(err)))
    return SpecError(problems)


def _caller() -> str:
    """``file:line`` of the code that called the public method calling this (for error messages)."""
    frame = inspect.currentframe()
    for _ in range(2):
        frame = frame.f_back if frame is not None else None
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "<unknown>"


def _where(fn: Callable[..., Any]) -> str:
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        return f"{fn.__module__}"


class Workflow(DefinesWorkflow):
    """A workflow under construction in Python.

    Example::

        wf = Workflow("hello", inputs={"name": "string"}, output="shout")

        @wf.step(type="retrieval")
        def greet(name: str) -> dict: ...
    """

    def __init__(self, name: str, *, version: int | str = 1, description: str | None = None,
                 inputs: dict[str, Any] | None = None, output: str | None = None,
                 outcome: str | Callable[..., float] | None = None, outcome_threshold: float = 0.5,
                 llm: LLMConfig | Mapping[str, Any] | None = None,
                 notify: str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]] | None = None) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.inputs = dict(inputs or {})
        self.output = output
        self.outcome = outcome
        self.outcome_threshold = outcome_threshold
        self.llm_config = llm
        """Defaults of every model call (the YAML ``llm:`` block); a step's ``llm=`` overrides any key."""
        self.notify = notify
        """Who is told when a run pauses (the YAML ``notify:``): a URL, a target mapping, or a list of them."""
        self._steps: list[_Registered] = []
        self._bound: tuple[tuple[Any, ...], BoundWorkflow] | None = None
        """The last :meth:`bind` and what it was built from: binding a large workflow (pydantic models,
        signature checks, the definition's hash) costs more than running it, and runs repeat."""
        caller = inspect.currentframe()
        caller = caller.f_back if caller is not None else None
        self._module_globals: dict[str, Any] = caller.f_globals if caller is not None else {}
        """The namespace of the module that made it: where a parent workflow finds the variable naming it."""

    @property
    def defined_in(self) -> str | None:
        """The file of the module that made this workflow (None in an interactive session)."""
        found = self._module_globals.get("__file__")
        return str(found) if found else None

    @property
    def reference(self) -> str:
        """``module:variable``: how a parent workflow's spec names this one (``workflow:``). A workflow that
        is no module-level variable is named ``module:NAME`` by its name; it runs in this process, but a
        child run of it cannot be resumed by another process."""
        module = self._module_globals.get("__name__", "__main__")
        variable = next((name for name, value in self._module_globals.items() if value is self), self.name)
        return f"{module}:{variable}"

    def step(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register ``fn`` as a step; usable as ``@wf.step`` or ``@wf.step(type=..., gates=[...])``.

        Keyword options are the YAML step keys (``id``, ``type``, ``agent``, ``inputs``, ``after``,
        ``needs``, ``description``, ``gates``, ``on_gate_fail``, ``retry``, ``timeout``, ``baseline``,
        ``verifies``, ``side_effects``, ``simulate``, ``params`` (literal keyword arguments),
        ``isolation``, ``inline``, ``review_timeout``, ``on_review_timeout``, ``when``, ``join``,
        ``for_each``, ``max_parallel``, ``repeat``); an unknown one is a SpecError naming it and the valid
        keys, as in YAML. ``when`` may be a function: it is called with the outputs of the steps its parameters
        name (and ``inputs``, ``item``, ``index``) and the step runs when it returns something true.
        """
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self._check_keys(options, options.get("id", func.__name__), "step", _where(func))
            self._steps.append(_Registered(func, dict(options), _where(func)))
            return func

        return register(fn) if fn is not None else register

    def llm(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register ``fn`` as an LLM step that post-processes the model's answer: ``@wf.llm(prompt=...)``.

        The keywords are the YAML step keys, the LLM ones included (``prompt``, ``system``,
        ``output_schema``, ``tools``, ``max_turns``, ``inject_needs``, ``max_tokens``, ``stream``, ``llm``);
        ``prompt`` is required and ``type`` defaults to ``llm``. ``output_schema`` may be a pydantic
        model class (or an inline JSON Schema dict) and ``tools`` plain functions; they become
        ``module:qualname`` references. The function receives the step's inputs plus ``reply`` (the
        model's answer, validated against ``output_schema``) and returns the step's output; inputs
        left out are inferred from its other parameters.
        """
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            where = _where(func)
            step_id = options.get("id", func.__name__)
            self._check_keys(options, step_id, "llm", where)
            self._require_prompt(options, step_id, "llm", where)
            self._steps.append(_Registered(func, {"type": "llm", **options}, where))
            return func

        return register(fn) if fn is not None else register

    def llm_step(self, **options: Any) -> str:
        """Declare an LLM step with no function: its output is the model's (validated) answer.

        Takes the same keywords as :meth:`llm` plus a required ``id``; ``inputs`` left out are the
        template's variables that name a workflow input or an earlier step. Returns the step id.
        """
        where = _caller()
        step_id = options.get("id")
        self._check_keys(options, step_id or "?", "llm_step", where)
        if not isinstance(step_id, str):
            raise SpecError([SpecProblem(where, "steps", f"{self.name}.llm_step(...) needs id='STEP_ID'")])
        self._require_prompt(options, step_id, "llm_step", where)
        self._steps.append(_Registered(None, {"type": "llm", **options}, where))
        return step_id

    def approval_step(self, **options: Any) -> str:
        """Declare a step that waits for a person: ``wf.approval_step(id="confirm", inputs={"refund": "decide"})``.

        Its inputs, as one object, are the proposal a person approves (its output), edits (checked only by
        ``output_schema``, a JSON Schema dict or a pydantic model) or rejects. The other keywords are the YAML
        step keys an approval step may have. Returns the step id.
        """
        where = _caller()
        step_id = options.get("id")
        self._check_keys(options, step_id or "?", "approval_step", where)
        if not isinstance(step_id, str):
            raise SpecError([SpecProblem(where, "steps", f"{self.name}.approval_step(...) needs id='STEP_ID'")])
        self._steps.append(_Registered(None, {**options, "type": "approval"}, where))
        return step_id

    def workflow_step(self, **options: Any) -> str:
        """Declare a step that runs another workflow as a child run: ``wf.workflow_step(id="research",
        workflow=research, inputs={"topic": "$inputs.topic"})``.

        ``workflow`` is a :class:`Workflow` object or a file path (resolved next to this workflow's file);
        the other keywords are the YAML step keys (``inputs`` are the child's inputs; ``gates`` judge the
        child's output; ``for_each`` runs one child per item). Inputs left out are the child's declared
        inputs that name a workflow input or an earlier step. Returns the step id.
        """
        where = _caller()
        step_id = options.get("id")
        self._check_keys(options, step_id or "?", "workflow_step", where)
        if not isinstance(step_id, str):
            raise SpecError([SpecProblem(where, "steps", f"{self.name}.workflow_step(...) needs id='STEP_ID'")])
        child = options.get("workflow")
        if child is self:
            raise SpecError([SpecProblem(where, f"steps.{step_id}.workflow",
                                         f"workflow includes itself: {self.name} -> {self.name}")])
        if not isinstance(child, (str, Workflow)):
            raise SpecError([SpecProblem(where, f"steps.{step_id}.workflow",
                                         f"{self.name}.workflow_step(...) needs workflow= a Workflow object or a "
                                         f"file path; got {type(child).__name__}")])
        self._steps.append(_Registered(None, dict(options), where))
        return step_id

    def _check_keys(self, options: Mapping[str, Any], step_id: str, method: str, where: str) -> None:
        unknown = sorted(set(options) - STEP_KEYS)
        if unknown:
            prefix = "@" if method not in ("llm_step", "workflow_step", "approval_step") else ""
            raise SpecError([SpecProblem(where, f"steps.{step_id}",
                                         f"unknown key {unknown[0]!r} in {prefix}{self.name}.{method}(...); "
                                         f"valid keys: {', '.join(sorted(STEP_KEYS))}")])

    def _require_prompt(self, options: Mapping[str, Any], step_id: str, method: str, where: str) -> None:
        if not isinstance(options.get("prompt"), str):
            raise SpecError([SpecProblem(where, f"steps.{step_id}.prompt",
                                         f"{self.name}.{method}(...) needs prompt='...' (a Jinja2 template of the "
                                         "user message)")])

    @property
    def spec(self) -> WorkflowSpec:
        """The workflow as plain data, equal to its YAML twin."""
        return self._build()[0]

    @property
    def objects(self) -> dict[str, Any]:
        """The Python objects the spec refers to: step functions (``run``, ``baseline``, ``simulate``) by step
        (:func:`~orchestrator.bind.binding.step_object_key`), output models, tools and the outcome evaluator by
        ``module:qualname``, gate objects by position."""
        return self._build()[1]

    def bind(self, source: str | None = None) -> BoundWorkflow:
        """The workflow ready to run in this process; bound again only after the workflow changed."""
        key = self.fingerprint(source)
        if self._bound is not None and self._bound[0] == key:
            return self._bound[1]
        spec, objects = self._build()
        base_dir = os.path.dirname(source) if source else (os.path.dirname(self.defined_in)
                                                          if self.defined_in else None)
        bound = bind(spec, source=source, objects=objects, path=source or f"<workflow {self.name}>",
                     load_child=child_loader(base_dir))
        self._bound = (key, bound)
        return bound

    def fingerprint(self, source: str | None, seen: frozenset[int] = frozenset()) -> tuple[Any, ...]:
        """What :meth:`_build` reads: every registration (by identity and options) and every attribute, and
        those of the child workflows it runs (a child that changed binds the parent again)."""
        seen = seen | {id(self)}
        children = tuple(child.fingerprint(None, seen) for child in (r.options.get("workflow") for r in self._steps)
                         if isinstance(child, Workflow) and id(child) not in seen)
        return (source, self.name, self.version, self.description, repr(self.inputs), self.output,
                self.outcome, self.outcome_threshold, repr(self.llm_config), repr(self.notify),
                tuple((id(r), r.fn, repr(r.options)) for r in self._steps), children)

    def _build(self) -> tuple[WorkflowSpec, dict[str, Any]]:
        steps: list[StepSpec] = []
        objects: dict[str, Any] = {}
        known: set[str] = set()
        for registered in self._steps:
            step_id = registered.options.get("id", registered.fn.__name__ if registered.fn is not None else "")
            try:
                steps.append(self._build_step(registered, objects, known))
            except _Unreferable as exc:
                where = ".".join(filter(None, ("steps", step_id, exc.key)))
                raise SpecError([SpecProblem(registered.where, where, f"step {step_id!r}: {exc}")]) from None
            known.add(step_id)
        if self.outcome is not None and not isinstance(self.outcome, str):
            try:
                _keep(objects, str(_ref(self.outcome)), self.outcome, f"<workflow {self.name}>")
            except _Unreferable as exc:
                raise SpecError([SpecProblem(f"<workflow {self.name}>", "outcome", str(exc))]) from None
        try:
            fields: dict[str, Any] = {"llm": self.llm_config}  # a mapping is validated like YAML's llm: block
            if self.notify is not None:  # validated like YAML's notify: (one URL, one target, or a list)
                fields["notify"] = self.notify if isinstance(self.notify, str | Mapping) else list(self.notify)
            workflow = WorkflowSpec(name=self.name, version=self.version, description=self.description,
                                    inputs=self.inputs, steps=steps, output=self.output,
                                    outcome=_ref(self.outcome), outcome_threshold=self.outcome_threshold, **fields)
        except ValidationError as exc:
            raise _spec_error(f"<workflow {self.name}>", "", exc) from None
        return workflow, objects

    def _build_step(self, registered: _Registered, objects: dict[str, Any], known: set[str]) -> StepSpec:
        """One registered step as the spec holds it; its objects go into ``objects``. SpecError naming the step
        and the key for a value that does not fit, _Unreferable for an object with no name to store."""
        fn = registered.fn
        opts = dict(registered.options)
        step_id = opts.pop("id", fn.__name__ if fn is not None else "")
        gates = []
        given_gates = opts.pop("gates", None)
        if given_gates is None:
            given_gates = []
        if not isinstance(given_gates, list | tuple):
            raise SpecError([SpecProblem(registered.where, f"steps.{step_id}.gates",
                                         f"step {step_id!r} gates takes a list; got {given_gates!r}")])
        for index, gate in enumerate(given_gates):
            spec, obj = _gate_spec(gate, step_id, index, registered.where)
            gates.append(spec)
            if obj is not None:
                objects[gate_object_key(step_id, index)] = obj
        baseline = opts.pop("baseline", None)
        simulate = opts.pop("simulate", None)
        when = opts.get("when")
        if callable(when):
            opts["when"] = _condition_call(when)
            objects[step_object_key(step_id, "when")] = when
        for key, value in _object_refs(opts, objects, registered.where).items():
            opts[key] = value
        child = opts.get("workflow")
        if isinstance(child, Workflow):
            opts["workflow"] = child.reference
            objects[step_object_key(step_id, "workflow")] = child
        inputs = opts.pop("inputs", None)
        if inputs is None and isinstance(child, Workflow):
            inputs = self._child_inputs(child, known, literal=opts.get("params") or {})
        elif inputs is None:
            inputs = (self._infer_inputs(fn, known, calls_model=opts.get("prompt") is not None,
                                         literal=opts.get("params") or {}, mapped=opts.get("for_each") is not None,
                                         loops=opts.get("repeat") is not None)
                      if fn is not None else self._template_inputs(opts, known))
        references: dict[str, str | None] = {}
        for key, value in (("run", fn), ("baseline", baseline), ("simulate", simulate)):
            try:
                references[key] = _ref(value)
            except _Unreferable as exc:
                raise _Unreferable(str(exc), key) from None
        try:
            step = StepSpec(id=step_id, inputs=inputs, gates=gates, run=references["run"],
                            baseline=references["baseline"], simulate=references["simulate"], **opts)
        except ValidationError as exc:
            given = {"id": step_id, "inputs": inputs, "gates": gates, **references, **opts}
            raise _spec_error(registered.where, f"steps.{step_id}", exc, given) from None
        if fn is not None:
            objects[step_object_key(step_id, "run")] = fn
        if baseline is not None and not isinstance(baseline, str):
            objects[step_object_key(step_id, "baseline")] = baseline
        if simulate is not None and not isinstance(simulate, str):
            objects[step_object_key(step_id, "simulate")] = simulate
        return step

    def _infer_inputs(self, fn: Callable[..., Any], known: set[str], *, calls_model: bool = False,
                      literal: Mapping[str, Any], mapped: bool = False, loops: bool = False) -> dict[str, Any]:
        """Inputs from parameter names; an LLM step's ``reply`` (the model's answer) and the parameters
        given under ``params`` (literal values) are not ones. On a mapped step ``item`` and ``index``
        read the instance's item and position; on a ``repeat`` step ``previous`` and ``iteration`` read
        the previous iteration's output and the iteration's number."""
        inputs: dict[str, Any] = {}
        for name, param in inspect.signature(fn).parameters.items():
            if name == "ctx" or name in literal or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            if calls_model and name == REPLY_PARAMETER:
                continue
            if mapped and name in ("item", "index") and name not in known and name not in self.inputs:
                inputs[name] = f"${name}"
                continue
            if loops and name in ("previous", "iteration") and name not in known and name not in self.inputs:
                inputs[name] = f"${name}"
                continue
            self._infer_one(name, known, inputs)
        return inputs

    def _child_inputs(self, child: Workflow, known: set[str], *, literal: Mapping[str, Any]) -> dict[str, Any]:
        """A child workflow step's inputs: the child's declared inputs that name a workflow input or an
        earlier step of this one."""
        inputs: dict[str, Any] = {}
        for name in child.inputs:
            if name not in literal:
                self._infer_one(name, known, inputs)
        return inputs

    def _template_inputs(self, options: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
        """A function-less LLM step's inputs: template variables naming a workflow input or an earlier step."""
        inputs: dict[str, Any] = {}
        for key in ("system", "prompt"):
            template = options.get(key)
            if isinstance(template, str):
                for name in _template_names(template):
                    self._infer_one(name, known, inputs)
        return inputs

    def _infer_one(self, name: str, known: set[str], inputs: dict[str, Any]) -> None:
        if name in inputs:
            return
        if name in known:
            inputs[name] = name
        elif name in self.inputs:
            inputs[name] = f"$inputs.{name}"


class _Registered:
    """One registered step: its function (None for ``llm_step``), its keywords and where it was defined."""

    __slots__ = ("fn", "options", "where")

    def __init__(self, fn: Callable[..., Any] | None, options: dict[str, Any], where: str) -> None:
        self.fn = fn
        self.options = options
        self.where = where


def _condition_call(fn: Callable[..., Any]) -> ConditionCall:
    """A ``when`` function as the spec holds it: its reference and the names its parameters read (the
    binder checks it can be called with them; the step ids among them become dependencies)."""
    reads = [name for name, param in inspect.signature(fn).parameters.items()
             if param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL)]
    return ConditionCall(call=str(_ref(fn)), reads=reads)


def _keep(objects: dict[str, Any], ref: str, obj: Any, where: str) -> None:
    """Put ``obj`` into ``objects`` under its reference; SpecError when another object already holds that
    reference (two lambdas, two closures of one factory): the spec could not tell them apart."""
    held = objects.setdefault(ref, obj)
    if held is not obj:
        raise SpecError([SpecProblem(where, "", f"two different objects share the reference {ref!r} (lambdas, or "
                                                "functions made inside another function); give each a "
                                                "module-level name")])


def _object_refs(options: Mapping[str, Any], objects: dict[str, Any], where: str) -> dict[str, Any]:
    """``output_schema`` and ``tools`` given as objects, as references (the objects go into ``objects``)."""
    out: dict[str, Any] = {}
    schema = options.get("output_schema")
    if schema is not None and not isinstance(schema, (str, dict)):
        try:
            ref = str(_ref(schema))
        except _Unreferable as exc:
            raise _Unreferable(str(exc), "output_schema") from None
        _keep(objects, ref, schema, where)
        out["output_schema"] = ref
    tools = options.get("tools")
    if tools is not None and not isinstance(tools, str):
        refs = []
        for index, tool in enumerate(tools):
            # ``{"ref": fn, "approve": True}`` (or a ToolRef) keeps its approval beside the function's reference
            entry = tool.model_dump() if isinstance(tool, ToolRef) else tool if isinstance(tool, dict) else None
            target = entry.get("ref") if entry is not None else tool
            if target is None:  # no function given: the entry is checked as written (its ref is missing)
                refs.append(entry if entry is not None else tool)
                continue
            if isinstance(target, str):
                ref = target
            else:
                try:
                    ref = str(_ref(target))
                except _Unreferable as exc:
                    raise _Unreferable(str(exc), f"tools[{index}]") from None
                _keep(objects, ref, target, where)
            refs.append({**entry, "ref": ref} if entry is not None else ref)
        out["tools"] = refs
    return out


def _template_names(template: str) -> list[str]:
    """The free variables a template reads, in the order they first appear (empty when it does not parse)."""
    import jinja2
    from jinja2 import nodes

    from orchestrator.spec.templates import environment, used_names

    free = used_names(template)
    try:
        ast = environment().parse(template)
    except jinja2.TemplateSyntaxError:
        return []
    ordered: list[str] = []
    for node in ast.find_all(nodes.Name):
        if node.ctx == "load" and node.name in free and node.name not in ordered:
            ordered.append(node.name)
    return ordered


def _gate_spec(gate: Any, step_id: str, index: int, where: str) -> tuple[GateSpec, Any]:
    """A gate as the spec holds it, plus the object when one was given directly.

    A plain function (``gates=[fn]``, ``gates=[{"gate": fn, "limit": 5}]``, a ``functools.partial``) gets
    its parameters by the rule YAML's ``gate: module:fn`` follows (:class:`gates.factory.FunctionGate`),
    checked here: the output first, the step context only to a parameter named ``ctx`` (or a second one
    annotated ``StepContext``), every other parameter from the dict's keys or its default. A gate object
    (anything with a ``check`` method) is called as ``check(output, ctx)``; a gate class is constructed
    with the dict's keys."""
    from gates.base import GateConfigError
    from gates.factory import FunctionGate, construct_gate

    try:
        if isinstance(gate, GateSpec) or isinstance(gate, str):
            return GateSpec.model_validate(gate), None
        keys: dict[str, Any] = {}
        if isinstance(gate, dict):
            if not callable(gate.get("gate")):
                return GateSpec.model_validate(gate), None
            keys = {k: v for k, v in gate.items() if k != "gate"}
            gate = gate["gate"]
        function = gate.func if isinstance(gate, functools.partial) else gate
        name = getattr(gate, "name", None) or getattr(function, "__name__", type(gate).__name__)
        spec = GateSpec.model_validate({"gate": str(name), **keys})
    except ValidationError as exc:
        raise _spec_error(where, f"steps.{step_id}.gates[{index}]", exc) from None
    try:
        if inspect.isclass(gate):
            return spec, construct_gate(gate, spec.params, typed=False)
        if callable(getattr(gate, "check", None)):
            if spec.params:
                raise GateConfigError(f"a gate object takes no keys besides gate, name, severity and timeout; got "
                                      f"{sorted(spec.params)}")
            return spec, gate
        return spec, FunctionGate.wrap(gate, spec.params, ref=str(name))
    except GateConfigError as exc:
        raise SpecError([SpecProblem(where, f"steps.{step_id}.gates[{index}]",
                                     f"step {step_id!r} gate {spec.label!r}: {exc}")]) from None
