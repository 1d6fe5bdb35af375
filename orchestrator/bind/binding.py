"""Binding: a spec plus where it came from becomes a :class:`BoundWorkflow` that can run.

The spec (:mod:`orchestrator.spec.model`) is plain data. Binding resolves, once, everything a run
needs that data cannot hold: each step's callable and baseline, its gate objects, the outcome
evaluator, the exception types a retry policy names, the topological order, who consumes whose
output and what they need. The result is immutable; the executor, replays and reviews all take
it. Problems are collected with the dotted key that caused them, so the loader can name the
file and line of each one.

References resolve in this order: an object handed over by the Python API (``objects``, keyed by
the reference string the spec holds), then a module next to the workflow file, then the import
path.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import json
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, cast

from gates.base import BUILTIN_GATES, GateConfigError, is_async_gate
from gates.factory import build_gate
from orchestrator.bind.invoke import StepFunction
from orchestrator.bind.resolve import resolve_callable
from orchestrator.core import jsonio
from orchestrator.core.errors import ResolveError, SpecError, SpecProblem
from orchestrator.spec import graph
from orchestrator.spec.context import NextNeed
from orchestrator.spec.model import ConditionCall, GateSpec, OnGateFail, StepSpec, WorkflowSpec

Locate = Callable[[str], int | None]
"""Maps a dotted key (``steps.x.inputs.p``) to the line that defines it, when known."""

ChildLoader = Callable[[str, Any], "BoundWorkflow"]
"""Binds the child workflow of a ``workflow:`` step: ``(the reference as the spec holds it, the object given
from Python for it or None) -> the bound child``. It raises SpecError with the child's own problems (its
file and lines), or :class:`IncludeCycleError`. The loader knows where the parent's file is and which
workflows are being loaded around it; binding reads no files itself."""


class DefinesWorkflow(ABC):
    """A workflow defined in Python (:class:`~orchestrator.bind.python_workflow.Workflow` derives from this): its spec,
    the objects the spec refers to, and the file that defined it. Loaders below the Python API know it by this
    base class."""

    @property
    @abstractmethod
    def spec(self) -> WorkflowSpec:
        """The workflow as plain data."""

    @property
    @abstractmethod
    def objects(self) -> Mapping[str, Any]:
        """The Python objects the spec refers to (step functions, gate objects, child workflows)."""

    @property
    @abstractmethod
    def defined_in(self) -> str | None:
        """The file that defined it (None when unknown: made in an interactive session)."""


class IncludeCycleError(SpecError):
    """A workflow includes itself, directly or through other workflows: ``a.yaml -> b.yaml -> a.yaml``."""

    def __init__(self, chain: list[str]) -> None:
        self.chain = chain
        super().__init__([SpecProblem(chain[0], "", self.describe())])

    def describe(self) -> str:
        return f"workflow includes itself: {' -> '.join(self.chain)}; child workflows must not form a cycle"


def gate_object_key(step_id: str, index: int) -> str:
    """The ``objects`` key of a gate object given directly from Python (it has no reference)."""
    return f"gate:{step_id}:{index}"


def step_object_key(step_id: str, role: str) -> str:
    """The ``objects`` key of a callable given from Python as one step's ``run``, ``baseline`` or ``simulate``.

    Keyed by step, not by the ``module:qualname`` the spec holds: two lambdas, or two closures made by
    one factory, share a qualified name, and each step must keep its own function.
    """
    return f"step:{step_id}:{role}"


def findable_by_name(ref: str) -> bool:
    """Whether ``module:qualname`` can be imported again by name (in a child process, say): not a lambda,
    not a function made inside another function."""
    return "<" not in ref.partition(":")[2]


@dataclass(frozen=True, slots=True)
class BoundGate:
    """One gate of a step, ready to check outputs."""

    label: str
    severity: str
    check: Any
    """The gate object (``check(output, ctx)``) or a plain callable."""
    slow: bool
    """Run in a worker thread: any gate but the quick built-in ones (user code may block or never end;
    embedding models and model calls take long)."""
    timeout: float | None = None
    """The gate's own ``timeout:``; without one the step's ``timeout`` is its budget."""
    is_async: bool = False
    """``async def check``: awaited on the event loop, not on a thread (a gate that calls a model through
    ``await ctx.llm.acomplete``)."""


@dataclass(frozen=True, slots=True)
class BoundStep:
    """A step with everything needed to run it, resolved once."""

    spec: StepSpec
    function: StepFunction
    baseline: StepFunction | None
    gates: tuple[BoundGate, ...]
    dependencies: tuple[str, ...]
    """Upstream steps: inputs, ``verifies`` and ``after``."""
    consumers: tuple[str, ...]
    """Downstream steps that consume this step's output."""
    next_needs: tuple[NextNeed, ...]
    """What the consumers need from this step (next-step context injection)."""
    injected_json: str | None
    """``next_needs`` as the JSON text stored on each record (encoded once)."""
    retry_on: tuple[type[BaseException] | str, ...]
    """Exception types (or builtin names, matched along the MRO) a retry applies to; empty: any."""
    on_gate_fail: OnGateFail
    simulate: StepFunction | None = None
    """The dry run replays call instead of a side-effecting step (``simulate:``), else None."""
    condition: Callable[..., Any] | None = None
    """The function of a ``when`` given as one (:class:`~orchestrator.spec.model.ConditionCall`), else None."""
    may_skip: bool = False
    """Whether the step can be skipped: it has a ``when``, or a step upstream of it has one. Steps of a
    workflow without conditions never check (the common case costs nothing)."""
    child: BoundWorkflow | None = None
    """The workflow a ``workflow:`` step runs as a child run (bound like this one); None for other steps."""
    output_schema: Any = None
    """A Python step's ``output_schema``, resolved (a pydantic model class or a JSON Schema dict): what its
    function returns must fit it, else the attempt fails saying where. None for other steps: an LLM step
    validates the model's answer itself, and an approval step checks edits of its proposal."""

    @property
    def id(self) -> str:
        return self.spec.id

    def retries(self, exc: BaseException) -> bool:
        """Whether the retry policy covers this exception."""
        if not self.retry_on:
            return True
        names = {k.__name__ for k in type(exc).__mro__}
        return any(isinstance(exc, kind) if isinstance(kind, type) else kind in names for kind in self.retry_on)


