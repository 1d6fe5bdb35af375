"""Build, check and order the workflow DAG. Pure functions over the spec model."""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from orchestrator.model import WorkflowSpec, parse_reference

Problem = tuple[str, str]
"""(dotted key, message): spec.py attaches file and line."""


def build_graph(spec: WorkflowSpec) -> nx.DiGraph:
    """Edges point from producer to consumer. Unknown references are left out (see check_references)."""
    graph = nx.DiGraph()
    ids = set(spec.step_ids)
    for step in spec.steps:
        graph.add_node(step.id)
    for step in spec.steps:
        for dep in step.step_dependencies():
            if dep in ids:
                graph.add_edge(dep, step.id)
    return graph


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
        for param, ref in step.inputs.items():
            parsed = parse_reference(ref)
            if parsed is None:
                continue
            kind, name, _ = parsed
            if kind == "input" and name not in spec.inputs:
                problems.append((f"steps.{step.id}.inputs.{param}",
                                 f"step {step.id!r} input {param!r} references workflow input {name!r}, "
                                 f"which is not declared. Declared inputs: {sorted(spec.inputs)}"))
            elif kind == "step" and name not in ids:
                problems.append((f"steps.{step.id}.inputs.{param}",
                                 f"step {step.id!r} depends on {name!r}, which is not defined. "
                                 f"Defined steps: {ids}"))
            elif kind == "step" and name == step.id:
                problems.append((f"steps.{step.id}.inputs.{param}", f"step {step.id!r} consumes its own output"))
        for key in ("after", "verifies"):
            for dep in getattr(step, key):
                if dep not in ids:
                    problems.append((f"steps.{step.id}.{key}",
                                     f"step {step.id!r} lists {dep!r} in {key!r}, which is not defined. "
                                     f"Defined steps: {ids}"))
        if step.type == "critic" and not step.verifies:
            problems.append((f"steps.{step.id}.verifies",
                             f"critic step {step.id!r} must name the steps it checks in 'verifies'"))
    if spec.output is not None and spec.output not in ids:
        problems.append(("output", f"output names step {spec.output!r}, which is not defined. Defined steps: {ids}"))
    return problems


def find_cycles(spec: WorkflowSpec) -> list[list[str]]:
    """Each cycle as the list of its steps, in order, starting from the first declared one."""
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


def topological_order(spec: WorkflowSpec) -> list[str]:
    """Steps in dependency order, ties broken by declaration order so output is stable."""
    graph = build_graph(spec)
    order = {sid: i for i, sid in enumerate(spec.step_ids)}
    return list(nx.lexicographical_topological_sort(graph, key=lambda n: order[n]))


def ancestors(spec: WorkflowSpec, step_id: str) -> set[str]:
    return set(nx.ancestors(build_graph(spec), step_id))


def descendants(spec: WorkflowSpec, step_ids: Iterable[str]) -> set[str]:
    """All steps downstream of any of ``step_ids`` (not including them)."""
    graph = build_graph(spec)
    out: set[str] = set()
    for sid in step_ids:
        out |= nx.descendants(graph, sid)
    return out


def consumers(spec: WorkflowSpec) -> dict[str, list[str]]:
    """For each step, the steps that consume its output (data inputs and verifies), in order."""
    result: dict[str, list[str]] = {sid: [] for sid in spec.step_ids}
    for step in spec.steps:
        for dep in step.step_dependencies():
            if dep in result and step.id not in result[dep]:
                result[dep].append(step.id)
    return result
