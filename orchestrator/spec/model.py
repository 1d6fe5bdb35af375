"""The workflow specification: plain, serialisable data with no behaviour hidden in it.

YAML files and the Python API both produce a :class:`WorkflowSpec`; two specs are equal when
their definitions are. What runs (callables, gate objects, the order) is attached separately by
:mod:`orchestrator.bind.binding`, which turns a spec plus its source location into a
:class:`~orchestrator.bind.binding.BoundWorkflow`. This module sits at the bottom of the layer stack
and imports nothing else from the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.spec.llm_config import LLMConfig
from orchestrator.spec.notify import NotifyTarget, notify_shorthand
from orchestrator.spec.validation import no_boolean

MAX_REVIEW_TIMEOUT = 366 * 86400.0
"""The longest ``review_timeout``: a year. Anything longer never applies in practice and would only
keep ``run`` waiting (silently) for ever."""

StepType = Literal["retrieval", "reasoning", "action", "verification", "critic", "llm", "approval"]
"""What kind of work a step does; critics verify other steps; an approval step waits for a person."""

OnGateFail = Literal["pause", "retry", "fail", "warn"]
"""What happens when one of a step's gates fails."""

RunStatus = Literal["queued", "running", "paused", "succeeded", "failed", "rejected", "interrupted"]
"""The closed set of run states; ``interrupted`` is a ``running`` run whose executor's lease expired (it died)."""

StepStatus = Literal["pending", "running", "succeeded", "failed", "gate_failed", "skipped"]
"""The closed set of step-record states; `gate_failed` means waiting for review."""

InputType = Literal["string", "integer", "number", "boolean", "object", "array"]

STEP_ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")

_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line_name(value: str | None, what: str) -> str | None:
    """``value`` when it is a name that prints on one line; ValueError when empty or holding a newline,
    a tab or another control character (names go into tables, logs and one-line messages)."""
    if value is None:
        return value
    if not value.strip():
        raise ValueError(f"{what} is empty")
    control = _CONTROL_CHARACTER.search(value)
    if control:
        raise ValueError(f"{what} {value!r} holds the control character {control.group()!r}; a name is one line "
                         "of printable text")
    return value


TERMINAL_RUN_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "rejected"})


GATE_ERROR = "gate_error"
"""The key in a verdict's details that marks it as the gate's own failure (it raised: a judge that never
answered validly, an endpoint down), not a judgement of the output."""


@dataclass(frozen=True)
class GateResult:
    """The verdict of one gate on one step output.

    A low-quality output is a verdict (``passed=False``), never an exception: an exception
    means the gate itself broke.
    """

    passed: bool
    score: float | None = None
    reason: str = ""
    """One sentence a reviewer reads, specific: "412 words (limit 300)"."""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "score": self.score, "reason": self.reason, "details": self.details}


# Default factories as plain functions rather than ``list`` and ``dict``: pydantic inspects each factory's
# signature, and a builtin's is parsed from its text signature with the tokenizer (~3 ms at import).
def _empty_list() -> list[Any]:
    return []


def _empty_dict() -> dict[str, Any]:
    return {}