@dataclass(frozen=True, slots=True)
class BoundWorkflow:
    """A workflow ready to run: the spec, its source, and every step bound."""

    spec: WorkflowSpec
    source: str | None
    """The file it was loaded from; None for a workflow built in Python and never saved."""
    steps: Mapping[str, BoundStep]
    order: tuple[str, ...]
    """Topological order, ties broken by declaration order."""
    outcome: Callable[..., Any] | None
    definition: Mapping[str, Any]
    """The serialisable spec, as stored with each run."""
    content_hash: str
    """Identifies this version of the workflow in the store."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base_dir(self) -> str | None:
        return os.path.dirname(self.source) if self.source else None

    @property
    def output_step(self) -> str:
        return self.spec.output_step

    def step(self, step_id: str) -> BoundStep:
        return self.steps[step_id]

    def descendants(self, step_ids: Iterable[str]) -> set[str]:
        """All steps downstream of any of ``step_ids`` (not including them)."""
        out: set[str] = set()
        stack = list(step_ids)
        while stack:
            for user in self.steps[stack.pop()].consumers:
                if user not in out:
                    out.add(user)
                    stack.append(user)
        return out

    def included_sources(self) -> set[str]:
        """The files of every workflow this one runs as a child, however deep (a cache of this binding is
        valid while none of them changed)."""
        found: set[str] = set()
        for step in self.steps.values():
            if step.child is not None:
                if step.child.source:
                    found.add(step.child.source)
                found |= step.child.included_sources()
        return found

    def with_steps(self, changes: Mapping[str, BoundStep]) -> BoundWorkflow:
        """A copy with some bound steps replaced (replays swap functions and gate policies)."""
        return replace(self, steps=MappingProxyType({**self.steps, **changes}))

    def in_warn_mode(self) -> BoundWorkflow:
        """A copy whose failing gates only warn: replays have nobody to review a pause."""
        return self.with_steps({sid: replace(s, on_gate_fail="warn") for sid, s in self.steps.items()})


class _Problems:
    def __init__(self, path: str, locate: Locate | None) -> None:
        self.path = path
        self.locate = locate
        self.rows: list[SpecProblem] = []

    def add(self, key: str, message: str, *, offset: int | None = None) -> None:
        """Record a problem at ``key``; ``offset`` is a line within the key's value (a template's line)."""
        line = self.locate(key) if self.locate else None
        if line is not None and offset is not None:
            line += offset
        self.rows.append(SpecProblem(self.path, key, message, line))


def workflow_hash(definition: Mapping[str, Any]) -> str:
    """The version of a definition: equal for equal meaning. Keys are sorted, so writing a gate's
    parameters (or any mapping) in another order is the same version, not a new one."""
    canonical = json.dumps(json.loads(jsonio.dumps(definition)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def bind(spec: WorkflowSpec, *, source: str | None = None, objects: Mapping[str, Any] | None = None,
         path: str | None = None, locate: Locate | None = None, load_child: ChildLoader | None = None
         ) -> BoundWorkflow:
    """Check the graph and resolve every reference; SpecError lists every problem found.

    Args:
        spec: the workflow data.
        source: the file it came from; modules resolve next to it first.
        objects: objects given from Python, keyed by the reference the spec holds for them.
        path: how messages name the workflow (default: ``source``).
        locate: maps a dotted key to its line in the file, for messages.
        load_child: binds the child workflows of ``workflow:`` steps (see :data:`ChildLoader`); needed
            only when the spec has such steps.
    """
    problems = _Problems(path or source or f"<workflow {spec.name}>", locate)
    if not spec.steps:
        problems.add("steps", "a workflow needs at least one step")
        raise SpecError(problems.rows)
    for key, message in graph.check_references(spec):
        problems.add(key, message)
    for name, decl in spec.inputs.items():
        mismatch = default_mismatch(decl.type, decl.default)
        if mismatch:
            problems.add(f"inputs.{name}.default", f"input {name!r} default {mismatch}")
    for cycle in graph.find_cycles(spec):
        problems.add(f"steps.{cycle[0]}", "cycle: " + " -> ".join([*cycle, cycle[0]]) + "; a workflow must be acyclic "
                     "(to run a step again until a condition holds, give it repeat: {until: EXPR, max: N})")
    resolver = _Resolver(os.path.dirname(source) if source else None, objects or {}, load_child)
    consumers = graph.consumers(spec)
    by_id = {s.id: s for s in spec.steps}
    steps = {s.id: _bind_step(s, spec, by_id, consumers, resolver, problems) for s in spec.steps}
    _check_price_file(spec, problems)
    outcome = None
    if spec.outcome:
        try:
            outcome = resolver.callable(spec.outcome)
        except ResolveError as exc:
            problems.add("outcome", f"outcome evaluator: {exc}")
    if problems.rows:
        raise SpecError(problems.rows)
    definition = spec.definition()
    conditional = {s.id for s in spec.steps if s.when is not None}
    if conditional:
        skippable = conditional | graph.descendants(spec, conditional)
        steps = {sid: replace(s, may_skip=sid in skippable) for sid, s in steps.items()}  # type: ignore[type-var]
    return BoundWorkflow(spec=spec, source=source, steps=MappingProxyType(steps),  # type: ignore[arg-type]
                         order=tuple(graph.topological_order(spec)), outcome=outcome, definition=definition,
                         content_hash=workflow_hash(definition))


def _check_price_file(spec: WorkflowSpec, problems: _Problems) -> None:
    """A model call's cost comes from the price table: a broken ``$ORCHESTRATOR_LLM_PRICES`` file is said
    now, not after a paid answer came back."""
    if not any(s.calls_model or any(g.gate == "llm_judge" for g in s.gates) for s in spec.steps):
        return  # the common case imports nothing of the model clients
    from orchestrator.llm.preflight import price_file_problem

    problem = price_file_problem()
    if problem is not None:
        problems.add("", problem)


class _Resolver:
    def __init__(self, base_dir: str | None, objects: Mapping[str, Any], load_child: ChildLoader | None) -> None:
        self.base_dir = base_dir
        self.objects = objects
        self.load_child = load_child

    def callable(self, ref: str) -> Any:
        if ref in self.objects:
            return self.objects[ref]
        return resolve_callable(ref, self.base_dir)

    def step_callable(self, step_id: str, role: str, ref: str) -> Any:
        """The function a step was given from Python for ``role``, else ``ref`` resolved."""
        given = self.objects.get(step_object_key(step_id, role))
        return given if given is not None else self.callable(ref)


def _bind_helper(step: StepSpec, key: str, ref: str | None, resolver: _Resolver,
                 problems: _Problems) -> StepFunction | None:
    """A step's optional ``module:function`` beside its own (``baseline``, ``simulate``); None when absent
    or unresolvable (then the problem is recorded under ``steps.ID.KEY``)."""
    if not ref:
        return None
    try:
        return StepFunction.of(resolver.step_callable(step.id, key, ref))
    except ResolveError as exc:
        problems.add(f"steps.{step.id}.{key}", f"step {step.id!r} {key}: {exc}")
        return None


def _bind_step(step: StepSpec, spec: WorkflowSpec, by_id: Mapping[str, StepSpec], consumers: dict[str, list[str]],
               resolver: _Resolver, problems: _Problems) -> BoundStep | None:
    child = _bind_child(step, resolver, problems) if step.runs_child else None
    output_schema: Any = None  # checked here only for a Python step: the others check their own
    if step.type == "approval":
        function = _bind_approval(step, resolver, problems)
    elif step.runs_child:
        function = None if child is None else StepFunction.of(_runs_as_child(step))
    elif step.calls_model:
        function = _bind_llm_function(spec, step, resolver, problems)
    else:
        _refuse_model_keys(step, problems)
        function = _bind_function(step, resolver, problems)
        if step.type == "critic" and step.output_schema is not None:
            problems.add(f"steps.{step.id}.output_schema",
                         f"step {step.id!r} is a critic, so its output is its verdict (passed, score, reason); it "
                         "cannot have output_schema:")
            function = None
        checked, output_schema = _bind_output_schema(step, resolver, problems)
        if not checked:
            function = None
    baseline = _bind_helper(step, "baseline", step.baseline, resolver, problems)
    simulate = _bind_helper(step, "simulate", step.simulate, resolver, problems)
    bound_gates = [(i, _bind_gate(step.id, i, gate, resolver, problems)) for i, gate in enumerate(step.gates)]
    gates = tuple(g for _, g in bound_gates if g is not None)
    for i, g in bound_gates:
        upstream = getattr(g.check, "upstream_steps", None) if g is not None else None
        if g is None or not callable(upstream):
            continue
        for source in upstream():
            if source not in by_id:
                problems.add(f"steps.{step.id}.gates[{i}]",
                             f"step {step.id!r} gate {g.label!r} reads step {source!r}, which is not defined. "
                             f"Defined steps: {list(by_id)}")
    retry_on = _bind_retry_exceptions(step, resolver, problems)
    condition = _bind_condition(step, resolver, problems)
    users = consumers.get(step.id, [])
    needs = tuple(NextNeed(step_id=u, agent=by_id[u].agent_name, needs=by_id[u].needs,
                           description=by_id[u].description)
                  for u in users if by_id[u].needs or by_id[u].description)
    if function is None:
        return None
    return BoundStep(spec=step, function=function, baseline=baseline, gates=gates,
                     dependencies=tuple(step.step_dependencies()), consumers=tuple(users), next_needs=needs,
                     injected_json=jsonio.dumps([n.to_json() for n in needs]) if needs else None,
                     retry_on=retry_on, on_gate_fail=step.on_gate_fail, simulate=simulate, condition=condition,
                     child=child, output_schema=output_schema)


def _runs_as_child(step: StepSpec) -> Callable[..., Any]:
    """What stands for a ``workflow:`` step's function: the executor runs the child workflow instead, so
    anything that would call it (a replay, which does not descend into child runs) fails saying so."""
    def child_run(**_: Any) -> Any:
        raise NotImplementedError(f"step {step.id!r} runs workflow {step.workflow} as a child run; it has no "
                                  "function to call outside an execution of its parent")

    return child_run


def _bind_child(step: StepSpec, resolver: _Resolver, problems: _Problems) -> BoundWorkflow | None:
    """The child workflow of a ``workflow:`` step, bound; its own problems keep its file and lines, and
    the step's inputs must be its declared inputs (every required one given)."""
    assert step.workflow is not None
    where = f"steps.{step.id}.workflow"
    if resolver.load_child is None:
        problems.add(where, f"step {step.id!r} runs workflow {step.workflow}, but this workflow was bound without "
                            "a way to load child workflows; load it with orchestrator.load_workflow")
        return None
    try:
        child = resolver.load_child(step.workflow, resolver.objects.get(step_object_key(step.id, "workflow")))
    except IncludeCycleError as exc:
        problems.add(where, f"step {step.id!r}: {exc.describe()}")
        return None
    except SpecError as exc:
        problems.add(where, f"step {step.id!r} runs workflow {step.workflow}, which is invalid "
                            f"({len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''} below)")
        problems.rows.extend(exc.problems)
        return None
    except ResolveError as exc:
        problems.add(where, f"step {step.id!r} workflow: {exc}")
        return None
    declared = child.spec.inputs
    for param in [*step.inputs, *step.params]:
        if param not in declared:
            key = "inputs" if param in step.inputs else "params"
            problems.add(f"steps.{step.id}.{key}.{param}",
                         f"step {step.id!r} gives input {param!r} to workflow {step.workflow}, which declares no "
                         f"such input; its inputs: {sorted(declared)}")
    for name, decl in declared.items():
        if decl.required and name not in step.inputs and name not in step.params:
            problems.add(f"steps.{step.id}.inputs",
                         f"step {step.id!r} does not give workflow {step.workflow} its required input {name!r} "
                         f"({decl.type}); add it under inputs:")
    return child


