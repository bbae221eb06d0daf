"""Amazon Bedrock Converse (and Strands Agents) messages: ``load``, ``dump`` and ``validate``.

The payload is ``{"system"?: [{"text"}…], "messages": [{"role", "content": [block…]}]}``, each
block an object with one key: ``text``, ``image`` (``{"format", "source": {"bytes"}}``, bytes as
base64 in JSON), ``toolUse``, ``toolResult`` (``status`` ``success``/``error``) or
``reasoningContent`` (``reasoningText`` with its signature, or ``redactedContent``). Other blocks
(``document``, ``cachePoint``, ``guardContent``…) ride in the message's
``provider_details["bedrock"]["blocks"]`` at their index. See ``docs/formats.md``.
"""

from __future__ import annotations

import json
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

NAME = "bedrock"


# -- load -----------------------------------------------------------------------------------


@guarded("bedrock payload")
def load(data: Any) -> list[Message]:
    """Messages from ``{"system"?, "messages"}`` (a whole Converse request works too) or a bare
    ``messages`` list."""
    if isinstance(data, list):
        data = {"messages": data}
    body = expect_dict(data, "Bedrock payload")
    out: list[Message] = []
    if body.get("system"):
        out.append(_load_system(expect_list(body["system"], "system")))
    for n, raw in enumerate(expect_list(body.get("messages"), "Bedrock messages")):
        where = f"messages[{n}]"
        out.extend(_load_message(expect_dict(raw, where), where))
    return out


def _load_system(raw: list[Any]) -> Message:
    blocks: list[Block] = []
    foreign: list[list[Any]] = []
    for k, b in enumerate(raw):
        b = expect_dict(b, f"system[{k}]")
        if isinstance(b.get("text"), str):
            blocks.append(attach(text(b["text"]), NAME, leftovers(b, ("text",))))
        else:
            foreign.append([k, b])
    return Message(
        role="system",
        content=blocks,
        provider_details=with_details(NAME, {"blocks": foreign} if foreign else {}),
    )


def _load_message(raw: JSON, where: str) -> list[Message]:
    role = raw.get("role")
    if role not in ("user", "assistant"):
        raise UserError(f"{where}: role {role!r} is not a Bedrock role (user, assistant)")
    extra = leftovers(raw, ("role", "content"))
    blocks: list[Block] = []
    foreign: list[list[Any]] = []
    for k, b in enumerate(expect_list(raw.get("content"), f"{where}.content")):
        loaded = load_block(expect_dict(b, f"{where}.content[{k}]"))
        if loaded is None:
            foreign.append([k, b])
        else:
            blocks.append(loaded)
    if foreign:
        extra["blocks"] = foreign
    if role == "user" and not extra:
        return unwrap("user", blocks)
    return [Message(role=role, content=blocks, provider_details=with_details(NAME, extra))]


def load_block(b: JSON) -> Block | None:
    """One Converse content block, or None for a kind threadline keeps verbatim."""
    if isinstance(b.get("text"), str):
        return attach(text(b["text"]), NAME, leftovers(b, ("text",)))
    if isinstance(b.get("image"), dict):
        return _load_image(b)
    if isinstance(b.get("toolUse"), dict):
        tu = b["toolUse"]
        if "toolUseId" not in tu or "name" not in tu:
            return None
        block = ToolUseBlock(
            tool_use=ToolUse(
                id=str(tu["toolUseId"]), name=str(tu["name"]), input=tu.get("input", {})
            )
        )
        return _nested(block, b, "toolUse", leftovers(tu, ("toolUseId", "name", "input")))
    if isinstance(b.get("toolResult"), dict) and "toolUseId" in b["toolResult"]:
        return _load_result(b)
    if isinstance(b.get("reasoningContent"), dict):
        rc = b["reasoningContent"]
        if isinstance(rc.get("reasoningText"), dict):
            rt = rc["reasoningText"]
            th = Thinking(content=str(rt.get("text", "")), signature=rt.get("signature"))
            inner = leftovers(rc, ("reasoningText",))
            rest = leftovers(rt, ("text", "signature"))
            if rest:
                inner["reasoningText"] = rest
            return _nested(ThinkingBlock(thinking=th), b, "reasoningContent", inner)
        if isinstance(rc.get("redactedContent"), str):
            th = Thinking(content="", signature=rc["redactedContent"], redacted=True)
            return _nested(
                ThinkingBlock(thinking=th),
                b,
                "reasoningContent",
                leftovers(rc, ("redactedContent",)),
            )
    return None


