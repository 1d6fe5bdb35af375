"""Load workflow files (YAML or Python) into a checked :class:`~orchestrator.bind.binding.BoundWorkflow`.

Loading collects :class:`SpecProblem` rows (file, dotted key, message, line) instead of
stopping at the first one, so ``orchestrator validate`` can list everything wrong at once.
Line numbers come from the YAML parser's marks; a problem found later (a cycle, a callable
whose parameters do not match) is mapped back to the line of the key that caused it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.bind.binding import (
    BoundWorkflow,
    ChildLoader,
    DefinesWorkflow,
    IncludeCycleError,
    bind,
    step_object_key,
)
from orchestrator.bind.resolve import file_stamps, import_module, loaded_files, resolve_callable, unchanged
from orchestrator.core.errors import ResolveError, SpecError, SpecProblem
from orchestrator.core.files import MAX_WORKFLOW_BYTES, UnreadableFileError, read_capped
from orchestrator.spec.model import GateSpec, InputSpec, RepeatSpec, RetryPolicy, StepSpec, WorkflowSpec
from orchestrator.spec.validation import error_message, without_union_members

LineMap = dict[tuple[Any, ...], tuple[int, int]]

MERGE_TAG = "tag:yaml.org,2002:merge"
"""The tag YAML gives a ``<<`` key: the mapping (or mappings) it names are merged into the one holding it."""

MAX_ALIAS_NODES = 10_000
"""How many nodes YAML aliases (``*name``) may expand to in one file, all aliases together.