def _bind_condition(step: StepSpec, resolver: _Resolver, problems: _Problems) -> Callable[..., Any] | None:
    """The function of a ``when: {call: ...}``: a plain function that accepts every name it reads."""
    when = step.when
    if not isinstance(when, ConditionCall):
        return None
    where = f"steps.{step.id}.when"
    try:
        fn = resolver.step_callable(step.id, "when", when.call)
    except ResolveError as exc:
        problems.add(where, f"step {step.id!r} when: {exc}")
        return None
    if inspect.iscoroutinefunction(fn):
        problems.add(where, f"step {step.id!r} when: {when.call} is async; a condition is a plain function "
                            "returning true or false")
        return None
    try:
        inspect.signature(fn).bind(**dict.fromkeys(when.reads))
    except TypeError as exc:
        problems.add(where, f"step {step.id!r} when: {when.call} cannot be called with "
                            f"{', '.join(when.reads) or 'no arguments'} as keyword arguments ({exc})")
        return None
    except ValueError:
        pass  # no signature to check (a builtin): the call says what is wrong
    return cast("Callable[..., Any]", fn)


def _bind_function(step: StepSpec, resolver: _Resolver, problems: _Problems) -> StepFunction | None:
    if not step.run:
        problems.add(f"steps.{step.id}.run", f"step {step.id!r} has no 'run: module:function'")
        return None
    try:
        fn = resolver.step_callable(step.id, "run", step.run)
    except ResolveError as exc:
        problems.add(f"steps.{step.id}.run", f"step {step.id!r}: {exc}")
        return None
    message = signature_mismatch(step, fn, extra=LOOP_PARAMETERS if step.repeat else ())
    if message:
        problems.add(_inputs_key(step), message)
    function = replace(StepFunction.of(fn), loop_parameters=loop_parameters(step, fn))
    if step.isolation == "process":
        if not findable_by_name(step.run):
            problems.add(f"steps.{step.id}.isolation",
                         f"step {step.id!r}: isolation: process calls {step.run} in a child process, which finds it "
                         "by name; a lambda or a function made inside another function has none: define it at "
                         "module level")
            return None
        return replace(function, isolated_ref=step.run, base_dir=resolver.base_dir)
    if step.inline:
        if function.is_async:
            problems.add(f"steps.{step.id}.inline", f"step {step.id!r}: inline: true is for plain functions; "
                                                    f"{step.run} is async and already runs on the event loop")
            return None
        return replace(function, inline=True)
    return function


