"""The searchable text of a message: what keyword and semantic indexes read (pure, no I/O)."""

from __future__ import annotations

import json

from threadline.model.content import Message, TextBlock, ToolResultBlock, ToolUseBlock

BODY_LIMIT = 20_000
EMBED_LIMIT = 1_000


def message_text(msg: Message) -> str:
    """The searchable text of a message: text blocks, tool calls (name and input) and tool
    results; thinking is left out."""
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text.content)
        elif isinstance(block, ToolUseBlock):
            call = block.tool_use
            parts.append(f"{call.name} {json.dumps(call.input, ensure_ascii=False)[:500]}")
        elif isinstance(block, ToolResultBlock):
            content = block.tool_result.content
            if isinstance(content, str):
                parts.append(content[:1000])
            else:
                parts.extend(b.text.content[:1000] for b in content if isinstance(b, TextBlock))
    return "\n".join(p for p in parts if p)[:BODY_LIMIT]


def embed_text(msg: Message) -> str | None:
    """What the semantic index embeds: the message's own words (text blocks), not tool traffic,
    which keyword search covers; ``None`` when there are none."""
    text = msg.text.strip()
    return text[:EMBED_LIMIT] if text else None
