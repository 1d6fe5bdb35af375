"""Prompt templates: Jinja2, sandboxed and strict.

Sandboxed because prompts come from workflow files and must not reach Python internals;
strict because a misspelt variable silently rendering as "" produces a plausible but wrong
prompt, the worst kind of bug in an LLM pipeline. :func:`template_problems` finds the same
mistakes when the workflow is validated, before any model is paid for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from orchestrator.spec.llm_errors import LLMError

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

#: Names every LLM prompt may use besides the step's inputs.
BUILTIN_NAMES = frozenset({"ctx", "next_needs", "gate_feedback", "previous"})


class TemplateError(LLMError):
    """A prompt template does not parse or does not render with the given variables."""


def _json_default(value: Any) -> Any:
    from orchestrator.core.jsonio import to_plain

    return to_plain(value)


def tojson(value: Any, indent: int | None = None) -> str:
    """Plain JSON (not HTML-escaped like Jinja's own ``tojson``): prompts are not HTML."""
    return json.dumps(value, sort_keys=False, ensure_ascii=False, indent=indent, default=_json_default)


@cache
def environment() -> SandboxedEnvironment:
    """The one environment (built on first use so importing this package stays cheap)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = tojson
    return env


@dataclass(frozen=True)
class CompiledTemplate:
    """A prompt template parsed and compiled once, and the free variables it reads."""

    template: Template
    names: frozenset[str]


@lru_cache(maxsize=1024)
def compiled(template: str) -> CompiledTemplate:
    """``template`` compiled, once per distinct text (so once per step definition, however many calls its steps
    make: compiling cost 70-90 times a render); a syntax error is a :class:`TemplateError`, never cached.
    ``compiled.cache_info().misses`` counts the compilations of this process."""
    import jinja2
    from jinja2 import meta

    env = environment()
    try:
        ast = env.parse(template)
        return CompiledTemplate(env.from_string(ast), frozenset(meta.find_undeclared_variables(ast)))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"prompt template line {exc.lineno}: {exc.message}") from None


def render(template: str, variables: Mapping[str, Any]) -> str:
    """Render ``template``; any syntax error or unknown name is a :class:`TemplateError`."""
    import jinja2

    try:
        return compiled(template).template.render(**variables)
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"prompt template: {exc.message}") from None
    except jinja2.TemplateError as exc:  # SecurityError and the rest
        raise TemplateError(f"prompt template: {exc}") from None


def used_names(template: str) -> set[str]:
    """Free variables the template reads (empty when it does not parse)."""
    try:
        return set(compiled(template).names)
    except TemplateError:
        return set()


def template_problems(template: str, known_names: Iterable[str]) -> list[tuple[int | None, str]]:
    """Problems to report at validate time, as ``(line, message)``; ``line`` is 1-based.

    A syntax error stops the analysis (it is the only problem returned). Otherwise every name
    the template reads that is neither in ``known_names`` nor a Jinja global is reported at the
    line where it is first read.
    """
    import jinja2
    from jinja2 import meta, nodes

    env = environment()
    try:
        ast = env.parse(template)
    except jinja2.TemplateSyntaxError as exc:
        return [(exc.lineno, f"template syntax error: {exc.message}")]
    declared = set(known_names)
    known = declared | set(env.globals)
    unknown = sorted(set(meta.find_undeclared_variables(ast)) - known)
    first_line: dict[str, int] = {}
    for node in ast.find_all(nodes.Name):
        if node.ctx == "load" and node.name in unknown:
            first_line[node.name] = min(first_line.get(node.name, node.lineno), node.lineno)
    problems: list[tuple[int | None, str]] = []
    for name in unknown:
        line = first_line.get(name) or _scan_for(template, name)
        problems.append((line, f"unknown template variable {name!r} (known: {', '.join(sorted(declared)) or 'none'})"))
    problems.sort(key=lambda p: (p[0] is None, p[0] or 0, p[1]))
    return problems


def _scan_for(template: str, name: str) -> int | None:
    """Fallback when the AST has no position: the first source line mentioning the name."""
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    for number, line in enumerate(template.splitlines(), start=1):
        if pattern.search(line):
            return number
    return None