APPROVAL_REFUSES = ("run", "prompt", "system", "tools", "workflow", "repeat", "gates", "isolation", "simulate",
                    "baseline")
"""Keys an approval step cannot have: its work is a person's decision on its inputs."""


def _bind_approval(step: StepSpec, resolver: _Resolver, problems: _Problems) -> StepFunction | None:
    """A ``type: approval`` step pauses with its inputs as the proposal; a person approves, edits (checked
    only by its ``output_schema``) or rejects it. Any key that would compute or check its output is refused
    at the line of that key."""
    from orchestrator.bind.approvals import ApprovalStep

    given = {"run": step.run, "prompt": step.prompt, "system": step.system, "tools": step.tools,
             "workflow": step.workflow, "repeat": step.repeat, "gates": step.gates, "simulate": step.simulate,
             "baseline": step.baseline, "isolation": step.isolation == "process"}
    clashing = [key for key in APPROVAL_REFUSES if given[key]]
    for key in clashing:
        why = ("gates check a computed output; a person is this step's check (put the gates on the step that "
               "makes the proposal, and output_schema here for edits)") if key == "gates" else \
            "its output is its inputs as a person approved or edited them"
        problems.add(f"steps.{step.id}.{key}", f"step {step.id!r} has type 'approval', so it cannot have "
                                               f"{key}: {why}")
    if not step.inputs:
        problems.add(f"steps.{step.id}", f"step {step.id!r} has type 'approval' but no inputs; its inputs are "
                                         "the proposal a person decides on (inputs: {refund: decide})")
    resolved, schema = _bind_output_schema(step, resolver, problems)
    if clashing or not step.inputs or not resolved:
        return None
    return replace(StepFunction.of(ApprovalStep(step.id, schema)), inline=True)


