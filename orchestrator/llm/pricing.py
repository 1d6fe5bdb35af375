"""What a model call cost, in USD.

Prices are USD per 1 million tokens, as the vendors list them for standard (non-batch,
uncached) usage. They change: extend or correct the table without a release with a JSON file
named by ``$ORCHESTRATOR_LLM_PRICES``::

    {"my-finetune": {"input": 0.3, "output": 1.2}, "gpt-4o": {"input": 2.0, "output": 8.0}}

or pass ``prices=`` to :func:`cost`. Models run locally cost 0. An unknown model gives
``None`` rather than a made-up number: "unknown" and "free" are different answers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from orchestrator.spec.llm_errors import LLMError

PRICES_ENV = "ORCHESTRATOR_LLM_PRICES"

#: model -> {"input": USD per 1M input tokens, "output": USD per 1M output tokens}
PRICES: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "o1": {"input": 15.00, "output": 60.00},
    "o3": {"input": 2.00, "output": 8.00},
    "o3-mini": {"input": 1.10, "output": 4.40},
    "o4-mini": {"input": 1.10, "output": 4.40},
    "claude-3-5-sonnet": {"input": 3.00, "output": 15.00},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00},
    "claude-3-7-sonnet": {"input": 3.00, "output": 15.00},
    "claude-3-opus": {"input": 15.00, "output": 75.00},
    # Local models (llama.cpp, Ollama, vLLM on your own machine): no per-token price.
    "llama3.1:8b": {"input": 0.0, "output": 0.0},
    "llama3.2:3b": {"input": 0.0, "output": 0.0},
    "qwen2.5:7b": {"input": 0.0, "output": 0.0},
    "smollm2": {"input": 0.0, "output": 0.0},
    "SmolLM2-135M-Instruct.Q4_1.gguf": {"input": 0.0, "output": 0.0},
}


def _load_file(path: str) -> dict[str, dict[str, float]]:
    from orchestrator.core.files import MAX_JSON_BYTES, UnreadableFileError, read_capped
    from orchestrator.core.jsonio import loads_document

    try:
        data = loads_document(read_capped(Path(path), MAX_JSON_BYTES).decode("utf-8"))
    except OSError as exc:
        raise LLMError(f"${PRICES_ENV}={path}: cannot read the price file: {exc.strerror}") from None
    except (UnreadableFileError, ValueError) as exc:  # not a file, not UTF-8, not JSON
        raise LLMError(f"${PRICES_ENV}={path}: cannot read the price file: {exc}") from None
    if not isinstance(data, dict):
        raise LLMError(f"${PRICES_ENV}={path}: expected {{\"model\": {{\"input\": X, \"output\": Y}}}}, "
                       f"not a JSON {type(data).__name__}")
    table: dict[str, dict[str, float]] = {}
    for model, entry in data.items():
        try:
            prices = {"input": float(entry["input"]), "output": float(entry["output"])}
        except (TypeError, KeyError, ValueError):
            prices = {}
        if set(prices) != {"input", "output"} or not all(0 <= p < float("inf") for p in prices.values()):
            raise LLMError(f"${PRICES_ENV}={path}: model {model!r} needs \"input\" and \"output\" prices that are "
                           "numbers of 0 or more (USD per 1M tokens)")
        table[str(model)] = prices
    return table


def price_table(prices: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, dict[str, float]]:
    """Built-in prices, overridden by the ``$ORCHESTRATOR_LLM_PRICES`` file, then by ``prices``.

    The file is read on every call (it is tiny) so a changed file takes effect without a restart.
    """
    table = {model: dict(entry) for model, entry in PRICES.items()}
    path = os.environ.get(PRICES_ENV)
    if path:
        table.update(_load_file(path))
    for model, entry in (prices or {}).items():
        table[model] = {"input": float(entry["input"]), "output": float(entry["output"])}
    return table


def _lookup(table: Mapping[str, dict[str, float]], model: str) -> dict[str, float] | None:
    """Exact name, else without a ``vendor/`` prefix, else the longest known prefix, so that a
    dated snapshot such as ``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``."""
    lowered = {k.lower(): v for k, v in table.items()}
    for name in (model, model.lower(), model.rsplit("/", 1)[-1].lower()):
        if name in table:
            return table[name]
        if name in lowered:
            return lowered[name]
    name = model.rsplit("/", 1)[-1].lower()
    candidates = [k for k in lowered if name.startswith(k) and name[len(k):len(k) + 1] in ("-", "@", ":", ".")]
    return lowered[max(candidates, key=len)] if candidates else None


def cost(model: str, input_tokens: int, output_tokens: int,
         prices: Mapping[str, Mapping[str, float]] | None = None) -> float | None:
    """USD for the tokens, or ``None`` when the model's price is unknown."""
    entry = _lookup(price_table(prices), model)
    if entry is None:
        return None
    return (input_tokens * entry["input"] + output_tokens * entry["output"]) / 1_000_000
