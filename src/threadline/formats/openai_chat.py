"""OpenAI Chat Completions messages: ``load``, ``dump`` and ``validate``.

The payload is the ``messages`` list of a ``/v1/chat/completions`` request. ``developer``
messages load as ``system`` (the role is kept in ``provider_details`` and restored); ``tool``
messages load as ``tool`` messages holding one ``tool_result`` block; assistant reasoning sent
as ``<think>\\n…\\n</think>`` text loads as thinking blocks. See ``docs/formats.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadline.errors import UserError
from threadline.formats._common import (
    JSON,
    WRAPPED_ROLES,
    Problems,
    arguments,
    attach,
    details,
    dump_arguments,
    expect_dict,
    expect_list,
    guarded,
    image_data_url,
    image_from_url,
    join_think,
    leftovers,
    place_foreign,
    split_think,
    unwrap,
    with_details,
    wrap,
)
from threadline.formats.policy import Sender
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUse,
    ToolUseBlock,
    Usage,
    text,
    thinking,
    tool_result,
)

NAME = "openai_chat"
_ROLES = ("system", "developer", "user", "assistant", "tool")


# -- load -----------------------------------------------------------------------------------


@guarded("openai_chat payload")
def load(data: Any) -> list[Message]:
    """Messages from a Chat Completions ``messages`` list (or a request body holding one)."""
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    out: list[Message] = []
    for n, raw in enumerate(expect_list(data, "Chat Completions messages")):
        out.extend(_load_message(expect_dict(raw, f"messages[{n}]"), f"messages[{n}]"))
    return out


def _load_message(raw: JSON, where: str) -> list[Message]:
    role = raw.get("role")
    if role not in _ROLES:
        raise UserError(
            f"{where}: role {role!r} is not a Chat Completions role ({', '.join(_ROLES)})"
        )
    extra = leftovers(raw, ("role", "content", "tool_calls", "tool_call_id"))
    if role == "tool":
        if "tool_call_id" not in raw:
            raise UserError(f"{where}: a tool message needs tool_call_id")
        content = raw.get("content", "")
        result: str | list[TextBlock | ImageBlock]
        if isinstance(content, list):
            result = [
                b for b in _load_parts(content, where, {}, think=False) if isinstance(b, TextBlock)
            ]
        else:
            result = content if isinstance(content, str) else json.dumps(content)
        if "content" in raw and raw["content"] is None:
            extra["content"] = None
        block = tool_result(str(raw["tool_call_id"]), result)
        return [Message(role="tool", content=[block], provider_details=with_details(NAME, extra))]

    msg_extra: JSON = {}
    blocks = _load_content(raw, role, where, msg_extra)
    if role == "assistant":
        for k, call in enumerate(expect_list(raw.get("tool_calls") or [], f"{where}.tool_calls")):
            blocks.append(
                _load_call(
                    expect_dict(call, f"{where}.tool_calls[{k}]"), f"{where}.tool_calls[{k}]"
                )
            )
        if raw.get("tool_calls") == []:
            extra["tool_calls"] = []
    if role == "developer":
        msg_extra["role"] = "developer"
    msg_extra.update(extra)
    if role == "user" and not msg_extra:
        return unwrap("user", blocks)
    return [
        Message(
            role="system" if role == "developer" else role,
            content=blocks,
            provider_details=with_details(NAME, msg_extra),
        )
    ]


def _load_content(raw: JSON, role: str, where: str, msg_extra: JSON) -> list[Block]:
    if "content" not in raw or raw["content"] is None:
        if "content" in raw:
            msg_extra["content"] = None
        return []
    content = raw["content"]
    if isinstance(content, str):
        return split_think(content) if role == "assistant" else [text(content)]
    parts = expect_list(content, f"{where}.content")
    blocks = _load_parts(parts, where, msg_extra, think=role == "assistant")
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock) and "parts" not in msg_extra:
        msg_extra["content_parts"] = True
    return blocks


def _load_parts(parts: list[Any], where: str, msg_extra: JSON, *, think: bool) -> list[Block]:
    blocks: list[Block] = []
    foreign: list[list[Any]] = []
    for k, part in enumerate(parts):
        part = expect_dict(part, f"{where}.content[{k}]")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            found = split_think(part["text"]) if think else [text(part["text"])]
            if len(found) == 1:
                attach(found[0], NAME, leftovers(part, ("type", "text")))
            else:  # a part holding only <think>…</think> (extra fields stay with the text)
                found = [b for b in found if not (isinstance(b, TextBlock) and not b.text.content)]
            blocks.extend(found)
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            img = image_from_url(str(part["image_url"].get("url", "")))
            extra = leftovers(part, ("type", "image_url"))
            nested = leftovers(part["image_url"], ("url",))
            if nested:
                extra["image_url"] = nested
            blocks.append(attach(img, NAME, extra))
        else:
            foreign.append([k, part])
    if foreign:
        msg_extra["parts"] = foreign
    return blocks


def _load_call(call: JSON, where: str) -> ToolUseBlock:
    fn = expect_dict(call.get("function"), f"{where}.function")
    if "id" not in call or "name" not in fn:
        raise UserError(f"{where}: a tool call needs id and function.name")
    raw_args = fn.get("arguments", "")
    value = arguments(raw_args, where)
    extra = leftovers(
        call, ("id", "function", "type") if call.get("type") == "function" else ("id", "function")
    )
    fn_extra = leftovers(fn, ("name", "arguments"))
    if fn_extra:
        extra["function"] = fn_extra
    if not isinstance(raw_args, str) or dump_arguments(value) != raw_args:
        extra["arguments"] = raw_args
    block = ToolUseBlock(tool_use=ToolUse(id=str(call["id"]), name=str(fn["name"]), input=value))
    attach(block, NAME, extra)
    return block


# -- dump -----------------------------------------------------------------------------------


@guarded("openai_chat dump (a message's provider_details)")
def shape(messages: Sequence[Message]) -> list[JSON]:
    """The Chat Completions ``messages`` list for a context.

    Tool results become ``tool`` messages right after the call; images inside a tool result
    (which ``tool`` messages cannot hold) follow in a user message. Wrapped roles become user
    text (``docs/formats.md``).
    """
    out: list[JSON] = []
    pending_images: list[Block] = []
    for m in messages:
        if not m.content and not details(m, NAME):
            continue  # nothing Chat Completions can be sent (e.g. a Responses built-in item)
        if m.role not in ("tool", "user") or not m.tool_results:
            _flush_images(out, pending_images)
        if m.role in ("system", "assistant", "user") and not (m.role == "user" and m.tool_results):
            out.append(_dump_message(m))
        elif m.role in ("tool", "user"):
            rest: list[Block] = []
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    out.append(_dump_result(m, b, pending_images))
                else:
                    rest.append(b)
            if rest:
                _flush_images(out, pending_images)
                out.append(_dump_message(Message(role="user", content=rest)))
        elif m.role in WRAPPED_ROLES:
            out.append(_dump_message(Message(role="user", content=wrap(m, WRAPPED_ROLES[m.role]))))
        else:
            raise UserError(f"Message role {m.role!r} has no Chat Completions mapping")
    _flush_images(out, pending_images)
    return out


def _flush_images(out: list[JSON], images: list[Block]) -> None:
    if images:
        out.append({"role": "user", "content": [_dump_part(b) for b in images]})
        images.clear()


def _dump_result(m: Message, b: ToolResultBlock, images: list[Block]) -> JSON:
    res = b.tool_result
    extra = details(m, NAME) if m.role == "tool" else {}
    msg: JSON = {**extra, "role": "tool", "tool_call_id": res.tool_use_id}
    if isinstance(res.content, str):
        content: Any = res.content
    else:
        texts = [_dump_part(p) for p in res.content if isinstance(p, TextBlock)]
        found = [p for p in res.content if isinstance(p, ImageBlock)]
        if found:
            images.append(text(f"Image(s) returned by tool call {res.tool_use_id}:"))
            images.extend(found)
        content = texts or ("(image result below)" if found else "")
    if res.is_error:  # Chat Completions has no error flag: say it in the text
        content = content if isinstance(content, list) else f"Error: {content}"
    if extra.get("content", "") is None and content == "":
        content = None
    msg["content"] = content
    return msg


def _dump_message(m: Message) -> JSON:
    extra = details(m, NAME)
    role = m.role
    if role == "system" and extra.pop("role", None) == "developer":
        role = "developer"
    parts_hint = bool(extra.pop("content_parts", False))
    foreign = extra.pop("parts", None)
    msg: JSON = {**extra, "role": role}
    body = [b for b in m.content if not isinstance(b, ToolUseBlock)]
    calls = [b for b in m.content if isinstance(b, ToolUseBlock)]
    if body or foreign:
        msg["content"] = _dump_content(role, body, parts_hint, foreign)
    if calls:
        msg["tool_calls"] = [_dump_call(b) for b in calls]
    return msg


def _dump_content(role: str, body: Sequence[Block], parts_hint: bool, foreign: Any) -> Any:
    if not foreign and not parts_hint and all(not details(b, NAME) for b in body):
        if len(body) == 1 and isinstance(body[0], TextBlock):
            return body[0].text.content
        if role == "assistant":
            joined = join_think([_as_plain(b) for b in body])
            if joined is not None:
                return joined
    parts = [_dump_part(_as_plain(b)) for b in body if not _redacted(b)]
    return place_foreign(parts, foreign)


def _redacted(b: Block) -> bool:
    return isinstance(b, ThinkingBlock) and b.thinking.redacted


def _as_plain(b: Block) -> Block:
    # Chat Completions cannot carry signatures: signed thinking goes as its text
    if isinstance(b, ThinkingBlock) and b.thinking.signature is not None:
        return thinking(b.thinking.content)
    return b


def _dump_part(b: Block) -> JSON:
    extra = details(b, NAME)
    if isinstance(b, TextBlock):
        return {**extra, "type": "text", "text": b.text.content}
    if isinstance(b, ThinkingBlock):
        return {**extra, "type": "text", "text": f"<think>\n{b.thinking.content}\n</think>"}
    if isinstance(b, ImageBlock):
        nested = extra.pop("image_url", {})
        return {**extra, "type": "image_url", "image_url": {"url": image_data_url(b), **nested}}
    raise UserError(f"A {type(b).__name__} cannot go in Chat Completions message content")


def _dump_call(b: ToolUseBlock) -> JSON:
    extra = details(b, NAME)
    raw_args = extra.pop("arguments", None)
    fn_extra = extra.pop("function", {})
    args = (
        raw_args
        if raw_args is not None and _same_args(raw_args, b.tool_use.input)
        else dump_arguments(b.tool_use.input)
    )
    call: JSON = {
        "type": "function",
        **extra,
        "id": b.tool_use.id,
        "function": {**fn_extra, "name": b.tool_use.name, "arguments": args},
    }
    return call


def _same_args(raw: Any, value: Any) -> bool:
    try:
        return bool(arguments(raw, "") == value)
    except UserError:
        return False


# -- validate -------------------------------------------------------------------------------


def validate(payload: Any) -> None:
    """Check a ``messages`` list against the Chat Completions rules; raise ``UserError``
    listing every broken one (roles, empty content, tool calls answered by ``tool`` messages
    right after them, ids present, arguments valid JSON)."""
    p = Problems(NAME)
    if not isinstance(payload, list):
        p.add("payload", "must be a list of messages")
        p.raise_if_any()
        return
    if not payload:
        p.add("payload", "has no messages")
    pending: dict[str, str] = {}
    seen: set[str] = set()
    for n, m in enumerate(payload):
        where = f"messages[{n}]"
        if not isinstance(m, dict):
            p.add(where, "is not an object")
            continue
        role = m.get("role")
        if role not in _ROLES:
            p.add(where, f"unknown role {role!r}")
            continue
        if role != "tool" and pending:
            for cid, at in pending.items():
                p.add(at, f"tool call {cid!r} is not answered before {where}")
            pending.clear()
        content = m.get("content")
        if role == "tool":
            answered = m.get("tool_call_id")
            if not isinstance(answered, str) or not answered:
                p.add(where, "tool message without tool_call_id")
            elif answered in pending:
                del pending[answered]
            else:
                p.add(
                    where,
                    f"tool message {answered!r} answers no tool call of the assistant "
                    "message right before it",
                )
            if content is None:
                p.add(where, "tool message without content")
            _check_parts(p, where, content, images=False)
            continue
        calls = m.get("tool_calls") or []
        if role == "assistant":
            if not calls and _empty(content) and not m.get("refusal") and not m.get("audio"):
                p.add(where, "assistant message with neither content nor tool_calls")
            for k, call in enumerate(calls if isinstance(calls, list) else []):
                cw = f"{where}.tool_calls[{k}]"
                fn = call.get("function") if isinstance(call, dict) else None
                call_id = call.get("id") if isinstance(call, dict) else None
                if not isinstance(call_id, str) or not call_id:
                    p.add(cw, "tool call without id")
                    continue
                cid = call_id
                if cid in seen:
                    p.add(cw, f"tool call id {cid!r} is used twice")
                seen.add(cid)
                pending[cid] = cw
                if not isinstance(fn, dict) or not fn.get("name"):
                    p.add(cw, "tool call without function.name")
                elif not _json_string(fn.get("arguments")):
                    p.add(cw, "function.arguments is not a JSON string")
        elif _empty(content):
            p.add(where, f"{role} message with empty content")
        _check_parts(p, where, content, images=role == "user")
    for cid, at in pending.items():
        p.add(at, f"tool call {cid!r} has no tool message answering it")
    p.raise_if_any()


def _empty(content: Any) -> bool:
    return content is None or content == "" or content == []


def _json_string(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        json.loads(value)
    except json.JSONDecodeError:
        return False
    return True


def _check_parts(p: Problems, where: str, content: Any, *, images: bool) -> None:
    if not isinstance(content, list):
        if content is not None and not isinstance(content, str):
            p.add(where, "content must be a string or a list of parts")
        return
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                p.add(f"{where}.content[{k}]", "text part without text")
        elif kind == "image_url":
            if not images:
                p.add(f"{where}.content[{k}]", "image parts are only allowed in user messages")
            elif not isinstance(part.get("image_url"), dict) or not part["image_url"].get("url"):
                p.add(f"{where}.content[{k}]", "image_url part without url")
        elif kind is None:
            p.add(f"{where}.content[{k}]", "part without type")


# -- responses ------------------------------------------------------------------------------

# fields of a response message that a request does not take back
_RESPONSE_ONLY = ("annotations", "refusal", "audio", "function_call", "reasoning_content")


@guarded("openai_chat response")
def load_response(body: Any) -> Message:
    """The assistant message of the first choice of a Chat Completions response body, with
    ``model``, ``stop_reason`` (``finish_reason``) and ``usage``. A ``reasoning_content`` field
    (sent by reasoning servers) becomes a thinking block in front."""
    body = expect_dict(body, "Chat Completions response")
    choices = expect_list(body.get("choices"), "Chat Completions response choices")
    if not choices:
        raise UserError("Chat Completions response has no choices; nothing to load")
    choice = expect_dict(choices[0], "choices[0]")
    raw = dict(expect_dict(choice.get("message"), "choices[0].message"))
    reasoning = raw.get("reasoning_content")
    for key in _RESPONSE_ONLY:
        if key == "refusal" and raw.get(key):
            continue  # a refusal is content the model produced
        raw.pop(key, None)
    if raw.get("content") is None:
        raw.pop("content", None)
    message = _load_message(raw, "choices[0].message")[0]
    if isinstance(reasoning, str) and reasoning:
        message.content.insert(0, thinking(reasoning))
    u = body.get("usage") or {}
    cached = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    message.usage = Usage(
        input=int(u.get("prompt_tokens") or 0) - cached,
        output=int(u.get("completion_tokens") or 0),
        cache_read=cached,
        total=int(u.get("total_tokens") or 0),
    )
    message.model = body.get("model")
    message.stop_reason = choice.get("finish_reason")
    return message


dump = Sender(NAME, shape, validate)
