"""The layers hold: no module imports a higher layer, and no two modules import each other.

Layers, lowest first (``DESIGN.md``): the spec model and pure helpers -> binding, gates and the
model clients -> the store -> the executor and attribution -> the runner and review functions ->
the faces (CLI, TUI, the Python API). Every import counts, wherever it is written: at the top,
inside a function (a lazy import for start-up time is fine, one that dodges a cycle is not) or
under ``TYPE_CHECKING`` (for layering; an import only the type checker sees is no runtime cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("orchestrator", "gates", "tui")

LAYERS: list[tuple[str, ...]] = [
    # 0: the floor: errors, JSON, reading user files
    ("orchestrator.core",),
    # 1: the workflow as data and pure functions over it: no I/O, no gates, no store
    ("orchestrator.spec",),
    # 2: binding a spec to code; gates; clients of models and tracing backends
    ("orchestrator.bind", "gates", "orchestrator.llm", "orchestrator.telemetry"),
    # 3: the store
    ("orchestrator.store",),
    # 4: executing and explaining runs
    ("orchestrator.engine", "orchestrator.attribution"),
    # 5: what every face calls
    ("orchestrator.service",),
    # 6: the faces
    ("orchestrator.cli", "tui", "orchestrator.api", "orchestrator", "orchestrator.__main__"),
]

#: Modules that may sit directly in ``orchestrator/``: the package, its entry point and the typed API.
TOP_LEVEL_MODULES = {"orchestrator", "orchestrator.__main__", "orchestrator.api"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best < 0:
        raise AssertionError(f"module {module} has no layer; add it to LAYERS in {__file__}")
    return best


def _nodes(tree: ast.AST, *, runtime_only: bool) -> list[ast.AST]:
    """Every node, or with ``runtime_only`` every node outside ``if TYPE_CHECKING:`` blocks."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if runtime_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def project_imports(path: Path, module: str, *, runtime_only: bool = False) -> set[str]:
    """Every project module ``path`` imports (``import a.b`` and ``from a import b`` both list ``a.b``)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _nodes(tree, runtime_only=runtime_only):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] in PACKAGES:
                found.add(name)
    return found


def all_modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            out[module_name(path)] = path
    return out


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(*, runtime_only: bool = False) -> dict[str, set[str]]:
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {resolve(name, modules) for name in project_imports(path, module, runtime_only=runtime_only)}
        graph[module] = {t for t in targets if t and t != module}
    return graph


def test_every_module_has_a_layer():
    for module in all_modules():
        layer_of(module)


def test_the_package_root_holds_only_the_faces_and_layer_packages():
    """Every other module lives in a package whose name says its layer."""
    flat = {m for m in all_modules() if m.startswith("orchestrator.") and m.count(".") == 1}
    packages = {m for m in flat if (REPO / m.replace(".", "/") / "__init__.py").exists()}
    assert flat - packages - TOP_LEVEL_MODULES == set()


def test_no_module_imports_a_higher_layer():
    upward = []
    for module, targets in import_graph().items():
        for target in targets:
            if target in PACKAGES and module.startswith(target + "."):
                continue  # a package's own __init__ re-exporting is the package itself
            if layer_of(target) > layer_of(module):
                upward.append(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})")
    assert upward == []


#: The one tie allowed both ways: Textual's idiom is an App that pushes its screens, and screens that
#: name their App's type to reach its shared state (``self.app``); both are faces, nothing below sees it.
def allowed_back_edge(module: str, target: str) -> bool:
    return module.startswith("tui.screens.") and target == "tui.app"


def test_there_is_no_import_cycle():
    """Counted over every import, lazy and ``TYPE_CHECKING`` ones included: a type-only import is no
    runtime cycle, but it still ties two modules so that neither can be read, moved or tested alone."""
    graph = import_graph()
    # a package importing its own submodules (to re-export them) is not a cycle of the submodules
    edges = {m: {t for t in ts if not (m in PACKAGES or t in PACKAGES)
                 and not allowed_back_edge(m, t)}
             for m, ts in graph.items()}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("source, expected", [
    ("from orchestrator.service.runner import start_run",
     {"orchestrator.service.runner", "orchestrator.service.runner.start_run"}),
    ("def f():\n    import tui.app\n", {"tui.app"}),
])
def test__project_imports_sees_imports_wherever_they_are(tmp_path, source, expected):
    path = tmp_path / "_probe_for_layering_test.py"  # never inside the package: parallel runs import it
    path.write_text(source)
    assert project_imports(path, "orchestrator._probe_for_layering_test") == expected
