"""Step functions of the hello example, shared by ``hello.yaml`` and ``hello.py``.

Both files register these same functions, so the YAML and the Python definition load into
the same :class:`~orchestrator.spec.model.WorkflowSpec` (``run: hello_steps:greet`` and so on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.spec.context import StepContext


def greet(name: str) -> dict[str, Any]:
    """Look up (here: build) a greeting for ``name``."""
    return {"text": f"Hello, {name.strip() or 'world'}", "name": name}


def shout(greeting: str, ctx: StepContext | None = None) -> str:
    """Shout the greeting. Declares ``ctx`` to show it is optional: the attempt number is in it."""
    suffix = "!" if ctx is None or ctx.attempt == 1 else "!!"
    return greeting.upper() + suffix


def measure(text: str) -> dict[str, Any]:
    """Check the shout: how many words, and is it all capitals."""
    letters = [c for c in text if c.isalpha()]
    return {"words": len(text.split()), "letters": len(letters), "loud": all(c.isupper() for c in letters)}


def sign_off(text: str, stats: dict[str, Any]) -> dict[str, Any]:
    """The final message."""
    return {"message": f"{text} ({stats['words']} words, {stats['letters']} letters)", "loud": stats["loud"]}
