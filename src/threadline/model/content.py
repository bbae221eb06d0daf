"""Content blocks and messages, as msgspec Structs shaped exactly like the file format.

A block is ``{"type": "<kind>", "<kind>": {...payload...}, "provider_details"?: {...}}``.
Helpers (:func:`text`, :func:`tool_use`, ...) build blocks without spelling the nesting out, and
:func:`coerce_content` accepts blocks, plain strings or dicts in the file format's shape.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from threadline.errors import UserError

Details: TypeAlias = dict[str, Any]


class _Payload(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    pass


class Text(_Payload):
    content: str


class ImageSource(_Payload):
    type: str  # "base64" | "url"
    media_type: str = ""
    data: str = ""


class Image(_Payload):
    source: ImageSource


class ToolUse(_Payload):
    id: str
    name: str
    input: Any = msgspec.field(default_factory=dict)


class Thinking(_Payload):
    content: str = ""
    signature: str | None = None
    redacted: bool = False


class _Block(msgspec.Struct, tag_field="type", omit_defaults=True, kw_only=True, gc=False):
    provider_details: Details | None = None


class TextBlock(_Block, tag="text"):
    text: Text


class ImageBlock(_Block, tag="image"):
    image: Image


class ToolUseBlock(_Block, tag="tool_use"):
    tool_use: ToolUse


class ToolResult(_Payload):
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock] = ""
    is_error: bool = False


class ToolResultBlock(_Block, tag="tool_result"):
    tool_result: ToolResult


class ThinkingBlock(_Block, tag="thinking"):
    thinking: Thinking


Block: TypeAlias = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock

Role: TypeAlias = Literal[
    "system",
    "user",
    "assistant",
    "tool",
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
]
ROLES: frozenset[str] = frozenset(
    {
        "system",
        "user",
        "assistant",
        "tool",
        "bashExecution",
        "custom",
        "branchSummary",
        "compactionSummary",
    }
)


def unknown_role(role: object) -> UserError:
    """The error for a message role not in :data:`ROLES`."""
    return UserError(f"Unknown role {role!r}; use one of: {', '.join(sorted(ROLES))}")


class Usage(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0


class Message(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    """One message as the model sees it."""

    role: str
    content: list[Block]
    model: str | None = None
    usage: Usage | None = None
    stop_reason: str | None = None
    provider_details: Details | None = None

    @property
    def text(self) -> str:
        """The concatenated text blocks (tool results and thinking excluded)."""
        return "\n".join(b.text.content for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [b.tool_use for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [b.tool_result for b in self.content if isinstance(b, ToolResultBlock)]

    @property
    def is_user_input(self) -> bool:
        """A user message typed by a person: role user and no tool_result block."""
        return self.role == "user" and not any(isinstance(b, ToolResultBlock) for b in self.content)


CONTENT_TYPES = (
    "input_text",
    "output_text",
    "reasoning",
    "function_call",
    "function_call_output",
    "message",
)


def content_type(msg: Message) -> str:
    """What a message holds, in the wrapped chat history's terms (not its role): a tool result
    is ``function_call_output``, a tool call ``function_call``, a user's input ``input_text``,
    an assistant's text ``output_text``, an assistant's thinking alone ``reasoning``, anything
    else ``message``. A message imported from a chat history keeps the type it was wrapped
    with."""
    kept = (msg.provider_details or {}).get("chat_history")
    if isinstance(kept, dict) and kept.get("type") in CONTENT_TYPES:
        return str(kept["type"])
    if any(isinstance(b, ToolResultBlock) for b in msg.content):
        return "function_call_output"
    if any(isinstance(b, ToolUseBlock) for b in msg.content):
        return "function_call"
    if msg.role == "user":
        return "input_text"
    if msg.role == "assistant":
        if msg.content and all(isinstance(b, ThinkingBlock) for b in msg.content):
            return "reasoning"
        return "output_text"
    return "message"


# -- constructors ---------------------------------------------------------------------------


def text(content: str, **details: Any) -> TextBlock:
    return TextBlock(text=Text(content=content), provider_details=details or None)


def image(data: str, media_type: str = "image/png", source_type: str = "base64") -> ImageBlock:
    return ImageBlock(
        image=Image(source=ImageSource(type=source_type, media_type=media_type, data=data))
    )


def image_url(url: str, media_type: str = "") -> ImageBlock:
    return ImageBlock(image=Image(source=ImageSource(type="url", media_type=media_type, data=url)))


def tool_use(id: str, name: str, input: Any = None) -> ToolUseBlock:
    return ToolUseBlock(tool_use=ToolUse(id=id, name=name, input={} if input is None else input))


def tool_result(
    tool_use_id: str, content: str | list[TextBlock | ImageBlock] = "", is_error: bool = False
) -> ToolResultBlock:
    return ToolResultBlock(
        tool_result=ToolResult(tool_use_id=tool_use_id, content=content, is_error=is_error)
    )


def thinking(content: str, signature: str | None = None, redacted: bool = False) -> ThinkingBlock:
    return ThinkingBlock(thinking=Thinking(content=content, signature=signature, redacted=redacted))


def _provider_block(value: dict[str, Any]) -> Block | None:
    """A block from a provider-shaped dict (DESIGN §10), or None when ``value`` is not one.

    Accepted: OpenAI ``{"type": "text"|"input_text"|"output_text", "text": "…"}`` and
    ``{"type": "image_url", "image_url": {"url": …}}``; Anthropic ``text`` / ``image`` (with a
    ``source``) / ``tool_use`` / ``tool_result`` / ``thinking`` blocks; Gemini parts ``{"text"}``
    and ``{"inline_data"|"inlineData": {"mime_type"|"mimeType", "data"}}``. File-shaped blocks
    (``{"type": "text", "text": {"content": …}}``) are not matched here.
    """
    kind = value.get("type")
    body = value.get(kind) if isinstance(kind, str) else None
    if isinstance(body, dict) and kind != "image_url":
        return None  # the file format's own shape
    if kind in ("text", "input_text", "output_text") and isinstance(value.get("text"), str):
        return text(value["text"])
    if kind is None and isinstance(value.get("text"), str) and len(value) == 1:
        return text(value["text"])
    if kind == "image_url" and isinstance(body, dict) and isinstance(body.get("url"), str):
        url: str = body["url"]
        if url.startswith("data:") and ";base64," in url:
            media, _, data = url[5:].partition(";base64,")
            return image(data, media)
        return image_url(url)
    if kind == "image" and isinstance(value.get("source"), dict):
        src = value["source"]
        if src.get("type") == "url":
            return image_url(str(src.get("url", "")), str(src.get("media_type", "")))
        return image(str(src.get("data", "")), str(src.get("media_type", "image/png")))
    inline = value.get("inline_data", value.get("inlineData"))
    if kind is None and isinstance(inline, dict):
        mime = inline.get("mime_type", inline.get("mimeType", "image/png"))
        return image(str(inline.get("data", "")), str(mime))
    if kind == "tool_use" and isinstance(value.get("id"), str) and "name" in value:
        return tool_use(value["id"], str(value["name"]), value.get("input"))
    if kind == "tool_result" and isinstance(value.get("tool_use_id"), str):
        raw = value.get("content", "")
        parts: str | list[TextBlock | ImageBlock] = str(raw)
        if isinstance(raw, list):
            blocks = [coerce_block(b) for b in raw]
            parts = [b for b in blocks if isinstance(b, (TextBlock, ImageBlock))]
            if len(parts) != len(blocks):
                raise UserError("A tool_result's content may hold only text and image blocks")
        return tool_result(value["tool_use_id"], parts, bool(value.get("is_error", False)))
    if kind == "thinking" and isinstance(value.get("thinking"), str):
        return thinking(value["thinking"], value.get("signature"))
    return None


_block_decoder = msgspec.convert  # converts file-shaped dicts to Structs


def coerce_block(value: Any) -> Block:
    """A block from a Block, a plain string or a dict in the file format's shape."""
    if isinstance(value, (TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock)):
        return value
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        shaped = _provider_block(value)
        if shaped is not None:
            return shaped
        try:
            block: Block = msgspec.convert(value, Block)
            return block
        except msgspec.ValidationError as exc:
            raise UserError(
                f"Content block {_short(value)} is not in the file format's shape ({exc}); "
                'use {"type":"text","text":{"content":"…"}} or threadline.model.content.text()'
            ) from None
    raise UserError(
        f"Content of type {type(value).__name__} is not supported; pass a string, a block or a dict"
    )


def coerce_content(value: Any) -> list[Block]:
    """Content as a list of blocks: accepts a string, one block, or a list of either."""
    if isinstance(value, (str, dict, _Block)):
        return [coerce_block(value)]
    if isinstance(value, (list, tuple)):
        return [coerce_block(v) for v in value]
    raise UserError(
        f"Content of type {type(value).__name__} is not supported; "
        "pass a string or a list of blocks"
    )


def content_hash(content: list[Block] | Message) -> str:
    """SHA-256 of the canonical JSON (sorted keys, compact) of a message's content, 16 hex chars."""
    import hashlib  # ~3.5 MB of OpenSSL mapped: loaded on first use, not at import

    blocks = content.content if isinstance(content, Message) else content
    return hashlib.sha256(msgspec.json.encode(blocks, order="sorted")).hexdigest()[:16]


def _short(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."
