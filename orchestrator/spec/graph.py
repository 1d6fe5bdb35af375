"""Build, check and order the workflow DAG. Pure functions over the spec model.

Ordering and reachability are plain Python (a run never pays networkx's ~80 ms import);
networkx is imported only to name the steps of a cycle, when a workflow has one.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

from orchestrator.spec.model import StepSpec, WorkflowSpec, malformed_reference, parse_reference

if TYPE_CHECKING:
    import networkx as nx

Problem = tuple[str, str]
"""(dotted key, message): spec.py attaches file and line."""


def build_graph(spec: WorkflowSpec) -> nx.DiGraph:
    """Edges point from producer to consumer. Unknown references are left out (see check_references)."""
    import networkx as nx

    graph = nx.DiGraph()
    ids = set(spec.step_ids)
    for step in spec.steps:
        graph.add_node(step.id)
    for step in spec.steps:
        for dep in step.step_dependencies():
            if dep in ids:
                graph.add_edge(dep, step.id)
    return graph


REFERENCE_FORMS = ("is not a reference: write STEP, STEP.field, $inputs.KEY, $item.field or $previous.field "
                   "(a name after each dot), or put a literal string under params:")


def check_references(spec: WorkflowSpec) -> list[Problem]:
    """Every input, ``after`` and ``verifies`` must name a defined step or workflow input."""
    problems: list[Problem] = []
    ids = spec.step_ids
    seen: set[str] = set()
    for i, step in enumerate(spec.steps):
        if step.id in seen:
            problems.append((f"steps[{i}].id", f"duplicate step id {step.id!r}; step ids must be unique"))
        seen.add(step.id)
    for step in spec.steps:
        for param, ref in ({} if step.inputs_from_verifies else step.inputs).items():  # verifies is checked below
            parsed = parse_reference(ref)
            if parsed is None:
                continue
            kind, name, _ = parsed
            if malformed_reference(ref):
                problems.append((f"steps.{step.id}.inputs.{param}",
                                 f"step {step.id!r} input {param!r}: {ref!r} {REFERENCE_FORMS}"))
                continue
            if kind in ("item", "index"):
                if not step.mapped:
                    problems.append((f"steps.{step.id}.inputs.{param}",
                                     f"step {step.id!r} input {param!r} reads {ref!r}, which only a step with "
                                     "for_each has"))
                continue
            if kind in ("previous", "iteration"):
                if not step.loops:
                    problems.append((f"steps.{step.id}.inputs.{param}",
                                     f"step {step.id!r} input {param!r} reads {ref!r}, which only a step with "
                                     "repeat: has (" + ("the previous iteration's output)" if kind == "previous"
                                                        else "the iteration's number)")))
                continue
            if kind == "input" and name not in spec.inputs:
                problems.append((f"steps.{step.id}.inputs.{param}",
                                 f"step {step.id!r} input {param!r} references workflow input {name!r}, "
                                 f"which is not declared. Declared inputs: {sorted(spec.inputs)}"))
            elif kind == "step" and name not in ids:
                problems.append((f"steps.{step.id}.inputs.{param}",
                                 f"step {step.id!r} depends on {name!r}, which is not defined. "
                                 f"Defined steps: {ids}; to pass a literal string, use params: "
                                 f"{{{param}: {ref}}}"))
            elif kind == "step" and name == step.id:
                problems.append((f"steps.{step.id}.inputs.{param}", f"step {step.id!r} consumes its own output"))
        for param in step.params:
            if param in step.inputs:
                problems.append((f"steps.{step.id}.params.{param}",
                                 f"step {step.id!r} parameter {param!r} is under both inputs: and params:; "
                                 "a parameter gets its value from one"))
        problems.extend(_control_flow_problems(spec, step, ids))
        for key in ("after", "verifies"):
            for dep in getattr(step, key):
                if dep not in ids:
                    problems.append((f"steps.{step.id}.{key}",
                                     f"step {step.id!r} {key} names {dep!r}, which is not a step. "
                                     f"Defined steps: {ids}"))
        if step.type == "critic" and not step.verifies:
            problems.append((f"steps.{step.id}.verifies",
                             f"critic step {step.id!r} must name the steps it checks in 'verifies'"))
    if spec.output is not None and spec.output not in ids:
        problems.append(("output", f"output names step {spec.output!r}, which is not defined. Defined steps: {ids}"))
    return problems


def _control_flow_problems(spec: WorkflowSpec, step: StepSpec, ids: list[str]) -> list[Problem]:
    """``when`` must parse and read only what the step can see; ``for_each`` must name a step or input."""
    from orchestrator.spec import conditions

    found: list[Problem] = []
    if step.when is not None:
        for message in conditions.problems(step.when, steps=ids, mapped=step.mapped):
            found.append((f"steps.{step.id}.when", f"step {step.id!r} when: {message}"))
        if step.id in conditions.step_names(step.when):
            found.append((f"steps.{step.id}.when", f"step {step.id!r} when: the condition reads the step's own "
                                                  "output, which does not exist before it runs"))
    if step.repeat is not None:
        until = step.repeat.until
        where = f"steps.{step.id}.repeat.until"
        for message in conditions.problems(until, steps=ids, mapped=step.mapped,
                                           extra=conditions.UNTIL_NAMES):
            found.append((where, f"step {step.id!r} repeat until: {message}"))
        if step.id in conditions.until_step_names(until):
            found.append((where, f"step {step.id!r} repeat until: the condition reads the step's own id; its "
                                 "output is `output` (and the iteration before's `previous`)"))
    if step.for_each is not None:
        parsed = parse_reference(step.for_each)
        where = f"steps.{step.id}.for_each"
        if parsed is None or parsed[0] in ("item", "index", "previous", "iteration") \
                or malformed_reference(step.for_each):
            found.append((where, f"step {step.id!r} for_each: {step.for_each!r} must be STEP, STEP.field or "
                                 "$inputs.KEY (a list known at run time)"))
        elif parsed[0] == "input" and parsed[1] not in spec.inputs:
            found.append((where, f"step {step.id!r} for_each reads workflow input {parsed[1]!r}, which is not "
                                 f"declared. Declared inputs: {sorted(spec.inputs)}"))
        elif parsed[0] == "input" and spec.inputs[parsed[1]].type != "array":
            found.append((where, f"step {step.id!r} for_each reads workflow input {parsed[1]!r}, declared "
                                 f"type: {spec.inputs[parsed[1]].type}; a step runs once per item of a list, so "
                                 "declare it type: array"))
        elif parsed[0] == "step" and parsed[1] not in ids:
            found.append((where, f"step {step.id!r} for_each reads step {parsed[1]!r}, which is not defined. "
                                 f"Defined steps: {ids}"))
        elif parsed[0] == "step" and parsed[1] == step.id:
            found.append((where, f"step {step.id!r} for_each reads its own output"))
    return found


def find_cycles(spec: WorkflowSpec) -> list[list[str]]:
    """Each cycle as the list of its steps, in order, starting from the first declared one."""
    if _kahn(spec) is not None:
        return []  # acyclic: the common case needs no graph library
    import networkx as nx

    graph = build_graph(spec)
    order = {sid: i for i, sid in enumerate(spec.step_ids)}
    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1:
            node = next(iter(component))
            if not graph.has_edge(node, node):
                continue
        sub = graph.subgraph(component)
        cycle = nx.find_cycle(sub)
        nodes = [edge[0] for edge in cycle]
        start = min(range(len(nodes)), key=lambda k: order[nodes[k]])
        cycles.append(nodes[start:] + nodes[:start])
    return sorted(cycles, key=lambda c: order[c[0]])


def _kahn(spec: WorkflowSpec) -> list[str] | None:
    """Kahn's algorithm, always taking the ready step declared first; None when there is a cycle."""
    ids = spec.step_ids
    index = {sid: i for i, sid in enumerate(ids)}
    users = consumers(spec)
    indegree = {sid: 0 for sid in ids}
    for sid in ids:
        for user in users.get(sid, ()):
            indegree[user] += 1
    heap = [index[sid] for sid in ids if indegree[sid] == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        sid = ids[heapq.heappop(heap)]
        order.append(sid)
        for user in users.get(sid, ()):
            indegree[user] -= 1
            if indegree[user] == 0:
                heapq.heappush(heap, index[user])
    return order if len(order) == len(ids) else None


def topological_order(spec: WorkflowSpec) -> list[str]:
    """Steps in dependency order, ties broken by declaration order so output is stable."""
    order = _kahn(spec)
    if order is None:
        raise ValueError(f"workflow {spec.name!r} has a cycle: {find_cycles(spec)[0]}")
    return order


def _reach(start: Iterable[str], edges: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    stack = list(start)
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in out:
                out.add(nxt)
                stack.append(nxt)
    return out


def ancestors(spec: WorkflowSpec, step_id: str) -> set[str]:
    ids = set(spec.step_ids)
    deps = {s.id: [d for d in s.step_dependencies() if d in ids] for s in spec.steps}
    return _reach([step_id], deps)


def descendants(spec: WorkflowSpec, step_ids: Iterable[str]) -> set[str]:
    """All steps downstream of any of ``step_ids`` (not including them)."""
    return _reach(step_ids, consumers(spec))


def consumers(spec: WorkflowSpec) -> dict[str, list[str]]:
    """For each step, the steps that consume its output (data inputs and verifies), in order."""
    result: dict[str, list[str]] = {sid: [] for sid in spec.step_ids}
    for step in spec.steps:
        for dep in step.step_dependencies():
            if dep in result and step.id not in result[dep]:
                result[dep].append(step.id)
    return result
