"""One provider instance per endpoint, created on first use.

Sharing the instance is what makes ``max_concurrency`` a per-endpoint cap (its limiter lives
there) and lets the local model be loaded once. Creating lazily keeps SDK imports and key
checks away from runs that never call a model.
"""

from __future__ import annotations

import threading

from orchestrator.llm.providers.base import ChatProvider
from orchestrator.spec.llm_config import LLMConfig

_lock = threading.Lock()
_providers: dict[tuple[str, str | None, str], ChatProvider] = {}


def provider_key(config: LLMConfig) -> tuple[str, str | None, str]:
    """``(provider, base_url, api_key_env)``: the key variable is part of it so two keys never share a client."""
    if config.provider == "local":
        return ("local", None, "")
    return (config.provider, config.resolved_base_url(), config.api_key_env)


def get_provider(config: LLMConfig) -> ChatProvider:
    """The shared provider for ``config``'s endpoint. The first config seen for an endpoint sets
    its ``max_concurrency``."""
    key = provider_key(config)
    with _lock:
        provider = _providers.get(key)
        if provider is None:
            provider = _create(config)
            _providers[key] = provider
        return provider


def _create(config: LLMConfig) -> ChatProvider:
    if config.provider == "local":
        from orchestrator.llm.providers.local import LocalProvider

        return LocalProvider()
    from orchestrator.llm.providers.openai_provider import OpenAIProvider

    base_url = config.resolved_base_url()
    assert base_url is not None
    return OpenAIProvider(base_url=base_url, api_key_env=config.api_key_env, max_concurrency=config.max_concurrency)


def reset_providers() -> None:
    """Forget every provider (tests; or after changing environment variables)."""
    with _lock:
        _providers.clear()