def _nested(block: Block, raw: JSON, key: str, inner: JSON) -> Block:
    extra = leftovers(raw, (key,))
    if inner:
        extra[key] = inner
    return attach(block, NAME, extra)


def _load_image(b: JSON) -> ImageBlock | None:
    img = b["image"]
    src = img.get("source")
    if not isinstance(src, dict) or not isinstance(src.get("bytes"), str):
        return None  # s3Location and friends stay verbatim
    fmt = str(img.get("format", ""))
    source = ImageSource(type="base64", media_type=f"image/{fmt}" if fmt else "", data=src["bytes"])
    inner = leftovers(img, ("format", "source"))
    rest = leftovers(src, ("bytes",))
    if rest:
        inner["source"] = rest
    block = ImageBlock(image=Image(source=source))
    _nested(block, b, "image", inner)
    return block


def _load_result(b: JSON) -> ToolResultBlock:
    tr = b["toolResult"]
    consumed = ["toolUseId", "content"]
    is_error = tr.get("status") == "error"
    if is_error:
        consumed.append("status")
    parts = tr.get("content") or []
    loaded = [load_block(p) if isinstance(p, dict) else None for p in parts]
    content: str | list[TextBlock | ImageBlock]
    inner: JSON = {}
    if len(loaded) == 1 and isinstance(loaded[0], TextBlock) and not loaded[0].provider_details:
        content = loaded[0].text.content
    elif all(isinstance(p, (TextBlock, ImageBlock)) for p in loaded) and loaded:
        content = [p for p in loaded if isinstance(p, (TextBlock, ImageBlock))]
    else:  # json or document parts: keep the original, show the rest as text
        content = "\n".join(
            p.text.content
            if isinstance(p, TextBlock)
            else json.dumps(raw.get("json", raw), ensure_ascii=False)
            for p, raw in zip(loaded, parts, strict=True)
        )
        inner["content"] = parts
    inner.update(leftovers(tr, consumed))
    block = ToolResultBlock(
        tool_result=ToolResult(tool_use_id=str(tr["toolUseId"]), content=content, is_error=is_error)
    )
    _nested(block, b, "toolResult", inner)
    return block


# -- dump -----------------------------------------------------------------------------------


@guarded("bedrock dump (a message's provider_details)")
def shape(messages: Sequence[Message]) -> JSON:
    """The ``{"system"?, "messages"}`` payload for a context.

    Leading system messages go to ``system``; later system messages, tool messages and
    summaries become user content; consecutive messages of one role merge into one turn with
    tool results first. URL images (Converse takes bytes or S3 only) become a text line with the
    URL, ``s3://`` URLs an ``s3Location``.
    """
    system, turns = provider_turns(messages, NAME, system_first=True)
    payload: JSON = {}
    if system:
        payload["system"] = [
            p
            for m in system
            for p in place_foreign(
                [dump_block(b) for b in m.content], details(m, NAME).get("blocks")
            )
        ]
    out: list[JSON] = []
    for role, group in turns:
        parts: list[Any] = []
        extra: JSON = {}
        for m in group:
            own = details(m, NAME)
            foreign = own.pop("blocks", None)
            mine = [dump_block(b) for b in m.content if not _empty_text(b)]
            parts.extend(place_foreign(mine, foreign))
            extra = {**own, **extra}
        if role == "user":
            parts = results_first(parts, lambda p: "toolResult" in p)
        out.append({**extra, "role": role, "content": parts})
    payload["messages"] = out
    return payload


def _empty_text(b: Block) -> bool:
    return isinstance(b, TextBlock) and not b.text.content and not details(b, NAME)


def dump_block(b: Block) -> JSON:
    """One threadline block as a Converse content block."""
    extra = details(b, NAME)
    if isinstance(b, TextBlock):
        return {**extra, "text": b.text.content}
    if isinstance(b, ImageBlock):
        return _dump_image(b, extra)
    if isinstance(b, ToolUseBlock):
        u = b.tool_use
        inner = extra.pop("toolUse", {})
        return {**extra, "toolUse": {**inner, "toolUseId": u.id, "name": u.name, "input": u.input}}
    if isinstance(b, ToolResultBlock):
        r = b.tool_result
        inner = extra.pop("toolResult", {})
        if isinstance(r.content, str):
            parts: list[JSON] = [{"text": r.content}]
        else:
            parts = [dump_block(p) for p in r.content]
        tr: JSON = {"toolUseId": r.tool_use_id, "content": parts}
        if r.is_error:
            tr["status"] = "error"
        return {**extra, "toolResult": {**tr, **inner}}
    th = b.thinking
    inner = extra.pop("reasoningContent", {})
    if th.redacted:
        return {**extra, "reasoningContent": {**inner, "redactedContent": th.signature or ""}}
    rt: JSON = {**inner.pop("reasoningText", {}), "text": th.content}
    if th.signature is not None:
        rt["signature"] = th.signature
    return {**extra, "reasoningContent": {**inner, "reasoningText": rt}}


