"""``when:`` and ``repeat.until:`` conditions: Jinja2 expressions in the sandbox the prompts use.

A condition is data in the spec (a string); this module parses it once per process, says which
names it reads (the steps it names become the step's dependencies), checks it at validate time,
and evaluates it against a run's values. No new language: whatever a prompt template can compute
in ``{{ ... }}`` a condition can test, and the sandbox refuses the same things (attributes
starting with ``_``, calls into Python internals).

When a condition is false the step is skipped, and its reason shows the values the condition
read (``classify.category = 'technical'``), so a reviewer sees why the route was taken without
opening the upstream record.

A condition may also be a Python function (``@wf.step(when=fn)``, stored as a
:class:`~orchestrator.spec.model.ConditionCall`): it is called with the names it reads as keyword
arguments, and the same rules apply to those names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable

    from jinja2 import nodes


class ConditionCallReference(Protocol):
    """What this module reads of a :class:`~orchestrator.spec.model.ConditionCall`: named by its shape,
    because the model imports this module and a module never imports its importer (even for types)."""

    @property
    def call(self) -> str: ...

    @property
    def reads(self) -> list[str]: ...


When: TypeAlias = "str | ConditionCallReference"
"""What a step's ``when`` holds: an expression, or a function's reference and the names it reads."""

CONDITION_NAMES_ON_ANY_STEP = frozenset({"inputs"})
"""Names a condition may read besides step ids."""

CONDITION_NAMES_ON_MAPPED_STEP = frozenset({"item", "index"})
"""Names only a step with ``for_each`` has: the item of the instance and its position."""

UNTIL_NAMES = frozenset({"output", "iteration", "previous"})
"""Names a ``repeat.until`` condition reads besides those of ``when``: the iteration's output, its number
(1-based) and the output of the iteration before it (null on the first)."""


class ConditionError(Exception):
    """A condition does not parse, names something it cannot read, or raised while evaluated."""


@dataclass(frozen=True)
class Condition:
    """A parsed condition: its text, the names it reads, and the sub-expressions it looks at."""

    text: str
    names: frozenset[str]
    """Top-level names read (``classify``, ``inputs``, ``item``)."""
    probes: tuple[str, ...]
    """The longest ``name.attr[...]`` chains it reads, as expressions, shown with their values in a reason."""

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        """The condition's truth for these values; ConditionError when it raises."""
        try:
            return bool(_compiled(self.text)(**values))
        except Exception as exc:  # the sandbox's SecurityError, a missing field, a TypeError...
            raise ConditionError(f"when {self.text} raised {type(exc).__name__}: {exc}") from None

    def explain(self, values: Mapping[str, Any]) -> str:
        """``classify.category = 'technical', inputs.tier = 'free'``: what the condition read."""
        shown = []
        for probe in self.probes:
            try:
                value = _compiled(probe)(**values)
            except Exception as exc:
                shown.append(f"{probe}: {type(exc).__name__}")
                continue
            shown.append(f"{probe} = {_shown(value)}")
        return ", ".join(shown)


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Condition:
    """Parse a condition once per process; ConditionError says what is wrong with it."""
    import jinja2
    from jinja2 import meta, nodes
    from jinja2.lexer import describe_token
    from jinja2.parser import Parser

    from orchestrator.spec.templates import environment

    if not text.strip():
        raise ConditionError("the condition is empty")
    try:  # the expression alone, as it is compiled: the message speaks only of what the author wrote
        parser = Parser(environment(), text, state="variable")
        expression = parser.parse_expression()
        if not parser.stream.eos:
            token = parser.stream.current
            shown = token.value or describe_token(token)
            raise jinja2.TemplateSyntaxError(f"unexpected {shown!r} after the expression", token.lineno)
    except jinja2.TemplateSyntaxError as exc:
        message = (exc.message or "").replace("'end of template'", "end of template")
        message = message.replace("end of template", "end of the condition")
        raise ConditionError(f"condition {text!r} does not parse: {message}") from None
    tree = nodes.Template([nodes.Output([expression])])
    tree.set_environment(environment())
    unsafe = [n for n in _attribute_names(tree) if n.startswith("_")]
    if unsafe:
        raise ConditionError(f"condition {text!r} reads attribute {unsafe[0]!r}: attributes starting with _ "
                             "are not allowed")
    names = frozenset(meta.find_undeclared_variables(tree))
    return Condition(text, names, tuple(dict.fromkeys(_probes(tree))))


def names_read(when: When) -> frozenset[str]:
    """The top-level names a condition reads (step ids, ``inputs``, ``item``, ``index``); ConditionError
    when an expression does not parse."""
    return parse(when).names if isinstance(when, str) else frozenset(when.reads)