Each alias copies its anchored value, so nested anchors grow exponentially (the "billion
laughs" file); beyond this limit the file is refused instead of exhausting memory.
"""


class _Alias(yaml.Node):
    """Where an alias (``*name``) was used, wrapping the node it refers to."""

    def __init__(self, target: yaml.Node, name: str, mark: Any) -> None:
        super().__init__(target.tag, target.value, mark, mark)
        self.target = target
        self.name = name


class _Loader(yaml.SafeLoader):
    """The safe loader, marking each alias use so its expansion can be counted and located."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            target = super().compose_node(parent, index)
            return _Alias(target, event.anchor, event.start_mark) if target is not None else None
        return super().compose_node(parent, index)


def read_workflow_bytes(p: Path, path: str) -> bytes:
    """A workflow file's bytes; SpecError when it cannot be read, is no regular file (a FIFO, a
    device) or is larger than :data:`~orchestrator.core.files.MAX_WORKFLOW_BYTES`."""
    try:
        return read_capped(p, MAX_WORKFLOW_BYTES)
    except OSError as exc:
        raise SpecError([SpecProblem(path, "", f"cannot read workflow file: {exc.strerror}")]) from None
    except UnreadableFileError as exc:
        raise SpecError([SpecProblem(path, "", f"cannot read workflow file: {exc}")]) from None


def read_text(p: Path, path: str) -> str:
    """A workflow file's text; SpecError when it cannot be read or is not UTF-8 text."""
    data = read_workflow_bytes(p, path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError([SpecProblem(path, "", f"not a text file (UTF-8): byte 0x{data[exc.start]:02x} at "
                                               f"offset {exc.start} is not UTF-8", line)]) from None
    if "\x00" in text:
        offset = text.index("\x00")
        raise SpecError([SpecProblem(path, "", f"not a text file (UTF-8): a NUL byte at offset {offset}",
                                     text.count("\n", 0, offset) + 1)])
    return text


def _compose(text: str, path: str) -> tuple[Any, LineMap]:
    """Parse YAML keeping the line and column (1-based) of every key and item."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        raise SpecError([SpecProblem(path, "", f"YAML syntax error: {exc.problem or exc}", line, col)]) from None
    except yaml.YAMLError as exc:  # the reader: a character YAML does not allow
        raise SpecError([SpecProblem(path, "", f"not a YAML text file: {exc}")]) from None
    except RecursionError:
        raise SpecError([SpecProblem(path, "", "YAML nested too deeply (or an alias inside its own anchor)")]) from None
    lines: LineMap = {}
    constructor = yaml.SafeLoader("")
    expanded = 0

    def convert(n: yaml.Node, at: tuple[Any, ...], alias: tuple[_Alias, tuple[Any, ...]] | None = None) -> Any:
        """``alias``: the outermost alias being expanded, and where it was used."""
        nonlocal expanded
        if isinstance(n, _Alias):
            alias, n = alias or (n, at), n.target
        if alias is not None:
            expanded += 1
            if expanded > MAX_ALIAS_NODES:
                mark = alias[0].start_mark
                raise SpecError([SpecProblem(
                    path, _dotted(alias[1], None),
                    f"alias *{alias[0].name} (with the aliases inside it): YAML aliases expand to more than "
                    f"{MAX_ALIAS_NODES} values (nested anchors and aliases); write the values out or use fewer "
                    "aliases", mark.line + 1, mark.column + 1)])
        lines.setdefault(at, (n.start_mark.line + 1, n.start_mark.column + 1))
        if isinstance(n, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node, merged, via in pairs(n, at, alias):
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SpecError([SpecProblem(path, _dotted(at, None), "a mapping key must be a plain value, "
                                                 "not a list or mapping", key_node.start_mark.line + 1)])
                key = constructor.construct_object(key_node, deep=True)
                if key in out:
                    if merged:  # a key written in the mapping (or an earlier merged one) wins over a merged one
                        continue
                    raise SpecError([SpecProblem(path, ".".join(map(str, (*at, key))), f"duplicate key {key!r}",
                                                 key_node.start_mark.line + 1)])
                lines[(*at, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = convert(value_node, (*at, key), via)
            return out
        if isinstance(n, yaml.SequenceNode):
            return [convert(item, (*at, i), alias) for i, item in enumerate(n.value)]
        return constructor.construct_object(n, deep=True)

    def pairs(n: yaml.MappingNode, at: tuple[Any, ...], alias: tuple[_Alias, tuple[Any, ...]] | None,
              depth: int = 0) -> Iterator[tuple[yaml.Node, yaml.Node, bool, tuple[_Alias, tuple[Any, ...]] | None]]:
        """A mapping's (key, value, merged, alias) pairs: its own keys first, then those of the mappings its
        merge keys (``<<: *base``, ``<<: [*a, *b]``) name, in order, each merged mapping's own merges after
        it. A merged value keeps its own marks, so a problem in it names the line where it is written."""
        merges: list[yaml.Node] = []
        for key_node, value_node in n.value:
            if isinstance(key_node, _Alias):
                key_node = key_node.target
            if key_node.tag == MERGE_TAG:
                merges.append(value_node)
            else:
                yield key_node, value_node, depth > 0, alias
        for value_node in merges:
            sources = value_node.target.value if isinstance(value_node, _Alias) and \
                isinstance(value_node.target, yaml.SequenceNode) else \
                value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                via = alias
                if isinstance(source, _Alias):
                    via, source = alias or (source, at), source.target
                if not isinstance(source, yaml.MappingNode):
                    raise SpecError([SpecProblem(
                        path, _dotted(at, None), "a merge key (<<) takes a mapping, or a list of mappings, such as "
                        "*base", source.start_mark.line + 1, source.start_mark.column + 1)])
                yield from pairs(source, at, via, depth + 1)

    if node is None:
        raise SpecError([SpecProblem(path, "", "the file is empty; a workflow needs 'name' and 'steps'")])
    try:
        return convert(node, ()), lines
    except RecursionError:
        raise SpecError([SpecProblem(path, "", "YAML nested too deeply (or an alias inside its own anchor)")]) from None


def _dotted(loc: tuple[Any, ...], data: Any) -> str:
    """Render a location like ``steps.summarize.gates[1]``, naming steps by id where known."""
    parts: list[str] = []
    cursor = data
    for item in loc:
        if isinstance(item, int):
            if parts and parts[-1] == "steps" and isinstance(cursor, list) and item < len(cursor) \
                    and isinstance(cursor[item], dict) and isinstance(cursor[item].get("id"), str):
                parts.append(cursor[item]["id"])
            elif parts:
                parts[-1] += f"[{item}]"
            else:
                parts.append(f"[{item}]")
        else:
            parts.append(str(item))
        try:
            cursor = cursor[item]
        except (KeyError, IndexError, TypeError):
            cursor = None
    return ".".join(parts)


def _line_for(lines: LineMap, loc: tuple[Any, ...]) -> int | None:
    while loc:
        if loc in lines:
            return lines[loc][0]
        loc = loc[:-1]
    return None


def _step_loc(data: Any, step_id: str) -> tuple[Any, ...]:
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        for i, s in enumerate(data["steps"]):
            if isinstance(s, dict) and s.get("id") == step_id:
                return ("steps", i)
    return ()


def _key_to_loc(key: str, data: Any) -> tuple[Any, ...]:
    """Map a dotted key from graph checks (``steps.x.inputs.p``, ``steps[3].id``) to a YAML location."""
    if key.startswith("steps["):
        index = int(key[len("steps["):key.index("]")])
        tail = key[key.index("]") + 2:].split(".") if "]." in key else []
        return ("steps", index, *tail)
    parts: list[Any] = []
    for part in key.split("."):
        name, bracket, rest = part.partition("[")
        parts.append(name)
        if bracket:
            parts.append(int(rest.rstrip("]")))
    if parts[0] == "steps" and len(parts) > 1:
        return (*_step_loc(data, parts[1]), *parts[2:])
    return tuple(parts)


def _validation_problems(exc: ValidationError, data: Any, lines: LineMap, path: str) -> list[SpecProblem]:
    problems = []
    for err in without_union_members(list(exc.errors()), data):
        loc = tuple(err["loc"])
        key = _dotted(loc, data)
        if err["type"] == "extra_forbidden":
            owner = _dotted(loc[:-1], data) or "the workflow"
            model = _model_for(loc[:-1])
            valid = sorted(model.model_fields) if model else []
            msg = f"unknown key {loc[-1]!r} in {owner}" + (f"; valid keys: {', '.join(valid)}" if valid else "")
        else:
            msg = error_message(err)
        problems.append(SpecProblem(path, key, msg, _line_for(lines, loc)))
    return problems


def _model_for(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return WorkflowSpec
    if names == ["steps"]:
        return StepSpec
    if names[:1] == ["steps"] and names[-1:] == ["retry"]:
        return RetryPolicy
    if names[:1] == ["steps"] and names[-1:] == ["gates"]:
        return GateSpec
    if names[:1] == ["steps"] and names[-1:] == ["repeat"]:
        return RepeatSpec
    if names[:1] == ["inputs"]:
        return InputSpec
    return None


def parse_yaml(path: str | Path) -> tuple[WorkflowSpec, Any, LineMap]:
    """YAML file -> unbound spec, the raw data and the line map. Raises SpecError."""
    p = Path(path)
    text = read_text(p, str(path))
    data, lines = _compose(text, str(path))
    if not isinstance(data, dict):
        raise SpecError([SpecProblem(str(path), "", "a workflow file must be a mapping with 'name' and 'steps'", 1)])
    try:
        spec = WorkflowSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_validation_problems(exc, data, lines, str(path))) from None
    return spec, data, lines


_LOADED: dict[tuple[str, str, bytes], tuple[BoundWorkflow, dict[str, bytes | None]]] = {}
"""Bound workflows of this process by (file, how it was named, its bytes), with the step modules'
files (and the files of the child workflows it runs) as they were then: a bulk run or a worker loads
one file many times; an edited workflow file has other bytes, and an edited step module or child
workflow another digest, so either is bound again (a key of mtime and size could miss an edit within
the file system's timestamp granularity that keeps the size)."""

WORKFLOW_SUFFIXES = (".yaml", ".yml", ".json", ".py")
"""What a workflow file's name ends with; a ``workflow:`` reference that ends so is a file, else
``module:attribute``."""

_INCLUDING: ContextVar[tuple[tuple[frozenset[str], str], ...]] = ContextVar("including", default=())
"""The workflows being loaded around the current one, outermost first, as (identities, label): a child
workflow that is one of them includes itself."""


@contextmanager
def _including(identities: frozenset[str], label: str) -> Iterator[None]:
    """Load a workflow inside the ones being loaded; IncludeCycleError naming the chain when it is one."""
    stack = _INCLUDING.get()
    for position, (outer, _) in enumerate(stack):
        if outer & identities:
            raise IncludeCycleError([lbl for _, lbl in stack[position:]] + [label])
    token = _INCLUDING.set((*stack, (identities, label)))
    try:
        yield
    finally:
        _INCLUDING.reset(token)


def load_workflow(path: str | Path) -> BoundWorkflow:
    """Load, check and bind a workflow file (``.yaml``/``.yml`` or ``.py``), and the child workflows its
    ``workflow:`` steps run. Raises SpecError (IncludeCycleError when it includes itself).

    A file loaded before, unchanged since (its step modules and child workflows too), returns the same
    (immutable) bound workflow.
    """
    p = Path(path)
    if not p.exists():
        raise SpecError([SpecProblem(str(path), "", "no such file")])
    source = str(p.resolve())
    with _including(frozenset({source}), str(path)):
        key = (source, str(path), read_workflow_bytes(p, str(path)))
        cached = _LOADED.get(key)
        if cached is not None and unchanged(cached[1]):
            return cached[0]
        bound = _load_workflow(p, path, source)
        _LOADED[key] = (bound, {**loaded_files(), **file_stamps(bound.included_sources())})
        return bound


def _load_workflow(p: Path, path: str | Path, source: str) -> BoundWorkflow:
    load_child = child_loader(os.path.dirname(source))
    if p.suffix == ".py":
        read_text(p, str(path))  # a binary or non-UTF-8 file says so, not "importing failed"
        found = load_python_workflow(p)
        if isinstance(found, WorkflowSpec):
            return bind(found, source=source, path=str(path), load_child=load_child)
        with _including(frozenset({_object_identity(found)}), str(path)):
            return bind(found.spec, source=source, objects=found.objects, path=str(path), load_child=load_child)
    if p.suffix not in (".yaml", ".yml", ".json"):
        suffixes = f"{', '.join(WORKFLOW_SUFFIXES[:-1])} or {WORKFLOW_SUFFIXES[-1]}"
        raise SpecError([SpecProblem(str(path), "", f"a workflow file ends in {suffixes}")])
    spec, data, lines = parse_yaml(p)
    return bind(spec, source=source, path=str(path), locate=lambda key: _line_for(lines, _key_to_loc(key, data)),
                load_child=load_child)


def is_file_reference(ref: str) -> bool:
    """Whether a ``workflow:`` reference names a file (``research.yaml``) rather than ``module:attribute``."""
    return ref.endswith(WORKFLOW_SUFFIXES) or ":" not in ref


def child_loader(base_dir: str | None) -> ChildLoader:
    """Binds the child workflows of a workflow whose file is in ``base_dir``: a file is resolved next to it,
    ``module:attribute`` like a step's ``run:`` (next to it first, then the import path), and a Python
    ``Workflow`` object handed over is bound as it is."""
    def load(ref: str, given: Any) -> BoundWorkflow:
        if given is not None:
            return bind_python_workflow(given, ref)
        if is_file_reference(ref):
            path = Path(ref)
            if not path.is_absolute() and base_dir is not None:
                path = Path(base_dir) / ref
            return load_workflow(_shown_path(path))
        found = resolve_callable(ref, base_dir)
        if isinstance(found, WorkflowSpec):
            with _including(frozenset({f"spec:{id(found)}"}), ref):
                return bind(found, path=ref, load_child=child_loader(base_dir))
        if not isinstance(found, DefinesWorkflow):
            raise ResolveError(f"{ref} is {type(found).__name__}, not a Workflow")
        return bind_python_workflow(found, ref)

    return load


def bind_python_workflow(workflow: DefinesWorkflow, label: str) -> BoundWorkflow:
    """A workflow defined in Python, bound with its objects; the file that defined it is its source, so a
    child run of it resumes in another process."""
    if not isinstance(workflow, DefinesWorkflow):
        raise ResolveError(f"{label} is {type(workflow).__name__}, not a Workflow")
    source = workflow.defined_in
    with _including(frozenset({_object_identity(workflow)}), label):
        return bind(workflow.spec, source=source, objects=workflow.objects, path=source or label,
                    load_child=child_loader(os.path.dirname(source) if source else None))


def _object_identity(workflow: object) -> str:
    return f"object:{id(workflow)}"


def _shown_path(path: Path) -> str:
    """A child workflow's path as messages show it: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_spec(path: str | Path) -> WorkflowSpec:
    """The spec of a workflow file without binding it (``orchestrator schema`` tooling, tests)."""
    p = Path(path)
    if p.suffix == ".py":
        return load_python(p)[0]
    return parse_yaml(p)[0]


def load_python(path: Path) -> tuple[WorkflowSpec, Mapping[str, Any]]:
    """Import a Python file; its module-level :class:`~orchestrator.bind.python_workflow.Workflow` gives the spec
    and the objects (step functions, gate objects) the spec refers to."""
    found = load_python_workflow(path)
    if isinstance(found, WorkflowSpec):
        return found, {}
    return found.spec, found.objects


def load_python_workflow(path: Path) -> DefinesWorkflow | WorkflowSpec:
    """The workflow a Python file defines: its one module-level Workflow object, or, when it defines
    several, the one that no other runs as a child workflow (the others are its children)."""
    found = python_workflows(path)
    if len(found) > 1:
        children = {id(child) for obj in found.values() for child in _child_objects(obj)}
        found = {k: v for k, v in found.items() if id(v) not in children} or found
    if len(found) != 1:
        what = "no module-level Workflow object" if not found else f"several Workflow objects: {sorted(found)}"
        raise SpecError([SpecProblem(str(path), "", f"{what}; define exactly one (besides the workflows it runs "
                                                    "as child workflows), e.g. `wf = Workflow('name')`")])
    return next(iter(found.values()))


def python_workflows(path: Path) -> dict[str, DefinesWorkflow | WorkflowSpec]:
    """Every module-level Workflow object (or WorkflowSpec) of a Python file, by variable name."""
    name = path.stem
    spec_name = None
    if ":" in name:
        name, spec_name = name.split(":", 1)
    try:
        module = import_module(name, path.resolve().parent)
    except SpecError:
        raise
    except SystemExit as exc:  # sys.exit() at import: the file is at fault, not the command
        raise SpecError([SpecProblem(str(path), "", f"importing the file failed: it called exit({exc.code!r})")]) \
            from None
    except Exception as exc:
        message = f"importing the file failed: {type(exc).__name__}: {exc}"
        raise SpecError([SpecProblem(str(path), "", message)]) from None
    found = {k: v for k, v in vars(module).items()
             if isinstance(v, WorkflowSpec) or (isinstance(v, DefinesWorkflow) and not isinstance(v, type))}
    if spec_name:
        found = {k: v for k, v in found.items() if k == spec_name}
    return found


def _child_objects(workflow: DefinesWorkflow | WorkflowSpec) -> list[Any]:
    """The Workflow objects a Python workflow runs as children (handed over with its objects)."""
    if isinstance(workflow, WorkflowSpec):
        return []
    try:
        spec, objects = workflow.spec, workflow.objects
    except SpecError:
        return []
    return [objects[key] for key in (step_object_key(s.id, "workflow") for s in spec.steps if s.runs_child)
            if key in objects]
