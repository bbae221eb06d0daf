"""LLM clients for chat and summaries: one contract, several implementations.

    from threadline.providers import get_provider
    p = get_provider("gpt-4o-mini")                   # OpenAI-compatible, $OPENAI_API_KEY
    p = get_provider("claude-sonnet-4-5")             # Anthropic, $ANTHROPIC_API_KEY
    p = get_provider("qwen", base_url="http://127.0.0.1:8080/v1")   # a local server
    p = get_provider("test")                          # threadline.testing.TestProvider
    reply = p.complete(messages, system="Be brief.")
    for event in p.stream(messages): ...

Every failure is a :class:`~threadline.errors.ProviderError` with a one-line message.
"""

from __future__ import annotations

from threadline.errors import ProviderError
from threadline.providers.anthropic import AnthropicProvider
from threadline.providers.base import Provider, StreamEvent, ToolSpec
from threadline.providers.openai import OpenAICompatProvider

PROVIDERS = ("openai", "anthropic", "test")


def provider_kind(model: str, provider: str | None = None) -> str:
    """Which implementation serves ``model``: ``provider`` when given, else ``"test"`` for the
    test double, ``"anthropic"`` for a ``claude*`` model and ``"openai"`` for anything else."""
    if provider:
        return provider
    if model == "test":
        return "test"
    return "anthropic" if model.lower().startswith("claude") else "openai"


def get_provider(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    provider: str | None = None,
) -> Provider:
    """The client for ``model``.

    ``provider`` picks the implementation (``"openai"`` for any OpenAI-compatible server,
    ``"anthropic"``, ``"test"``); without it, ``"test"`` is the deterministic test double, a
    ``claude*`` model goes to Anthropic and anything else to the OpenAI-compatible client.
    """
    kind = provider_kind(model, provider)
    if kind == "test":
        from threadline.testing import TestProvider

        return TestProvider(model=model)
    if kind == "anthropic":
        return AnthropicProvider(model, base_url=base_url, api_key=api_key)
    if kind in ("openai", "openai_chat", "openai-compatible"):
        return OpenAICompatProvider(model, base_url=base_url, api_key=api_key)
    from threadline.errors import UserError

    raise UserError(f"Unknown provider {provider!r}; use one of: {', '.join(PROVIDERS)}")


__all__ = [
    "AnthropicProvider",
    "OpenAICompatProvider",
    "Provider",
    "ProviderError",
    "StreamEvent",
    "ToolSpec",
    "get_provider",
]
