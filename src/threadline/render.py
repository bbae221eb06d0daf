"""Plain-text renderings of messages and blocks, shared by the CLI, the REPL and the web viewer."""

from __future__ import annotations

import json
import re
from typing import Any

from threadline.model.content import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

# terminal escape sequences (colours, cursor moves, titles) that tool output carries: CSI, OSC,
# and the two-byte forms
ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")


def strip_ansi(s: str) -> str:
    """``s`` without terminal escape sequences (they would show as boxes in a page or a
    preview)."""
    return ANSI_RE.sub("", s) if "\x1b" in s else s


def one_line(s: str, width: int = 80) -> str:
    """``s`` with terminal escapes removed and runs of white space folded, cut to ``width``
    characters with an ellipsis."""
    s = " ".join(strip_ansi(s).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def block_text(block: Any, *, with_ids: bool = True) -> str:
    """A readable rendering of one content block; ``with_ids`` adds tool call ids."""
    if isinstance(block, TextBlock):
        return block.text.content
    if isinstance(block, ToolUseBlock):
        args = json.dumps(block.tool_use.input, ensure_ascii=False)
        if with_ids:
            return f"→ {block.tool_use.name}({one_line(args, 200)}) [{block.tool_use.id}]"
        return f"→ {block.tool_use.name}({args})"
    if isinstance(block, ToolResultBlock):
        r = block.tool_result
        body = (
            r.content
            if isinstance(r.content, str)
            else " ".join(
                b.text.content if isinstance(b, TextBlock) else "[image]" for b in r.content
            )
        )
        if with_ids:
            return f"← result{' error' if r.is_error else ''} [{r.tool_use_id}]: {body}"
        return f"← {'error ' if r.is_error else ''}result: {body}"
    if isinstance(block, ThinkingBlock):
        return (
            "(thinking, redacted)"
            if block.thinking.redacted
            else f"(thinking) {block.thinking.content}"
        )
    if isinstance(block, ImageBlock):
        src = block.image.source
        return f"[image {src.media_type or src.type}]"
    return str(block)


def message_text(msg: Message, *, with_ids: bool = True) -> str:
    """Every block of a message, one per line."""
    return "\n".join(block_text(b, with_ids=with_ids) for b in msg.content)
