"""LangChain messages (``langchain_core.messages``) <-> threadline :class:`Message`.

Shared by the LangChain and LangGraph integrations (one conversion, not one per adapter):

    from threadline.formats import langchain as lc
    messages = lc.load(chat_history)        # list[BaseMessage] (or their dicts) -> list[Message]
    lc_messages = lc.dump(messages)         # list[Message] -> list[BaseMessage]

The mapping: ``human`` -> ``user``, ``ai`` -> ``assistant`` (``tool_calls`` become ``tool_use``
blocks), ``tool`` -> ``tool`` (one ``tool_result`` block; ``status="error"`` -> ``is_error``),
``system`` -> ``system``; any other type (``function``, ``chat``, ``remove``) -> ``custom``. String
content becomes one text block; list content keeps one block per item (``text`` items as text
blocks, ``thinking`` items and LangChain's standard ``reasoning`` blocks as thinking blocks,
anything else as a placeholder text block that carries the raw item). Every field threadline has
no place for (``id``, ``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``artifact``, …) rides along in ``provider_details["langchain"]``, so ``dump(load(x)) == x`` for
JSON-shaped messages. :func:`round_trips` says whether a given message survives exactly (callers
that must not lose anything, such as the LangGraph checkpointer, store the others whole).

A message another framework wrote (no ``provider_details["langchain"]``) dumps as the nearest
LangChain message: reasoning as ``reasoning`` blocks and images as ``image_url`` blocks beside the
text, and a tool input that is not an object as ``{"input": value}``.

Needs ``langchain-core``: ``pip install 'threadline[langgraph]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from threadline.errors import UserError
from threadline.formats._common import image_data_url
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    text,
    thinking,
    tool_result,
    tool_use,
)

NAME = "langchain"
_ROLE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_TYPE = {v: k for k, v in _ROLE.items()}
# fields every message has, with the value that means "absent"
_DEFAULTS: dict[str, Any] = {
    "additional_kwargs": {},
    "response_metadata": {},
    "name": None,
    "id": None,
    "invalid_tool_calls": [],
    "usage_metadata": None,
    "artifact": None,
    "status": "success",
}


def _lc() -> Any:
    try:
        import langchain_core.messages as messages
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "LangChain messages need langchain-core: pip install 'threadline[langgraph]'"
        ) from None
    return messages


def to_message(message: Any) -> Message:
    """One LangChain message (a ``BaseMessage`` or its ``model_dump()`` dict) as a Message."""
    raw: dict[str, Any] = message if isinstance(message, dict) else message.model_dump()
    kind = raw.get("type")
    if not isinstance(kind, str):
        raise UserError(f"Not a LangChain message: {str(raw)[:60]!r}; it needs a 'type' field")
    role = _ROLE.get(kind, "custom")
    extra: dict[str, Any] = {}
    if role == "custom" or kind not in _ROLE:
        extra["type"] = kind
    for key, value in raw.items():
        if key in ("type", "content", "tool_calls", "tool_call_id"):
            continue
        if key in _DEFAULTS and value == _DEFAULTS[key]:
            continue
        extra[key] = value
    content = raw.get("content", "")
    blocks: list[Block]
    if role == "tool":
        status_error = raw.get("status") == "error"
        if isinstance(content, str):
            blocks = [tool_result(str(raw.get("tool_call_id") or ""), content, status_error)]
        else:
            blocks = [tool_result(str(raw.get("tool_call_id") or ""), "", status_error)]
            extra["content"] = content
    elif isinstance(content, str):
        blocks = [text(content)] if content else []
    else:
        extra["content_list"] = True
        blocks = [_block(item) for item in content]
    for call in raw.get("tool_calls") or ():
        blocks.append(tool_use(str(call.get("id") or ""), call["name"], call.get("args", {})))
        leftover = {
            k: v
            for k, v in call.items()
            if k not in ("id", "name", "args") and not (k == "type" and v == "tool_call")
        }
        if call.get("id") is None:
            leftover["no_id"] = True
        if leftover:
            blocks[-1].provider_details = {NAME: leftover}
    usage = raw.get("usage_metadata")
    return Message(
        role=role,
        content=blocks,
        model=_model_name(raw.get("response_metadata")),
        usage=_usage(usage) if isinstance(usage, dict) else None,
        provider_details={NAME: extra} if extra else None,
    )


def _block(item: Any) -> Block:
    if isinstance(item, str):
        return text(item, **{NAME: {"str": True}})
    if isinstance(item, dict):
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            rest = {k: v for k, v in item.items() if k not in ("type", "text")}
            return text(item["text"], **({NAME: rest} if rest else {}))
        if kind in ("thinking", "reasoning") and isinstance(item.get(kind), str):
            # Anthropic's thinking item, or LangChain's standard reasoning block
            rest = {k: v for k, v in item.items() if k not in ("type", kind)}
            if kind == "reasoning":
                rest["type"] = kind
            block = thinking(item[kind])
            if rest:
                block.provider_details = {NAME: rest}
            return block
    # anything else is kept whole; its text is a placeholder for readers
    kind = item.get("type", "item") if isinstance(item, dict) else type(item).__name__
    return text(f"[{kind} block]", **{NAME: {"block": item}})


def _model_name(meta: Any) -> str | None:
    if isinstance(meta, dict):
        name = meta.get("model_name") or meta.get("model")
        return name if isinstance(name, str) else None
    return None


def _usage(u: dict[str, Any]) -> Usage:
    def num(key: str) -> int:
        v = u.get(key)
        return v if isinstance(v, int) else 0

    details = u.get("input_token_details")
    cache_read = details.get("cache_read", 0) if isinstance(details, dict) else 0
    return Usage(
        input=num("input_tokens"),
        output=num("output_tokens"),
        total=num("total_tokens"),
        cache_read=cache_read if isinstance(cache_read, int) else 0,
    )


def from_message(message: Message) -> Any:
    """A Message as the LangChain message it came from (or the nearest one)."""
    lc = _lc()
    extra = dict((message.provider_details or {}).get(NAME) or {})
    kind = extra.pop("type", None) or _TYPE.get(message.role, "human")
    fields: dict[str, Any] = {}
    content: Any
    tool_calls: list[dict[str, Any]] = []
    if kind == "tool":
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        res = results[0].tool_result if results else None
        fields["tool_call_id"] = res.tool_use_id if res else ""
        if "content" in extra:
            content = extra.pop("content")
        elif res is None:
            content = message.text
        elif isinstance(res.content, str):
            content = res.content
        else:
            content = "\n".join(b.text.content for b in res.content if isinstance(b, TextBlock))
        if res is not None and res.is_error and "status" not in extra:
            fields["status"] = "error"
    else:
        listed = bool(extra.pop("content_list", False))
        items: list[Any] = []
        for b in message.content:
            if isinstance(b, ToolUseBlock):
                tool_calls.append(_tool_call(b))
            elif not isinstance(b, ToolResultBlock):
                items.append(_item(b))
        if listed:
            content = items
        elif any(_foreign_item(b) for b in message.content if not isinstance(b, TextBlock)):
            # another framework's reasoning or images (LangChain's own have content_list): a
            # list of LangChain content blocks, beside the text
            content = [item for b in message.content if (item := _foreign_item(b))]
        else:
            content = "".join(i if isinstance(i, str) else i.get("text", "") for i in items)
    fields.update(extra)
    if tool_calls and kind in ("ai", "AIMessageChunk"):
        fields["tool_calls"] = tool_calls
    cls = _CLASSES.get(kind) or "HumanMessage"
    return getattr(lc, cls)(content=content, **fields)


_CLASSES = {
    "human": "HumanMessage",
    "ai": "AIMessage",
    "system": "SystemMessage",
    "tool": "ToolMessage",
    "function": "FunctionMessage",
    "chat": "ChatMessage",
    "remove": "RemoveMessage",
    "AIMessageChunk": "AIMessageChunk",
    "HumanMessageChunk": "HumanMessageChunk",
    "SystemMessageChunk": "SystemMessageChunk",
    "ToolMessageChunk": "ToolMessageChunk",
}


def _tool_call(b: ToolUseBlock) -> dict[str, Any]:
    extra = dict((b.provider_details or {}).get(NAME) or {})
    no_id = extra.pop("no_id", False)
    args = b.tool_use.input  # LangChain's args are an object; another provider's may not be
    call = {
        "name": b.tool_use.name,
        "args": args if isinstance(args, dict) else {"input": args},
        "id": None if no_id else b.tool_use.id,
        "type": "tool_call",
    }
    call.update(extra)
    return call


def _item(b: Block) -> Any:
    extra = dict((b.provider_details or {}).get(NAME) or {})
    if "block" in extra:
        return extra["block"]
    if isinstance(b, TextBlock):
        if extra.pop("str", False):
            return b.text.content
        return {"type": "text", "text": b.text.content, **extra}
    if isinstance(b, ThinkingBlock):
        kind = extra.pop("type", "thinking")
        return {"type": kind, kind: b.thinking.content, **extra}
    return {"type": b.__class__.__name__}


def _foreign_item(b: Block) -> dict[str, Any] | None:
    """Another framework's text, readable reasoning or image as a LangChain content block (the
    standard ``reasoning`` block; images as the ``image_url`` every chat model takes)."""
    if isinstance(b, ThinkingBlock) and not b.thinking.redacted:
        return {"type": "reasoning", "reasoning": b.thinking.content}
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text.content}
    if isinstance(b, ImageBlock):
        return {"type": "image_url", "image_url": {"url": image_data_url(b)}}
    return None


def stored_id(message: Message) -> Any:
    """The LangChain message id a Message from :func:`to_message` holds (None: none)."""
    extra = (message.provider_details or {}).get(NAME)
    return extra.get("id") if isinstance(extra, dict) else None


def round_trips(message: Any, converted: Message | None = None) -> bool:
    """Whether ``message`` comes back equal from :func:`from_message` (``converted``: its
    :func:`to_message`, when the caller has it already)."""
    try:
        back = from_message(converted if converted is not None else to_message(message))
    except Exception:
        return False
    return bool(back == message and type(back) is type(message))


def load(data: Iterable[Any]) -> list[Message]:
    """LangChain messages (objects or ``model_dump()`` dicts) as threadline Messages."""
    return [to_message(m) for m in data]


def dump(messages: Sequence[Message]) -> list[Any]:
    """threadline Messages as LangChain ``BaseMessage`` objects."""
    return [from_message(m) for m in messages]