def _dump_image(b: ImageBlock, extra: JSON) -> JSON:
    src = b.image.source
    inner = extra.pop("image", {})
    if src.type == "url":
        if src.data.startswith("s3://"):
            fmt = src.media_type.removeprefix("image/") or "png"
            return {**extra, "image": {"format": fmt, "source": {"s3Location": {"uri": src.data}}}}
        return {"text": f"[image: {src.data}]"}
    source = {**inner.pop("source", {}), "bytes": src.data}
    return {
        **extra,
        "image": {**inner, "format": src.media_type.removeprefix("image/"), "source": source},
    }


# -- validate -------------------------------------------------------------------------------


def validate(payload: Any) -> None:
    """Check a Converse payload; raise ``UserError`` listing every broken rule (roles
    alternating from ``user``, one key per block, no empty content or text, tool results first in
    the user turn right after their calls, every call answered, ids present)."""
    p = Problems(NAME)
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        p.add("payload", 'must be {"system"?, "messages": [...]}')
        p.raise_if_any()
        return
    system = payload.get("system", [])
    if not isinstance(system, list) or not all(isinstance(b, dict) and len(b) == 1 for b in system):
        p.add("system", "must be a list of single-key blocks")
    if not payload["messages"]:
        p.add("messages", "is empty")
    roles: list[tuple[str, str]] = []
    turns: list[tuple[str, str, list[str], list[str]]] = []
    for n, m in enumerate(payload["messages"]):
        where = f"messages[{n}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            p.add(where, "must be an object with role user or assistant")
            continue
        roles.append((where, m["role"]))
        content = m.get("content")
        if not isinstance(content, list) or not content:
            p.add(where, "empty content")
            turns.append((where, m["role"], [], []))
            continue
        turns.append((where, m["role"], *_check_blocks(p, where, m["role"], content)))
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
        if not isinstance(b, dict) or len(b) != 1:
            p.add(bw, "a content block must be an object with exactly one key")
            continue
        kind = next(iter(b))
        value = b[kind]
        if kind == "text" and (not isinstance(value, str) or not value.strip()):
            p.add(bw, "blank text block")
        elif kind == "toolUse":
            if role != "assistant":
                p.add(bw, "toolUse must be in an assistant message")
            if not isinstance(value, dict) or not value.get("toolUseId") or not value.get("name"):
                p.add(bw, "toolUse without toolUseId or name")
            else:
                calls.append(value["toolUseId"])
        elif kind == "toolResult":
            if role != "user":
                p.add(bw, "toolResult must be in a user message")
            if not isinstance(value, dict) or not value.get("toolUseId"):
                p.add(bw, "toolResult without toolUseId")
            else:
                results.append(value["toolUseId"])
                if value.get("status", "success") not in ("success", "error"):
                    p.add(bw, "toolResult status must be success or error")
            if other_seen:
                p.add(bw, "toolResult blocks must come before other content in a user message")
        elif kind == "reasoningContent" and role != "assistant":
            p.add(bw, "reasoningContent must be in an assistant message")
        elif kind == "image" and (not isinstance(value, dict) or not value.get("format")):
            p.add(bw, "image without format")
        if kind != "toolResult":
            other_seen = True
    return calls, results


# -- responses ------------------------------------------------------------------------------


@guarded("bedrock response")
def load_response(body: Any) -> Message:
    """The assistant message of a Converse response body, with ``stop_reason`` and ``usage``
    (Converse does not name the model in the body)."""
    body = expect_dict(body, "Bedrock response")
    output = expect_dict(body.get("output"), "Bedrock response output")
    raw = expect_dict(output.get("message"), "Bedrock response output.message")
    message = _load_message({"role": "assistant", "content": raw.get("content")}, "response")[0]
    u = body.get("usage") or {}
    message.usage = Usage(
        input=int(u.get("inputTokens") or 0),
        output=int(u.get("outputTokens") or 0),
        cache_read=int(u.get("cacheReadInputTokens") or 0),
        cache_write=int(u.get("cacheWriteInputTokens") or 0),
        total=int(u.get("totalTokens") or 0),
    )
    message.stop_reason = body.get("stopReason")
    return message


dump = Sender(NAME, shape, validate)