class _Strict(BaseModel):
    """Base for spec models: unknown keys are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class InputSpec(_Strict):
    """One workflow input, given on the command line with ``--input key=value``."""

    type: InputType = "string"
    default: Any = None
    """Used when the input is not given; an input without a default is required."""
    description: str | None = None

    @property
    def required(self) -> bool:
        return self.default is None


class RetryPolicy(_Strict):
    """How transient errors (exceptions) are retried, via tenacity."""

    attempts: int = Field(default=1, ge=1, le=100, strict=True)
    """Total attempts, the first one included."""
    backoff: float = Field(default=0.0, ge=0)
    """Base of the exponential backoff in seconds: backoff, 2*backoff, 4*backoff, ..."""
    max_backoff: float = Field(default=30.0, ge=0)
    exceptions: list[str] = Field(default_factory=_empty_list)
    """Exception type names to retry (``ValueError``, ``mymod:MyError``); empty retries any."""

    _numbers = field_validator("backoff", "max_backoff", mode="before")(staticmethod(no_boolean))


class GateSpec(_Strict):
    """One gate on a step, as written in YAML: ``- gate: NAME`` plus the gate's parameters.

    Parameters other than ``gate``, ``name``, ``severity`` and ``timeout`` are collected into
    ``params`` and checked by the gate's own configuration model when the workflow is validated.
    """

    gate: str
    """A built-in gate name (``min_items``) or ``module:callable``."""
    name: str | None = None
    """How results are labelled; defaults to ``gate``."""
    severity: Literal["block", "warn"] = "block"
    """``warn`` records a failure without applying the step's ``on_gate_fail`` policy."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds the check may take (default: the step's ``timeout``); past it, a failed verdict."""
    params: dict[str, Any] = Field(default_factory=_empty_dict)

    _numbers = field_validator("timeout", mode="before")(staticmethod(no_boolean))

    @model_validator(mode="before")
    @classmethod
    def _collect_params(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"gate": data}
        if isinstance(data, dict):
            known = {"gate", "name", "severity", "timeout", "params"}
            params = dict(data.get("params") or {})
            params.update({k: v for k, v in data.items() if k not in known})
            out = {k: v for k, v in data.items() if k in known}
            out["params"] = params
            return out
        return data

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str | None) -> str | None:
        return one_line_name(value, "gate name")

    @property
    def label(self) -> str:
        return self.name or self.gate


class ToolRef(_Strict):
    """One tool of an ``llm`` step written out: ``{ref: support:refund, approve: true}``.

    A bare ``module:function`` string is the same tool without approval. With ``approve: true`` each call
    the model makes to it pauses the step, mid-loop, for a person to approve, edit or reject the call
    before it runs.
    """

    ref: str
    """``module:function``, resolved like a bare entry."""
    approve: bool = Field(default=False, strict=True)
    """Pause for a person before each call of this tool runs."""


class ConditionCall(_Strict):
    """A ``when`` that is a Python function rather than an expression: ``{call: module:fn, reads: [classify]}``.

    The spec holds the function's reference and the names it is called with (as keyword arguments:
    step ids for their outputs, ``inputs``, and on a mapped step ``item``/``index``), so the steps it
    reads are dependencies before anything is imported, and a resume in another process finds the
    function by reference as it finds step functions. ``@wf.step(when=fn)`` fills both in from the
    function; an expression stays a string, so a YAML twin and a Python twin compare equal.
    """

    call: str
    """``module:function`` resolved next to the workflow file first, as ``run:`` is."""
    reads: list[str] = Field(default_factory=_empty_list)
    """The keyword arguments it is called with, in order."""


class RepeatSpec(_Strict):
    """``repeat: {until: EXPR, max: N}``: run the step again, each run an iteration (``improve#2``), until
    ``until`` holds for an iteration's output, at most ``max`` times.

    ``until`` is a Jinja2 expression in the sandbox ``when:`` uses, over ``output`` (this iteration's),
    ``iteration`` (1-based), ``previous`` (the iteration before's output, null on the first), ``inputs``
    (the workflow's), the upstream step ids (their outputs, which become dependencies) and, on a mapped
    step, ``item`` and ``index``. Reaching ``max`` with ``until`` still false fails the loop's gate
    ``repeat``, to which the step's ``on_gate_fail`` applies (a pause for review by default). A graph
    cycle stays an error: this is the one way to loop, and it is always bounded. In Python the same
    object is ``orchestrator.Repeat(until=..., max=...)`` (or a dict).
    """

    until: str
    max: int = Field(ge=1, le=100, strict=True)
    """Iterations at most (1 to 100); required, so no loop runs for ever."""


Repeat = RepeatSpec
"""``@wf.step(repeat=Repeat(until="output.passed", max=3))``: the typed form of a step's ``repeat:``."""


class StepSpec(_Strict):
    """One node of the workflow DAG."""

    id: str
    type: StepType = "reasoning"
    agent: str | None = None
    """The component responsible for this step; defaults to the step id."""
    run: str | None = None
    """``module:function`` resolved next to the workflow file first, then on the import path."""
    inputs: dict[str, Any] = Field(default_factory=_empty_dict)
    """Parameter name -> ``$inputs.KEY`` | ``STEP_ID`` | ``STEP_ID.field``; non-strings are constants."""
    params: dict[str, Any] = Field(default_factory=_empty_dict)
    """Parameter name -> a literal value passed as is, never read as a reference (``{path: /tmp/x.txt}``)."""
    after: list[str] = Field(default_factory=_empty_list)
    """Steps that must finish first without passing their output in."""
    needs: str | None = None
    """What this step needs from the steps that feed it; injected into them as ``ctx.next_needs``."""
    description: str | None = None
    """What this step produces; also injected into the steps that feed it."""
    gates: list[GateSpec] = Field(default_factory=_empty_list)
    on_gate_fail: OnGateFail = "pause"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout: float | None = Field(default=None, gt=0)
    """Seconds before the attempt is cancelled and recorded as a timeout."""
    baseline: str | None = None
    """``module:function`` producing a reference output, used by counterfactual attribution."""
    verifies: list[str] = Field(default_factory=_empty_list)
    """For critics: the steps whose outputs this step checks."""
    isolation: Literal["thread", "process"] = "thread"
    """``process`` runs each attempt in a child process that a timeout kills (inputs and output cross as JSON)."""
    inline: bool = Field(default=False, strict=True)
    """Run a plain (sync) function on the event loop's thread instead of a worker thread: no thread hand-off
    (about half a sync step's cost), but it blocks every other step while it runs and its timeout cannot
    interrupt it (an overrun is still recorded as timed out). For quick pure functions only."""
    side_effects: bool = Field(default=False, strict=True)
    """Replays never act on this step: they call ``simulate`` if declared, else reuse the recorded output
    while the step's inputs are unchanged, else stop there (the replay is blocked by this step)."""
    simulate: str | None = None
    """``module:function`` for a side-effecting step: a dry run, called with the same inputs, that returns
    what the step would output without acting. Replays call it instead of the step."""
    review_timeout: float | None = Field(default=None, gt=0, le=MAX_REVIEW_TIMEOUT, allow_inf_nan=False)
    """Seconds a pause may wait for a human before ``on_review_timeout`` applies: finite and at most a
    year (a longer one is no timeout; leave the key out for a pause that waits for its decision)."""
    on_review_timeout: Literal["reject", "approve"] = "reject"
    # -- LLM steps (``type: llm``, or a critic that is a model) ------------------------------
    prompt: str | None = None
    """A Jinja2 template (sandboxed, StrictUndefined) of the user message; its variables are the
    step's inputs, ``ctx``, ``next_needs`` and ``gate_feedback``. Makes the step call a model."""
    system: str | None = None
    """The system message (a template too)."""
    output_schema: str | dict[str, Any] | None = None
    """``module:PydanticModel`` or an inline JSON Schema: the answer is validated against it."""
    tools: list[str | ToolRef] = Field(default_factory=_empty_list)
    """``module:function`` callables the model may call, described from their signatures and docstrings;
    ``{ref: module:function, approve: true}`` for one whose calls wait for a person's approval."""
    max_turns: int = Field(default=4, ge=1, le=50, strict=True)
    """Model turns of the tool loop."""
    inject_needs: bool = Field(default=True, strict=True)
    """End the prompt with what the consuming steps need (unless the template places ``next_needs``)."""
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    stream: bool | None = Field(default=None, strict=True)
    """Stream the model's answer to the run's event listener as ``Token`` events while it is generated (the
    step's ``llm: {stream: ...}``, which the workflow's ``llm:`` block may set for every step)."""
    llm: LLMConfig | None = None
    """Overrides of the workflow's ``llm:`` block for this step."""
    # -- control flow -------------------------------------------------------------------------
    when: str | ConditionCall | None = None
    """A Jinja2 expression (the prompts' sandbox) over step ids, ``inputs`` and, on a mapped step,
    ``item``/``index``, or a function (:class:`ConditionCall`): the step runs only if it is true, else its
    record is ``skipped`` with the reason. The steps it names are dependencies."""
    join: Literal["all", "any"] = "all"
    """``all``: skipped when any upstream step was skipped. ``any``: runs when at least one upstream step
    ran, with ``null`` for the outputs of skipped ones (skipped if none ran)."""
    for_each: str | None = None
    """``STEP``, ``STEP.field`` or ``$inputs.KEY``: a list known at run time; the step runs once per item
    (instances ``STEP[i]``, each with its own records, gates and pauses) and its output is the list of the
    instances' outputs in item order. Inputs may read ``$item``, ``$item.field`` and ``$index``."""
    max_parallel: int | None = Field(default=None, ge=1, strict=True)
    """At most this many instances of a mapped step at once (default: the run's concurrency)."""
    workflow: str | None = None
    """Another workflow this step runs as a child run: a file (``research.yaml``, ``triage.py``) resolved
    next to this workflow's file, or ``module:attribute`` naming a Python ``Workflow`` object. Its
    ``inputs`` are the child's inputs, its output is the child's output and its gates judge that output;
    with ``for_each``, one child run per item. Paths of units inside it read ``research > retrieve``."""
    repeat: RepeatSpec | None = None
    """Run the step again until a condition holds (:class:`RepeatSpec`): each iteration has its own records
    (``improve#2``), and consumers read the last iteration's output. Inputs may read ``$previous`` (the
    previous iteration's output, null on the first), ``$previous.field`` and ``$iteration``."""

    _numbers = field_validator("timeout", "review_timeout", mode="before")(staticmethod(no_boolean))

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not STEP_ID_PATTERN.match(value):
            raise ValueError(f"step id {value!r} must start with a letter or _ and hold only letters, digits, _ and -")
        return value

    @field_validator("agent")
    @classmethod
    def _printable_agent(cls, value: str | None) -> str | None:
        return one_line_name(value, "agent")

    @field_validator("tools")
    @classmethod
    def _each_tool_once(cls, value: list[str | ToolRef]) -> list[str | ToolRef]:
        """A tool listed twice (perhaps once with ``approve: true``, once without) would leave it unclear
        whether its calls wait for a person."""
        seen: dict[str, bool] = {}
        for tool in value:
            ref, approve = (tool, False) if isinstance(tool, str) else (tool.ref, tool.approve)
            if ref in seen:
                how = (f"once with approve: {str(seen[ref]).lower()}, once with approve: {str(approve).lower()}"
                       if seen[ref] != approve else "twice")
                raise ValueError(f"tools lists {ref!r} {how}; list each tool once")
            seen[ref] = approve
        return value

    @field_validator("retry", mode="before")
    @classmethod
    def _retry_shorthand(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"attempts": value}
        return value

    @model_validator(mode="after")
    def _inline_runs_in_this_process(self) -> StepSpec:
        if self.inline and self.isolation == "process":
            raise ValueError("inline: true runs the step on the event loop's thread; it cannot also have "
                             "isolation: process")
        return self

    @model_validator(mode="after")
    def _simulate_needs_side_effects(self) -> StepSpec:
        if self.simulate is not None and not self.side_effects:
            raise ValueError("simulate: is the dry run of a side-effecting step; add side_effects: true "
                             "(or drop simulate:)")
        return self

    @model_validator(mode="after")
    def _critic_reads_what_it_verifies(self) -> StepSpec:
        """A critic without explicit inputs receives the outputs of the steps it verifies."""
        if self.type == "critic" and not self.inputs and self.verifies:
            self.inputs = {sid: sid for sid in self.verifies}
        return self

    @property
    def reads_workflow_inputs(self) -> bool:
        """Whether an input or ``for_each`` reads a workflow input (``$inputs.KEY``): one that is always present,
        so a ``join: any`` step reading it runs even when every upstream step was skipped."""
        refs = [*self.inputs.values(), *([self.for_each] if self.for_each else [])]
        return any((parsed := parse_reference(ref)) is not None and parsed[0] == "input" for ref in refs)

    @property
    def inputs_from_verifies(self) -> bool:
        """Whether the step is a critic given the outputs of the steps it verifies, each under its id (its
        inputs were not written, or written just so): a problem with them is one of ``verifies``."""
        return self.type == "critic" and bool(self.verifies) and self.inputs == {sid: sid for sid in self.verifies}

    def tool_refs(self) -> list[ToolRef]:
        """The step's tools, each as a :class:`ToolRef` (a bare string is one without approval)."""
        return [t if isinstance(t, ToolRef) else ToolRef(ref=t) for t in self.tools]

    @property
    def calls_model(self) -> bool:
        """Whether the step is an LLM call (it has a ``prompt``)."""
        return self.prompt is not None

    @property
    def agent_name(self) -> str:
        """The component responsible for this step: ``agent``, else the step id."""
        return self.agent or self.id

    @model_validator(mode="after")
    def _child_run_is_the_work(self) -> StepSpec:
        """A ``workflow:`` step's work is its child run: nothing else may say what it computes."""
        if self.workflow is None:
            return self
        if not self.workflow.strip():
            raise ValueError("workflow: is empty; name a workflow file (research.yaml) or module:attribute")
        clashing = [key for key, given in (("run", self.run), ("prompt", self.prompt), ("system", self.system),
                                           ("output_schema", self.output_schema), ("tools", self.tools),
                                           ("simulate", self.simulate)) if given]
        if self.isolation == "process":
            clashing.append("isolation: process")
        if self.inline:
            clashing.append("inline")
        if self.type in ("llm", "critic"):
            clashing.append(f"type: {self.type}")
        if clashing:
            raise ValueError(f"step {self.id!r} runs workflow {self.workflow} as a child run, so it cannot also "
                             f"have {', '.join(clashing)}; put that work in a step of the child workflow")
        return self

    @property
    def runs_child(self) -> bool:
        """Whether the step runs another workflow as a child run (``workflow:``)."""
        return self.workflow is not None

    @model_validator(mode="after")
    def _parallel_bounds_a_map(self) -> StepSpec:
        if self.max_parallel is not None and self.for_each is None:
            raise ValueError("max_parallel: bounds the instances of a mapped step; add for_each: (or drop it)")
        return self

    @property
    def mapped(self) -> bool:
        """Whether the step runs once per item of a list (``for_each``)."""
        return self.for_each is not None

    @property
    def loops(self) -> bool:
        """Whether the step runs again until a condition holds (``repeat``)."""
        return self.repeat is not None

    def step_dependencies(self) -> list[str]:
        """Upstream step ids, in declaration order, from inputs, ``for_each``, ``when``, ``after`` and
        ``verifies``."""
        deps: list[str] = []
        refs = [*self.inputs.values(), *([self.for_each] if self.for_each else [])]
        for ref in refs:
            parsed = parse_reference(ref)
            if parsed and parsed[0] == "step" and parsed[1] not in deps:
                deps.append(parsed[1])
        if self.when is not None:
            from orchestrator.spec.conditions import step_names  # parses the condition once per process

            deps.extend(name for name in step_names(self.when) if name not in deps)
        if self.repeat is not None:
            from orchestrator.spec.conditions import until_step_names

            deps.extend(name for name in until_step_names(self.repeat.until) if name not in deps and name != self.id)
        for dep in [*self.verifies, *self.after]:
            if dep not in deps:
                deps.append(dep)
        return deps


EXTENSION_PREFIX = "x-"
"""A top-level key starting so is ignored: a place for YAML anchors (``x-base: &base {...}``)."""


class WorkflowSpec(_Strict):
    """A named, versioned DAG of steps."""

    name: str
    version: int | str = 1
    description: str | None = None
    inputs: dict[str, InputSpec] = Field(default_factory=_empty_dict)
    steps: list[StepSpec]
    outcome: str | None = None
    """Optional evaluator ``module:callable``: final output -> reward in [0, 1]."""
    outcome_threshold: float = Field(default=0.5, ge=0, le=1)
    """An evaluator score below this counts as an incorrect outcome."""
    output: str | None = None
    """The step whose output is the run's final output; defaults to the last step listed."""
    llm: LLMConfig | None = None
    """Defaults of every model call in the workflow (LLM steps, ``llm_judge`` gates); a step may override any key."""
    notify: list[NotifyTarget] = Field(default_factory=_empty_list)
    """Who is told when a run pauses for review (or fails, succeeds, has a review time out):
    :mod:`orchestrator.spec.notify`."""

    _numbers = field_validator("outcome_threshold", mode="before")(staticmethod(no_boolean))

    @model_validator(mode="before")
    @classmethod
    def _without_extension_keys(cls, value: Any) -> Any:
        """Top-level keys starting ``x-`` are the file's own (anchors shared by steps, as in a compose file):
        ignored, and not part of the definition."""
        if isinstance(value, dict) and any(isinstance(k, str) and k.startswith(EXTENSION_PREFIX) for k in value):
            return {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}
        return value

    @field_validator("inputs", mode="before")
    @classmethod
    def _input_shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({"type": v} if isinstance(v, str) else v) for k, v in value.items()}
        return value

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str) -> str:
        return one_line_name(value, "workflow name") or value

    @field_validator("notify", mode="before")
    @classmethod
    def _notify_shorthand(cls, value: Any) -> Any:
        return notify_shorthand(value)

    @field_validator("inputs")
    @classmethod
    def _referable_inputs(cls, value: dict[str, InputSpec]) -> dict[str, InputSpec]:
        for name in value:
            if not STEP_ID_PATTERN.match(name):
                raise ValueError(f"input name {name!r} cannot be referenced as $inputs.NAME: it must start with a "
                                 "letter or _ and hold only letters, digits, _ and -")
        return value

    @property
    def output_step(self) -> str:
        return self.output or self.steps[-1].id

    def __eq__(self, other: object) -> bool:
        """Specs are equal when their definitions are, wherever they were loaded from."""
        if not isinstance(other, WorkflowSpec):
            return NotImplemented
        return self.definition() == other.definition()

    __hash__ = None  # type: ignore[assignment]

    def step(self, step_id: str) -> StepSpec:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def review_timeouts(self) -> dict[str, float]:
        """Step id -> ``review_timeout``, for the steps that have one."""
        return {s.id: s.review_timeout for s in self.steps if s.review_timeout is not None}

    @property
    def step_ids(self) -> list[str]:
        return [s.id for s in self.steps]

    def definition(self) -> dict[str, Any]:
        """The serializable spec, the same whether it came from YAML or Python."""
        return self.model_dump(mode="json", exclude_defaults=True)


def field_value(value: Any, path: str) -> Any:
    """``STEP.field.sub`` extraction: dict keys and list indexes; KeyError(path) when absent."""
    cursor = value
    for part in path.split("."):
        if isinstance(cursor, dict) and part in cursor:
            cursor = cursor[part]
        elif isinstance(cursor, list) and part.isdigit() and int(part) < len(cursor):
            cursor = cursor[int(part)]
        else:
            raise KeyError(path)
    return cursor


def malformed_reference(ref: str) -> bool:
    """Whether a reference has an empty name or field (``a.``, ``a..b``, ``$inputs.``, ``$item.``): it would
    read nothing at run time."""
    parsed = parse_reference(ref)
    if parsed is None:
        return False
    kind, name, field_path = parsed
    return (kind in ("input", "step") and not name) or (field_path is not None and "" in field_path.split("."))


def parse_reference(ref: Any) -> tuple[str, str, str | None] | None:
    """Classify an input reference.

    Returns ``("input", key, None)`` for ``$inputs.KEY``, ``("step", id, field)`` for ``STEP_ID``
    or ``STEP_ID.field``, ``("item", "", field)`` for ``$item``/``$item.field`` and ``("index", "", None)``
    for ``$index`` (a mapped step's item and its position), ``("previous", "", field)`` for
    ``$previous``/``$previous.field`` and ``("iteration", "", None)`` for ``$iteration`` (a ``repeat:``
    step's previous output and its iteration), and ``None`` for a constant (any non-string value).
    """
    if not isinstance(ref, str):
        return None
    if ref.startswith("$inputs."):
        return ("input", ref[len("$inputs."):], None)
    if ref == "$item" or ref.startswith("$item."):
        return ("item", "", ref[len("$item."):] or None)
    if ref == "$index":
        return ("index", "", None)
    if ref == "$previous" or ref.startswith("$previous."):
        return ("previous", "", ref[len("$previous."):] or None)
    if ref == "$iteration":
        return ("iteration", "", None)
    if "." in ref:
        step_id, fld = ref.split(".", 1)
        return ("step", step_id, fld)
    return ("step", ref, None)