def _bind_output_schema(step: StepSpec, resolver: _Resolver, problems: _Problems) -> tuple[bool, Any]:
    """``(resolved, schema)``: the step's ``output_schema`` as the object to check values against (a pydantic
    model class or a JSON Schema dict; None without one). A reference that does not resolve, or a schema that
    is not one, is a problem at the key's line (``resolved`` False for the first, as nothing can check)."""
    schema: Any = step.output_schema
    if isinstance(schema, str):
        try:
            schema = resolver.callable(schema)
        except ResolveError as exc:
            problems.add(f"steps.{step.id}.output_schema", f"step {step.id!r} output_schema: {exc}")
            return False, None
    if schema is not None:
        from orchestrator.llm.preflight import schema_problem

        problem = schema_problem(schema)
        if problem is not None:
            problems.add(f"steps.{step.id}.output_schema", f"step {step.id!r} output_schema {problem}")
    return True, schema


MODEL_ONLY_KEYS = ("tools", "system", "max_turns", "max_tokens", "stream")
"""Keys that only mean something to a step that calls a model (one with a ``prompt``)."""


def _refuse_model_keys(step: StepSpec, problems: _Problems) -> None:
    """A step without a prompt calls no model, so keys only a model reads would be silently ignored: each one
    given is a problem at its line (``tools: [{ref: ..., approve: true}]`` would otherwise approve nothing)."""
    for key in MODEL_ONLY_KEYS:
        if key in step.model_fields_set:
            problems.add(f"steps.{step.id}.{key}",
                         f"step {step.id!r} has {key}: but no prompt:, so it calls no model and {key}: would be "
                         f"ignored; {key}: belongs to an LLM step (type: llm with a prompt:)")