def describe(when: When) -> str:
    """How a reason names the condition: the expression, or ``module:fn(classify, inputs)``."""
    return when if isinstance(when, str) else f"{when.call}({', '.join(when.reads)})"


def false_reason(when: When, values: Mapping[str, Any], function: Callable[..., Any] | None = None) -> str | None:
    """None when the condition holds for ``values``, else the skip reason showing what it read
    (``when classify.category == 'refund' was false (classify.category = 'technical')``).
    ``function`` is the bound function of a :class:`ConditionCall`. ConditionError when it raises."""
    if isinstance(when, str):
        condition = parse(when)
        return None if condition.evaluate(values) else f"when {when} was false ({condition.explain(values)})"
    if function is None:
        raise ConditionError(f"when {describe(when)}: the function is not bound")
    arguments = {name: values.get(name) for name in when.reads}
    try:
        holds = bool(function(**arguments))
    except Exception as exc:
        raise ConditionError(f"when {describe(when)} raised {type(exc).__name__}: {exc}") from None
    if holds:
        return None
    return f"when {describe(when)} was false ({', '.join(f'{k} = {_shown(v)}' for k, v in arguments.items())})"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def problems(when: When, *, steps: Iterable[str], mapped: bool, extra: Iterable[str] = ()) -> list[str]:
    """Why a condition cannot run in its step (empty when it can): syntax, unknown names, item/index
    off a mapped step."""
    text = describe(when)
    try:
        names = names_read(when)
    except ConditionError as exc:
        return [str(exc)]
    allowed = set(steps) | CONDITION_NAMES_ON_ANY_STEP | set(extra)
    if mapped:
        allowed |= CONDITION_NAMES_ON_MAPPED_STEP
    found = []
    for name in sorted(names - allowed):
        if name in CONDITION_NAMES_ON_MAPPED_STEP:
            found.append(f"condition {text!r} reads {name!r}, which only a step with for_each has")
        else:
            found.append(f"condition {text!r} reads {name!r}, which is no step of this workflow "
                         f"(it may read step ids, {', '.join(sorted(allowed - set(steps)))})")
    return found


def until_step_names(until: str) -> list[str]:
    """The step ids a ``repeat.until`` condition reads (dependencies of its step); empty when it does not parse."""
    try:
        return sorted(parse(until).names - CONDITION_NAMES_ON_ANY_STEP - CONDITION_NAMES_ON_MAPPED_STEP - UNTIL_NAMES)
    except ConditionError:
        return []


def until_holds(until: str, values: Mapping[str, Any]) -> bool:
    """Whether a loop's ``until`` holds for ``values`` (what it read is :meth:`Condition.explain`'s, asked only
    when the loop gives up: evaluating the probes too would cost every iteration as much again).
    ConditionError (naming ``repeat until``) when it raises."""
    try:
        return bool(_compiled(until)(**values))
    except Exception as exc:
        raise ConditionError(f"repeat until {until} raised {type(exc).__name__}: {exc}") from None


def step_names(when: When) -> list[str]:
    """The names a condition reads, in a stable order; those that are step ids are dependencies.
    A condition that does not parse reads nothing (validate reports it)."""
    try:
        return sorted(names_read(when) - CONDITION_NAMES_ON_ANY_STEP - CONDITION_NAMES_ON_MAPPED_STEP)
    except ConditionError:
        return []


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> Any:
    from orchestrator.spec.templates import environment

    return environment().compile_expression(text, undefined_to_none=False)


def _attribute_names(tree: nodes.Node) -> list[str]:
    from jinja2 import nodes

    return [n.attr for n in tree.find_all(nodes.Getattr)]


def _probes(tree: nodes.Node) -> list[str]:
    """The maximal attribute/item chains rooted at a name (``classify.category``), else bare names."""
    from jinja2 import nodes

    chained: set[int] = set()
    found: list[str] = []
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        text = _chain_text(node)
        if text is None or id(node) in chained or not isinstance(node, (nodes.Getattr, nodes.Getitem)):
            continue
        inner = node.node
        while isinstance(inner, (nodes.Getattr, nodes.Getitem)):
            chained.add(id(inner))
            inner = inner.node
        found.append(text)
    # find_all walks outermost first, so inner chains were marked after their outer chain was kept
    for node in tree.find_all(nodes.Name):
        if node.ctx == "load" and not any(p == node.name or p.startswith((node.name + ".", node.name + "["))
                                          for p in found):
            found.append(node.name)
    return found


def _chain_text(node: nodes.Node) -> str | None:
    from jinja2 import nodes

    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        base = _chain_text(node.node)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        base = _chain_text(node.node)
        return None if base is None else f"{base}[{node.arg.value!r}]"
    return None

