"""Anthropic Messages API: ``load``, ``dump`` and ``validate``.

The payload is ``{"system"?: str | [text blocks], "messages": [...]}``, the conversation part of a
``/v1/messages`` request (``system`` is omitted when there is no system text). Thinking keeps its
signature; ``redacted_thinking`` loads as a redacted thinking block whose ``signature`` holds the
opaque ``data``. Blocks threadline has no type for (``server_tool_use``,
``web_search_tool_result``, ``compaction``, ``document``…) ride in the message's
``provider_details["anthropic"]["blocks"]`` at their index. See ``docs/formats.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from threadline.errors import UserError
from threadline.formats._common import (
    JSON,
    Problems,
    attach,
    check_adjacent_pairing,
    check_alternation,
    details,
    expect_dict,
    expect_list,
    guarded,
    leftovers,
    place_foreign,
    provider_turns,
    results_first,
    unwrap,
    with_details,
)
from threadline.formats.policy import Sender
from threadline.model.content import (
    Block,
    Image,
    ImageBlock,
    ImageSource,
    Message,
    TextBlock,
    Thinking,
    ThinkingBlock,
    ToolResult,
    ToolResultBlock,
    ToolUse,
    ToolUseBlock,
    Usage,
    text,
)

NAME = "anthropic"
_THINK = re.compile(r"\A<think>\n(.*)\n</think>\Z", re.DOTALL)


# -- load -----------------------------------------------------------------------------------


@guarded("anthropic payload")
def load(data: Any) -> list[Message]:
    """Messages from ``{"system"?, "messages"}`` (a whole request body works too) or a bare
    ``messages`` list."""
    if isinstance(data, list):
        data = {"messages": data}
    body = expect_dict(data, "Anthropic payload")
    out: list[Message] = []
    if "system" in body and body["system"] is not None:
        out.append(_load_system(body["system"]))
    for n, raw in enumerate(expect_list(body.get("messages"), "Anthropic messages")):
        where = f"messages[{n}]"
        out.extend(_load_message(expect_dict(raw, where), where))
    return out


def _load_system(raw: Any) -> Message:
    if isinstance(raw, str):
        return Message(role="system", content=[text(raw)])
    blocks: list[Block] = []
    for k, b in enumerate(expect_list(raw, "system")):
        b = expect_dict(b, f"system[{k}]")
        if b.get("type") != "text" or not isinstance(b.get("text"), str):
            raise UserError(f"system[{k}]: system blocks must be text blocks")
        blocks.append(attach(text(b["text"]), NAME, leftovers(b, ("type", "text"))))
    hint = {"system_blocks": True} if len(blocks) == 1 and not blocks[0].provider_details else {}
    return Message(role="system", content=blocks, provider_details=with_details(NAME, hint))


def _load_message(raw: JSON, where: str) -> list[Message]:
    role = raw.get("role")
    if role not in ("user", "assistant"):
        raise UserError(f"{where}: role {role!r} is not an Anthropic role (user, assistant)")
    extra = leftovers(raw, ("role", "content"))
    content = raw.get("content")
    if isinstance(content, str):
        blocks: list[Block] = [text(content)]
        extra["content_string"] = True
    else:
        blocks = []
        foreign: list[list[Any]] = []
        for k, b in enumerate(expect_list(content, f"{where}.content")):
            loaded = load_block(expect_dict(b, f"{where}.content[{k}]"), f"{where}.content[{k}]")
            if loaded is None:
                foreign.append([k, b])
            else:
                blocks.append(loaded)
        if foreign:
            extra["blocks"] = foreign
    if role == "user" and not extra:
        return unwrap("user", blocks)
    return [Message(role=role, content=blocks, provider_details=with_details(NAME, extra))]


def load_block(b: JSON, where: str) -> Block | None:
    """One Anthropic content block, or None for a type threadline keeps verbatim."""
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        extra = leftovers(b, ("type", "text"))
        if not extra and (m := _THINK.match(b["text"])):
            return ThinkingBlock(thinking=Thinking(content=m.group(1)))
        return attach(text(b["text"]), NAME, extra)
    if kind == "image" and isinstance(b.get("source"), dict):
        src = b["source"]
        if src.get("type") == "base64":
            source = ImageSource(
                type="base64",
                media_type=str(src.get("media_type", "")),
                data=str(src.get("data", "")),
            )
            rest = leftovers(src, ("type", "media_type", "data"))
        elif src.get("type") == "url":
            source = ImageSource(type="url", data=str(src.get("url", "")))
            rest = leftovers(src, ("type", "url"))
        else:
            return None
        extra = leftovers(b, ("type", "source"))
        if rest:
            extra["source"] = rest
        return attach(ImageBlock(image=Image(source=source)), NAME, extra)
    if kind == "tool_use" and "id" in b and "name" in b:
        block = ToolUseBlock(
            tool_use=ToolUse(id=str(b["id"]), name=str(b["name"]), input=b.get("input", {}))
        )
        return attach(block, NAME, leftovers(b, ("type", "id", "name", "input")))
    if kind == "tool_result" and "tool_use_id" in b:
        return _load_result(b, where)
    if kind == "thinking" and isinstance(b.get("thinking"), str):
        th = Thinking(content=b["thinking"], signature=b.get("signature"))
        return attach(
            ThinkingBlock(thinking=th), NAME, leftovers(b, ("type", "thinking", "signature"))
        )
    if kind == "redacted_thinking" and isinstance(b.get("data"), str):
        th = Thinking(content="", signature=b["data"], redacted=True)
        return attach(ThinkingBlock(thinking=th), NAME, leftovers(b, ("type", "data")))
    return None


def _load_result(b: JSON, where: str) -> ToolResultBlock:
    consumed = ["type", "tool_use_id"]
    if b.get("is_error") is True:
        consumed.append("is_error")
    raw = b.get("content", "")
    content: str | list[TextBlock | ImageBlock] = ""
    extra_raw: Any = None
    if isinstance(raw, str) and raw:
        content = raw
        consumed.append("content")
    elif isinstance(raw, list) and raw:
        parts = [load_block(expect_dict(p, f"{where}.content"), where) for p in raw]
        if all(isinstance(p, (TextBlock, ImageBlock)) for p in parts):
            content = [p for p in parts if isinstance(p, (TextBlock, ImageBlock))]
            consumed.append("content")
        else:  # documents or search results: keep the original, show the text parts
            content = [p for p in parts if isinstance(p, TextBlock)]
            extra_raw = raw
    block = ToolResultBlock(
        tool_result=ToolResult(
            tool_use_id=str(b["tool_use_id"]), content=content, is_error=b.get("is_error") is True
        )
    )
    extra = leftovers(b, consumed)
    if extra_raw is not None:
        extra["content"] = extra_raw
    return attach(block, NAME, extra)  # type: ignore[return-value]


# -- dump -----------------------------------------------------------------------------------


@guarded("anthropic dump (a message's provider_details)")
def shape(messages: Sequence[Message]) -> JSON:
    """The ``{"system"?, "messages"}`` payload for a context.

    Leading system messages go to ``system``; a system message later in the conversation, tool
    messages, summaries and other roles become user content; consecutive messages of one role
    merge into one turn with tool results first. Empty text blocks are left out (the API rejects
    them).
    """
    system, turns = provider_turns(messages, NAME, system_first=True)
    payload: JSON = {}
    if system:
        payload["system"] = _dump_system(system)
    out: list[JSON] = []
    for role, group in turns:
        if len(group) == 1:
            out.append(_dump_message(role, group[0]))
            continue
        parts: list[Any] = []
        extra: JSON = {}
        for m in group:
            dumped = _dump_message(role, m)
            c = dumped.pop("content")
            parts.extend([{"type": "text", "text": c}] if isinstance(c, str) else c)
            extra = {**dumped, **extra}
        if role == "user":
            parts = results_first(parts, lambda p: p.get("type") == "tool_result")
        out.append({**extra, "role": role, "content": parts})
    payload["messages"] = out
    return payload


def _dump_system(system: list[Message]) -> Any:
    blocks = [b for m in system for b in m.content]
    hint = details(system[0], NAME).get("system_blocks")
    if (
        len(blocks) == 1
        and isinstance(blocks[0], TextBlock)
        and not hint
        and not details(blocks[0], NAME)
    ):
        return blocks[0].text.content
    return [dump_block(b) for b in blocks]


def _dump_message(role: str, m: Message) -> JSON:
    extra = details(m, NAME)
    as_string = extra.pop("content_string", False)
    foreign = extra.pop("blocks", None)
    if as_string and len(m.content) == 1 and isinstance(m.content[0], TextBlock) and not foreign:
        return {**extra, "role": role, "content": m.content[0].text.content}
    parts = [dump_block(b) for b in m.content if not _empty_text(b)]
    if role == "user":
        parts = results_first(parts, lambda p: p.get("type") == "tool_result")
    return {**extra, "role": role, "content": place_foreign(parts, foreign)}


def _empty_text(b: Block) -> bool:
    return isinstance(b, TextBlock) and not b.text.content and not details(b, NAME)


def dump_block(b: Block) -> JSON:
    """One threadline block as an Anthropic content block."""
    extra = details(b, NAME)
    if isinstance(b, TextBlock):
        return {**extra, "type": "text", "text": b.text.content}
    if isinstance(b, ImageBlock):
        src = b.image.source
        rest = extra.pop("source", {})
        if src.type == "url":
            source: JSON = {**rest, "type": "url", "url": src.data}
        else:
            source = {**rest, "type": "base64", "media_type": src.media_type, "data": src.data}
        return {**extra, "type": "image", "source": source}
    if isinstance(b, ToolUseBlock):
        u = b.tool_use
        return {**extra, "type": "tool_use", "id": u.id, "name": u.name, "input": u.input}
    if isinstance(b, ToolResultBlock):
        r = b.tool_result
        out: JSON = {"type": "tool_result", "tool_use_id": r.tool_use_id}
        if isinstance(r.content, list):
            out["content"] = [dump_block(p) for p in r.content]
        elif r.content:
            out["content"] = r.content
        if r.is_error:
            out["is_error"] = True
        return {**out, **extra}  # a kept original content wins over the text-only view
    th = b.thinking
    if th.signature is None and not th.redacted:  # the API takes only signed thinking
        return {**extra, "type": "text", "text": f"<think>\n{th.content}\n</think>"}
    if th.redacted:
        return {**extra, "type": "redacted_thinking", "data": th.signature or ""}
    out = {**extra, "type": "thinking", "thinking": th.content}
    if th.signature is not None:
        out["signature"] = th.signature
    return out


# -- validate -------------------------------------------------------------------------------

_USER_ONLY = {"tool_result", "image", "document"}
_ASSISTANT_ONLY = {"tool_use", "thinking", "redacted_thinking", "server_tool_use"}


def validate(payload: Any) -> None:
    """Check an Anthropic payload; raise ``UserError`` listing every broken rule (system as a
    string or text blocks, roles alternating from ``user``, no empty content or text, tool
    results first in the user turn right after their calls, every call answered, ids present)."""
    p = Problems(NAME)
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        p.add("payload", 'must be {"system"?, "messages": [...]}')
        p.raise_if_any()
        return
    system = payload.get("system")
    if "system" in payload:
        if isinstance(system, list):
            for k, b in enumerate(system):
                if not isinstance(b, dict) or b.get("type") != "text" or not b.get("text"):
                    p.add(f"system[{k}]", "system blocks must be non-empty text blocks")
        elif not isinstance(system, str) or not system:
            p.add("system", "must be a non-empty string or a list of text blocks")
    messages = payload["messages"]
    if not messages:
        p.add("messages", "is empty")
    roles: list[tuple[str, str]] = []
    turns: list[tuple[str, str, list[str], list[str]]] = []
    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            p.add(where, "must be an object with role user or assistant")
            continue
        role = m["role"]
        roles.append((where, role))
        content = m.get("content")
        if isinstance(content, str):
            if not content:
                p.add(where, "empty content")
            turns.append((where, role, [], []))
            continue
        if not isinstance(content, list) or not content:
            p.add(where, "empty content")
            turns.append((where, role, [], []))
            continue
        calls, results = _check_blocks(p, where, role, content)
        turns.append((where, role, calls, results))
    check_alternation(p, roles, "user")
    check_adjacent_pairing(p, turns)
    p.raise_if_any()


def _check_blocks(
    p: Problems, where: str, role: str, content: list[Any]
) -> tuple[list[str], list[str]]:
    calls: list[str] = []
    results: list[str] = []
    other_seen = False
    for k, b in enumerate(content):
        bw = f"{where}.content[{k}]"
        kind = b.get("type") if isinstance(b, dict) else None
        if kind is None:
            p.add(bw, "block without type")
            continue
        if role == "assistant" and kind in _USER_ONLY:
            p.add(bw, f"a {kind} block cannot be in an assistant message")
        if role == "user" and kind in _ASSISTANT_ONLY:
            p.add(bw, f"a {kind} block cannot be in a user message")
        if kind == "text" and not b.get("text"):
            p.add(bw, "empty text block")
        elif kind == "tool_use":
            if not b.get("id") or not b.get("name"):
                p.add(bw, "tool_use without id or name")
            elif not isinstance(b.get("input"), dict):
                p.add(bw, "tool_use input must be an object")
            else:
                calls.append(b["id"])
        elif kind == "tool_result":
            if not b.get("tool_use_id"):
                p.add(bw, "tool_result without tool_use_id")
            else:
                results.append(b["tool_use_id"])
            if other_seen:
                p.add(bw, "tool_result blocks must come before other content in a user message")
        elif kind == "image":
            src = b.get("source")
            if not isinstance(src, dict) or not (
                src.get("data") or src.get("url") or src.get("file_id")
            ):
                p.add(bw, "image without source data or url")
        elif kind == "thinking" and "signature" not in b:
            p.add(bw, "thinking block without signature (the API rejects unsigned thinking)")
        if kind != "tool_result":
            other_seen = True
    return calls, results


# -- responses ------------------------------------------------------------------------------


@guarded("anthropic response")
def load_response(body: Any) -> Message:
    """The assistant message of a (non-streaming) Messages API response body, with ``model``,
    ``stop_reason`` and ``usage``."""
    body = expect_dict(body, "Anthropic response")
    content = expect_list(body.get("content"), "Anthropic response content")
    message = _load_message({"role": "assistant", "content": content}, "response")[0]
    raw = body.get("usage") or {}
    usage = Usage(
        input=int(raw.get("input_tokens") or 0),
        output=int(raw.get("output_tokens") or 0),
        cache_read=int(raw.get("cache_read_input_tokens") or 0),
        cache_write=int(raw.get("cache_creation_input_tokens") or 0),
    )
    usage.total = usage.input + usage.output + usage.cache_read + usage.cache_write
    message.model = body.get("model")
    message.stop_reason = body.get("stop_reason")
    message.usage = usage
    return message


dump = Sender(NAME, shape, validate)
