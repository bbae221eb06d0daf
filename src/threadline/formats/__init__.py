"""Outside formats: one module per format, the same names in each.

Provider formats (what an LLM API takes for the conversation part of a request) expose
``load(data) -> list[Message]``, ``dump(messages) -> payload`` and ``validate(payload)``:

    openai_chat       Chat Completions ``messages`` list
    openai_responses  Responses API ``input`` items
    anthropic         Messages API ``{"system"?, "messages"}``
    gemini            generateContent ``{"system_instruction"?, "contents"}``
    bedrock           Converse ``{"system"?, "messages"}``

Transcript importers (``pi``, ``claude_code``, ``chatgpt_export``, ``codex``, ``google_adk``,
``chat_history``) live beside them and are listed by :func:`names` when installed.

    from threadline import formats
    payload = formats.dump_context("anthropic", session.context().messages)
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from threadline.errors import NotFoundError
from threadline.formats.policy import Adjustment, Dangling, Dumped
from threadline.importing import FORMATS as IMPORTERS
from threadline.model.content import Message

PROVIDER_FORMATS: tuple[str, ...] = (
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "bedrock",
)
#: the importers (``threadline.importing.FORMATS`` is the one list of them)
IMPORTER_FORMATS: tuple[str, ...] = tuple(IMPORTERS)


def names() -> list[str]:
    """Every format available: the provider formats, then the importers present."""
    found = [n for n in IMPORTER_FORMATS if importlib.util.find_spec(f"{__name__}.{n}")]
    return [*PROVIDER_FORMATS, *found]


def get(name: str) -> ModuleType:
    """The module of format ``name`` (``load``/``dump`` and, for providers, ``validate``)."""
    if name not in PROVIDER_FORMATS and name not in IMPORTER_FORMATS:
        raise NotFoundError(f"Unknown format {name!r}; choose one of {', '.join(names())}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise NotFoundError(
            f"Format {name!r} is not available in this install; choose one of {', '.join(names())}"
        ) from None


def dump_context(
    name: str,
    messages: Sequence[Message],
    *,
    strict: bool = False,
    report: bool = False,
    dangling: Dangling = "answer",
) -> Any:
    """``messages`` in provider format ``name``, adjusted by the send policy
    (:mod:`threadline.formats.policy`) and checked by that provider's validator.

    ``report=True`` returns a :class:`~threadline.formats.policy.Dumped` (payload and the
    adjustments made). ``strict=True`` refuses a history the policy would adjust: the
    :class:`~threadline.errors.UserError` lists every adjustment it would need (for example a
    tool call no result answers).
    """
    if name not in PROVIDER_FORMATS:
        raise NotFoundError(
            f"{name!r} is not a provider format; choose one of {', '.join(PROVIDER_FORMATS)}"
        )
    module = get(name)
    dumped: Dumped[Any] = module.dump(messages, strict=strict, report=True, dangling=dangling)
    module.validate(dumped.payload)
    return dumped if report else dumped.payload


# what an importer's source speaks natively (pi and Claude Code sessions name their model)
_SOURCE_FORMATS = {
    "claude_code": "anthropic",
    "codex": "openai_responses",
    "chatgpt_export": "openai_chat",
    "google_adk": "gemini",
}


def own_format(
    messages: Sequence[Message],
    *,
    provider: str | None = None,
    model_id: str | None = None,
    source: str | None = None,
) -> str:
    """The provider format a history most likely came from, to show it first: the provider of
    the model in use (``provider``/``model_id``, e.g. from ``Context.model``), else the format
    it was imported from (``source``: an importer's name), else the model or leftovers of its
    last assistant message, else ``openai_chat``."""
    found = _by_model(provider or "", model_id or "", source)
    if found is None and source is not None:
        found = _SOURCE_FORMATS.get(source) or (source if source in PROVIDER_FORMATS else None)
    for m in reversed(messages):
        if found is not None:
            break
        if m.role != "assistant":
            continue
        found = _by_model("", m.model or "", source)
        mine = [k for k in (m.provider_details or {}) if k in PROVIDER_FORMATS]
        found = found or (mine[0] if mine else None)
    return found or "openai_chat"


def _by_model(provider: str, model_id: str, source: str | None) -> str | None:
    p, mid = provider.lower(), model_id.lower()
    if "bedrock" in p:
        return "bedrock"
    if "anthropic" in p or "claude" in mid:
        return "anthropic"
    if any(k in p for k in ("google", "gemini", "vertex")) or "gemini" in mid:
        return "gemini"
    if "responses" in p or "codex" in p or "codex" in mid or source == "codex":
        return "openai_responses" if p or mid else None
    if "openai" in p or "azure" in p or mid.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return "openai_chat"
    return None


def validate(name: str, payload: Any) -> None:
    """Check ``payload`` against provider ``name``'s rules (``UserError`` lists every one)."""
    if name not in PROVIDER_FORMATS:
        raise NotFoundError(
            f"{name!r} is not a provider format; choose one of {', '.join(PROVIDER_FORMATS)}"
        )
    get(name).validate(payload)


def __getattr__(name: str) -> ModuleType:
    # ``tl.formats.anthropic`` works without importing the submodule first
    if name in PROVIDER_FORMATS or name in IMPORTER_FORMATS:
        try:
            return get(name)
        except NotFoundError:
            pass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "IMPORTER_FORMATS",
    "PROVIDER_FORMATS",
    "Adjustment",
    "Dumped",
    "dump_context",
    "get",
    "names",
    "own_format",
    "validate",
]
