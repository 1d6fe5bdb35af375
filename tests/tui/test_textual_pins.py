"""Pins on Textual internals the TUI relies on, so a Textual upgrade that moves them fails here, loudly."""

from __future__ import annotations

import inspect

from rich.style import Style
from textual.widgets import DataTable

from tui.widgets.traced_step_list import TracedStepList

HOOK = "_get_row_style"


def test_datatable_still_has_the_private_row_style_hook() -> None:
    """``TracedStepList`` overrides ``DataTable._get_row_style(row_index, base_style) -> Style``.

    Textual has no public per-row style hook (checked against Textual 8.2.x: rows take only
    the zebra and fixed-row component classes), so the blamed step's row style is added by
    overriding this private method. If Textual renames it or changes its signature, the
    override silently stops being called and the blamed row loses its highlight without any
    error; this test fails instead. Then move the highlight to whatever Textual offers (a public
    hook, or styled cell renderables) and delete this test.
    """
    hook = getattr(DataTable, HOOK, None)
    assert hook is not None, f"textual.widgets.DataTable no longer has {HOOK}; see this test's docstring"
    signature = inspect.signature(hook)
    params = list(signature.parameters)
    assert params == ["self", "row_index", "base_style"], (
        f"DataTable.{HOOK}'s signature changed to {params}; see this test's docstring")
    assert signature.return_annotation in (Style, "Style"), (
        f"DataTable.{HOOK} now returns {signature.return_annotation!r}; see this test's docstring")
    assert f"self.{HOOK}(" in inspect.getsource(DataTable), (
        f"DataTable's renderer no longer calls {HOOK}; see this test's docstring")
    # TracedStepList still overrides it, with the same parameters
    override = getattr(TracedStepList, HOOK)
    assert override is not hook
    assert list(inspect.signature(override).parameters) == params