def _bind_llm_function(workflow: WorkflowSpec, step: StepSpec, resolver: _Resolver,
                       problems: _Problems) -> StepFunction | None:
    """A step with a ``prompt`` calls a model; ``run`` (optional) post-processes the answer."""
    from orchestrator.llm.step import REPLY_PARAMETER, make_llm_step, template_problems  # only LLM steps need it

    if step.type not in ("llm", "critic"):
        problems.add(f"steps.{step.id}.prompt", f"step {step.id!r} has a prompt but type {step.type!r}; "
                                                "a prompt belongs to a step of type 'llm' (or a critic)")
        return None
    for key, line, message in template_problems(step, [*step.inputs, *step.params]):
        where = f" (template line {line})" if line is not None else ""
        # a block scalar (``prompt: |``) starts on the line after its key; a one-line template on it
        offset = None if line is None else (line if "\n" in (getattr(step, key) or "") else line - 1)
        problems.add(f"steps.{step.id}.{key}", f"step {step.id!r} {key}{where}: {message}", offset=offset)
    post_process = None
    if step.run:
        try:
            post_process = resolver.step_callable(step.id, "run", step.run)
        except ResolveError as exc:
            problems.add(f"steps.{step.id}.run", f"step {step.id!r}: {exc}")
            return None
        mismatch = signature_mismatch(step, post_process, extra=(REPLY_PARAMETER,))
        if mismatch:
            problems.add(_inputs_key(step), mismatch)
    try:
        function = make_llm_step(workflow, step, resolve=resolver.callable, post_process=post_process)
    except ResolveError as exc:
        problems.add(f"steps.{step.id}", f"step {step.id!r}: {exc}")
        return None
    if function.config.provider == "local":
        from orchestrator.llm.providers.local import model_name_problem

        problem = model_name_problem(function.config.model)
        if problem is not None:
            problems.add(_model_key(workflow, step), f"step {step.id!r}: {problem}")
    if step.output_schema is not None:
        from orchestrator.llm.preflight import schema_problem

        problem = schema_problem(function.output_schema)
        if problem is not None:
            problems.add(f"steps.{step.id}.output_schema", f"step {step.id!r} output_schema {problem}")
    return StepFunction(function, takes_ctx=True, is_async=True)


