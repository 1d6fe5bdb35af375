"""Errors of the LLM layer.

Both are :class:`~orchestrator.core.errors.OrchestratorError`, so the CLI prints them as one line
with an exit code instead of a traceback. :class:`LLMStepError` carries the call's record
because a step whose output never validated must still be stored with what was sent, what
came back and why it was refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.core.errors import OrchestratorError

if TYPE_CHECKING:
    from orchestrator.spec.llm_records import LLMRecord


class LLMError(OrchestratorError):
    """The model could not be called: bad configuration, missing key, unreachable endpoint,
    unknown model, a missing optional dependency, or a template that does not render."""


class LLMStepError(LLMError):
    """The model answered, but its output never passed validation (after all re-asks)."""

    def __init__(self, message: str, record: LLMRecord):
        super().__init__(message)
        self.record = record
