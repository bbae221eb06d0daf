"""Token accounting for compaction: reported usage where there is some, an estimate elsewhere.

The estimate is characters / 4 (rounded up) over what a provider would tokenize: text, thinking,
tool names and their JSON input, tool results. An image costs a fixed :data:`IMAGE_TOKENS`
(providers bill a typical image at roughly 1,000-1,600 tokens; its base64 length says nothing).
No tokenizer is downloaded at run time: offline tokenizer packages fetch their vocabulary files
on first use, so threadline does not depend on one. The estimate is deliberately simple and
slightly pessimistic for code; :func:`context_tokens` prefers the provider-reported usage of the
last assistant message and only estimates what came after it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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


def estimate_text(s: str) -> int:
    """Tokens in a string: characters / 4, rounded up."""
    return -(-len(s) // CHARS_PER_TOKEN)


def estimate_message(message: Message) -> int:
    """Estimated tokens of one message (content plus a small per-message overhead)."""
    chars = 0
    images = 0
    for b in message.content:
        if isinstance(b, TextBlock):
            chars += len(b.text.content)
        elif isinstance(b, ThinkingBlock):
            chars += len(b.thinking.content)
        elif isinstance(b, ToolUseBlock):
            chars += len(b.tool_use.name) + len(_json(b.tool_use.input))
        elif isinstance(b, ToolResultBlock):
            content = b.tool_result.content
            if isinstance(content, str):
                chars += len(content)
            else:
                for part in content:
                    if isinstance(part, TextBlock):
                        chars += len(part.text.content)
                    else:
                        images += 1
        elif isinstance(b, ImageBlock):
            images += 1
    return MESSAGE_OVERHEAD + -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


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
            return ContextTokens(tokens=used + rest, usage_tokens=used, estimated_tokens=rest,
                                 usage_index=i)
    est = sum(estimate_message(m) for m in messages)
    return ContextTokens(tokens=est, usage_tokens=0, estimated_tokens=est, usage_index=-1)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)