def _model_key(workflow: WorkflowSpec, step: StepSpec) -> str:
    """Where a step's model is chosen: its own ``llm:`` block when that names the model or provider, else the
    workflow's."""
    if step.llm is not None and {"model", "provider"} & step.llm.model_fields_set:
        return f"steps.{step.id}.llm.model" if "model" in step.llm.model_fields_set else f"steps.{step.id}.llm"
    if workflow.llm is not None:
        return "llm.model" if "model" in workflow.llm.model_fields_set else "llm"
    return f"steps.{step.id}.prompt"


def _bind_gate(step_id: str, index: int, gate: GateSpec, resolver: _Resolver, problems: _Problems) -> BoundGate | None:
    obj = resolver.objects.get(gate_object_key(step_id, index))
    if obj is None:
        try:
            obj = build_gate(gate, step_id=step_id, base_dir=resolver.base_dir)
        except GateConfigError as exc:
            problems.add(f"steps.{step_id}.gates[{index}]", str(exc))
            return None
    quick_builtin = type(obj) in BUILTIN_GATES.values() and not getattr(obj, "slow", False)
    return BoundGate(label=gate.label, severity=gate.severity, check=obj, slow=not quick_builtin, timeout=gate.timeout,
                     is_async=is_async_gate(obj))


def _bind_retry_exceptions(step: StepSpec, resolver: _Resolver,
                           problems: _Problems) -> tuple[type[BaseException] | str, ...]:
    kinds: list[type[BaseException] | str] = []
    for name in step.retry.exceptions:
        if ":" not in name:
            if not _builtin_exception(name):
                problems.add(f"steps.{step.id}.retry.exceptions",
                             f"step {step.id!r} retry exception {name!r} is not a built-in exception; name any "
                             "other class as module:Class")
                continue
            kinds.append(name)
            continue
        try:
            kind = resolver.callable(name)
        except ResolveError as exc:
            problems.add(f"steps.{step.id}.retry.exceptions", f"step {step.id!r} retry exception: {exc}")
            continue
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            problems.add(f"steps.{step.id}.retry.exceptions",
                         f"step {step.id!r} retry exception {name!r} is not an exception class")
            continue
        kinds.append(kind)
    return tuple(kinds)


