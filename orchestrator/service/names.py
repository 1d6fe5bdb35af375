"""Names a person gives a command (who decides, which step, which workflow) are one line of printable text.

A reviewer's name holding a newline would be stored and then printed on two lines by ``show``, a step
selector or a workflow filter holding one would split the message that names it: each is refused first,
with InputError (exit 2) naming the option, before anything is read or stored.
"""

from __future__ import annotations

from orchestrator.core.errors import InputError
from orchestrator.spec.model import one_line_name


def check_names(**names: str | None) -> None:
    """InputError for the first given name (keyword: what it is) that is empty or holds a control character."""
    for what, value in names.items():
        if value is None:
            continue
        try:
            one_line_name(value, what.replace("_", " "))
        except ValueError as exc:
            raise InputError(str(exc)) from None
