"""Turning a rendered prompt into the messages sent to the model.

The orchestrator knows things the prompt author may not have written down: what the steps
consuming this step's output need from it, and, on a retry, which quality gates the previous
answer failed. Both are added as documented Markdown sections so a reviewer can see exactly
what the model was told::

    ## What the next steps need
    - step 'publish' (writer): needs: a title under 60 characters; produces: the blog post

    ## Your previous answer failed these checks
    - length: 412 words, at most 300 allowed

A section is appended to the end of the user prompt unless the template placed it itself
with ``{{ next_needs }}`` / ``{{ gate_feedback }}`` (or ``inject_needs`` is false for the
needs). The character ranges of the added text are returned so a UI can highlight them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

NEEDS_HEADING = "## What the next steps need"
FEEDBACK_HEADING = "## Your previous answer failed these checks"
PREVIOUS_HEADING = "Your previous answer was:"


class NeedItem(BaseModel):
    """A step that consumes this step's output: who it is and what it needs from it."""

    step_id: str
    agent: str | None = None
    needs: str | None = None
    """What the consumer says it needs from its inputs."""
    description: str | None = None
    """What the consumer itself produces."""


class GateFeedback(BaseModel):
    """A gate the previous answer failed, and why."""

    gate: str
    reason: str


NeedLike = NeedItem | Mapping[str, Any] | Sequence[Any]
FeedbackLike = GateFeedback | Mapping[str, Any] | Sequence[Any]


class RenderedPrompt(BaseModel):
    """The messages to send, and which parts of the user message the orchestrator added."""

    messages: list[dict[str, Any]]
    injected_spans: list[tuple[int, int]] = Field(default_factory=list)
    """``[start, end)`` offsets into :attr:`user_prompt` (the user message's content)."""
    user_prompt: str


def _need(item: NeedLike) -> NeedItem:
    if isinstance(item, NeedItem):
        return item
    if isinstance(item, Mapping):
        return NeedItem.model_validate(item)
    return NeedItem(**dict(zip(("step_id", "agent", "needs", "description"), item, strict=False)))


def _feedback(item: FeedbackLike) -> GateFeedback:
    if isinstance(item, GateFeedback):
        return item
    if isinstance(item, Mapping):
        return GateFeedback.model_validate(item)
    gate, reason = item
    return GateFeedback(gate=str(gate), reason=str(reason))


def needs_section(needs: Sequence[NeedLike]) -> str:
    """The "What the next steps need" section; empty when nothing consumes the output."""
    lines = []
    for item in map(_need, needs):
        who = f"- step '{item.step_id}'" + (f" ({item.agent})" if item.agent else "")
        parts = [f"needs: {item.needs}" if item.needs else "",
                 f"produces: {item.description}" if item.description else ""]
        detail = "; ".join(p for p in parts if p)
        lines.append(f"{who}: {detail}" if detail else who)
    return f"{NEEDS_HEADING}\n" + "\n".join(lines) if lines else ""


def feedback_section(gate_feedback: Sequence[FeedbackLike], previous: str | None = None) -> str:
    """The "Your previous answer failed these checks" section (a reviewer's comment is one of them),
    quoting the previous answer when given; empty on a first attempt."""
    lines = [f"- {f.gate}: {f.reason}" for f in map(_feedback, gate_feedback)]
    if not lines:
        return ""
    quoted = f"\n\n{PREVIOUS_HEADING}\n{previous}" if previous is not None else ""
    return f"{FEEDBACK_HEADING}\n" + "\n".join(lines) + quoted


def build_messages(system: str | None, rendered_prompt: str, *, needs: Sequence[NeedLike] = (),
                   inject_needs: bool = True, gate_feedback: Sequence[FeedbackLike] = (), needs_placed: bool = False,
                   feedback_placed: bool = False, previous: str | None = None) -> RenderedPrompt:
    """System and user messages, with the needs / gate-feedback sections appended where the
    template did not place them (``*_placed`` say it did; their spans are then located in the
    rendered text)."""
    user = rendered_prompt
    spans: list[tuple[int, int]] = []
    for section, placed, wanted in ((needs_section(needs), needs_placed, inject_needs),
                                    (feedback_section(gate_feedback, previous), feedback_placed, True)):
        if not section:
            continue
        if placed:
            start = user.find(section)
            if start >= 0:
                spans.append((start, start + len(section)))
        elif wanted:
            user = user.rstrip("\n")
            separator = "\n\n" if user else ""
            start = len(user) + len(separator)
            user = f"{user}{separator}{section}\n"
            spans.append((start, start + len(section)))
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    return RenderedPrompt(messages=messages, injected_spans=sorted(spans), user_prompt=user)


def render_prompt(prompt: str, variables: Mapping[str, Any], *, system: str | None = None,
                  needs: Sequence[NeedLike] = (), inject_needs: bool = True,
                  gate_feedback: Sequence[FeedbackLike] = (), previous: str | None = None) -> RenderedPrompt:
    """Render the prompt (and system) templates and build the messages.

    ``next_needs`` and ``gate_feedback`` are available to the template as the section texts;
    a template that uses one gets it where it put it and not a second time at the end.
    """
    from orchestrator.spec.templates import render, used_names

    names = used_names(prompt) | (used_names(system) if system else set())
    # ``previous`` among the variables is a loop's previous iteration (or an input of that name): the template
    # shows that, so the feedback on a retry still quotes the answer it is about
    given = "previous" in variables
    quoted = None if "previous" in names and not given else previous  # a template that shows it is not sent it twice
    env = {**variables, "next_needs": needs_section(needs), "gate_feedback": feedback_section(gate_feedback, quoted)}
    if not given:
        env["previous"] = "" if previous is None else previous
    rendered_system = render(system, env) if system else None
    return build_messages(rendered_system, render(prompt, env), needs=needs, inject_needs=inject_needs,
                          gate_feedback=gate_feedback, needs_placed="next_needs" in names,
                          feedback_placed="gate_feedback" in names, previous=quoted)