def _builtin_exception(name: str) -> bool:
    """Whether ``name`` is a built-in exception class (``ConnectionError``, ``TimeoutError``)."""
    kind = getattr(builtins, name, None)
    return isinstance(kind, type) and issubclass(kind, BaseException)


_DEFAULT_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                               "boolean": (bool,), "object": (dict,), "array": (list,)}


def default_mismatch(declared: str, default: Any) -> str | None:
    """Why an input's ``default`` does not fit its declared ``type`` (None when it does, or there is none)."""
    if default is None or declared not in _DEFAULT_TYPES:
        return None
    fits = isinstance(default, _DEFAULT_TYPES[declared]) and (declared == "boolean" or not isinstance(default, bool))
    if fits and isinstance(default, float) and not math.isfinite(default):
        return f"{default!r} is not a finite number"
    if fits:
        return None
    article = "an" if declared[0] in "aeiou" else "a"
    return f"{default!r} is not {article} {declared}, the input's declared type"


def _inputs_key(step: StepSpec) -> str:
    """Where a step's inputs are written: under ``inputs``, or for a critic given them by ``verifies``, there."""
    return f"steps.{step.id}.verifies" if step.inputs_from_verifies else f"steps.{step.id}.inputs"


LOOP_PARAMETERS = ("previous", "iteration")
"""Parameter names a ``repeat:`` step's function is given without an input naming them."""


def loop_parameters(step: StepSpec, fn: Any) -> tuple[str, ...]:
    """The loop's implicit parameters ``fn`` declares (by name) and no input or param gives; none off a loop."""
    if step.repeat is None:
        return ()
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ()
    return tuple(name for name in LOOP_PARAMETERS
                 if name in params and params[name].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                            inspect.Parameter.KEYWORD_ONLY)
                 and name not in step.inputs and name not in step.params)


def signature_mismatch(step: StepSpec, fn: Any, *, extra: tuple[str, ...] = ()) -> str | None:
    """Say how the step's inputs (plus ``extra`` parameters it is given) fail to fit the callable's parameters."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = sig.parameters
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    shown = f"{step.run or getattr(fn, '__qualname__', fn)}({', '.join(names)})"
    given = [*step.inputs, *step.params]
    unknown = [k for k in given if k not in names and not has_var_kw]
    if unknown and step.inputs_from_verifies:
        return (f"step {step.id!r} verifies {unknown[0]!r}, and a critic without inputs: is given each verified "
                f"step's output under that step's id, but {shown} has no parameter {unknown[0]!r}; add inputs: "
                f"(inputs: {{{names[0] if names else 'output'}: {unknown[0]}}}) or name the parameters after the "
                "steps")
    if unknown:
        return (f"step {step.id!r}: input {unknown[0]!r} does not match any parameter of {shown}; "
                f"rename the input or the parameter")
    missing = [n for n, p in params.items()
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
               and n != "ctx" and n not in given and n not in extra]
    if missing:
        return (f"step {step.id!r}: parameter {missing[0]!r} of {shown} is not given by any input; add it under "
                "'inputs' (or 'params' for a literal value)")
    return None
