"""The public API: every name in `orchestrator.__all__` resolves, and nothing else is promised."""

from __future__ import annotations

import orchestrator


def test_every_exported_name_resolves():
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None, name


def test_exports_are_what_users_need_to_define_run_and_review():
    assert {"Workflow", "GateResult", "StepContext", "load_workflow", "Store", "start_run", "continue_run",
            "approve", "edit", "retry", "reject"} <= set(orchestrator.__all__)


def test_unknown_names_raise_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        orchestrator.nope  # noqa: B018


def test_gates_package_exports_the_built_ins():
    import gates

    assert {"GateResult", "build_gate", "GateConfigError"} <= set(gates.__all__)
    from gates.base import BUILTIN_GATES

    assert {"schema", "required_fields", "not_empty", "range", "regex", "min_items", "evidence",
            "similarity"} <= set(BUILTIN_GATES)


def test_type_checkers_see_every_exported_name_where_it_loads_from():
    """The TYPE_CHECKING imports of orchestrator/__init__.py name the same modules as the lazy loader."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(orchestrator.__file__).read_text())
    typed = {alias.name: node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module and node.module.startswith("orchestrator") for alias in node.names}
    assert typed == {name: orchestrator.EXPORTED_FROM[name] for name in orchestrator.__all__}
