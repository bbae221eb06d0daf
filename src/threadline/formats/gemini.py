"""Google Gemini ``generateContent``: ``load``, ``dump`` and ``validate``.

The payload is ``{"systemInstruction"?: {"parts": [...]}, "contents": [...]}`` in the REST API's
JSON names (camelCase, as the API sends them back and as recorded traffic shows); ``load`` also
reads the snake_case spelling of the Python SDK (``system_instruction``, ``inline_data``,
``function_call``…). Roles are ``user`` and ``model``. Thought parts (``"thought": true``) load as
thinking; a ``thoughtSignature`` stays in the part's ``provider_details["gemini"]`` (it is only
valid for Gemini, so it never becomes a threadline thinking signature). See ``docs/formats.md``.
"""

from __future__ import annotations

import json
import mimetypes
import re
import uuid
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

NAME = "gemini"
_SNAKE = re.compile(r"_([a-z])")
# the Python SDK's snake_case names this module reads; other keys are left as they are
_KNOWN_SNAKE = frozenset(
    {
        "system_instruction",
        "inline_data",
        "file_data",
        "function_call",
        "function_response",
        "mime_type",
        "file_uri",
        "thought_signature",
        "video_metadata",
        "executable_code",
        "code_execution_result",
        "usage_metadata",
        "model_version",
        "finish_reason",
        "prompt_token_count",
        "candidates_token_count",
        "total_token_count",
        "cached_content_token_count",
        "thoughts_token_count",
    }
)


def _camel_keys(value: JSON) -> JSON:
    """Top-level keys of a part or content with the SDK's snake_case names in camelCase (the
    REST names)."""
    return {
        _SNAKE.sub(lambda m: m.group(1).upper(), k) if k in _KNOWN_SNAKE else k: v
        for k, v in value.items()
    }


# -- load -----------------------------------------------------------------------------------


@guarded("gemini payload")
def load(data: Any) -> list[Message]:
    """Messages from ``{"systemInstruction"?, "contents"}`` (a whole request body works too) or a
    bare ``contents`` list."""
    if isinstance(data, list):
        data = {"contents": data}
    body = _camel_keys(expect_dict(data, "Gemini payload"))
    out: list[Message] = []
    if body.get("systemInstruction") is not None:
        out.append(_load_system(expect_dict(body["systemInstruction"], "systemInstruction")))
    calls = _CallIds()
    for n, raw in enumerate(expect_list(body.get("contents"), "Gemini contents")):
        where = f"contents[{n}]"
        out.extend(_load_content(_camel_keys(expect_dict(raw, where)), where, calls))
    return out


class _CallIds:
    """Gives id-less function calls stable ids and pairs id-less responses with them by name."""

    def __init__(self, prefix: str = "gemini_call_") -> None:
        self.prefix = prefix
        self.count = 0
        self.pending: list[tuple[str, str]] = []  # (name, id) of id-less calls not yet answered
        self.names: dict[str, str] = {}  # call id -> function name

    def call(self, name: str) -> str:
        self.count += 1
        cid = f"{self.prefix}{self.count}"
        self.pending.append((name, cid))
        return cid

    def response(self, name: str) -> str:
        for k, (n, cid) in enumerate(self.pending):
            if n == name:
                del self.pending[k]
                return cid
        self.count += 1
        return f"{self.prefix}{self.count}"


def _load_system(raw: JSON) -> Message:
    parts = expect_list(raw.get("parts"), "systemInstruction.parts")
    blocks: list[Block] = []
    for k, part in enumerate(parts):
        part = _camel_keys(expect_dict(part, f"systemInstruction.parts[{k}]"))
        if not isinstance(part.get("text"), str):
            raise UserError(f"systemInstruction.parts[{k}]: system parts must be text")
        blocks.append(attach(text(part["text"]), NAME, leftovers(part, ("text",))))
    return Message(
        role="system",
        content=blocks,
        provider_details=with_details(NAME, leftovers(raw, ("parts",))),
    )


def _load_content(raw: JSON, where: str, calls: _CallIds) -> list[Message]:
    role = raw.get("role", "user")
    if role not in ("user", "model"):
        raise UserError(f"{where}: role {role!r} is not a Gemini role (user, model)")
    extra = leftovers(raw, ("role", "parts"))
    if "role" not in raw:
        extra["role"] = None
    blocks: list[Block] = []
    foreign: list[list[Any]] = []
    for k, part in enumerate(expect_list(raw.get("parts"), f"{where}.parts")):
        part = _camel_keys(expect_dict(part, f"{where}.parts[{k}]"))
        block = _load_part(part, calls)
        if block is None:
            foreign.append([k, part])
        else:
            blocks.append(block)
    if foreign:
        extra["parts"] = foreign
    if role == "user" and not extra:
        return unwrap("user", blocks)
    return [
        Message(
            role="assistant" if role == "model" else "user",
            content=blocks,
            provider_details=with_details(NAME, extra),
        )
    ]


def _load_part(part: JSON, calls: _CallIds) -> Block | None:
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            block: Block = ThinkingBlock(thinking=Thinking(content=part["text"]))
            return attach(block, NAME, leftovers(part, ("text", "thought")))
        return attach(text(part["text"]), NAME, leftovers(part, ("text",)))
    if isinstance(part.get("inlineData"), dict):
        inline = _camel_keys(part["inlineData"])
        mime = str(inline.get("mimeType", ""))
        if not mime.startswith("image/"):
            return None
        src = ImageSource(type="base64", media_type=mime, data=str(inline.get("data", "")))
        return _image(src, part, "inlineData", leftovers(inline, ("mimeType", "data")))
    if isinstance(part.get("fileData"), dict):
        file = _camel_keys(part["fileData"])
        mime = str(file.get("mimeType", ""))
        if not mime.startswith("image/"):
            return None
        src = ImageSource(type="url", media_type=mime, data=str(file.get("fileUri", "")))
        return _image(src, part, "fileData", leftovers(file, ("mimeType", "fileUri")))
    if isinstance(part.get("functionCall"), dict):
        fc = _camel_keys(part["functionCall"])
        name = str(fc.get("name", ""))
        extra = leftovers(part, ("functionCall",))
        inner = leftovers(fc, ("name", "args", "id"))
        if "id" in fc:
            cid = str(fc["id"])
        else:
            cid = calls.call(name)
            inner["id"] = None
        calls.names[cid] = name
        if "args" not in fc:
            inner["args"] = None
        if inner:
            extra["functionCall"] = inner
        block = ToolUseBlock(tool_use=ToolUse(id=cid, name=name, input=fc.get("args") or {}))
        return attach(block, NAME, extra)
    if isinstance(part.get("functionResponse"), dict):
        return _load_response(part, calls)
    return None


def _image(src: ImageSource, part: JSON, key: str, inner: JSON) -> ImageBlock:
    extra = leftovers(part, (key,))
    if inner:
        extra[key] = inner
    block = ImageBlock(image=Image(source=src))
    attach(block, NAME, extra)
    return block


def _load_response(part: JSON, calls: _CallIds) -> ToolResultBlock:
    fr = _camel_keys(part["functionResponse"])
    name = str(fr.get("name", ""))
    inner = leftovers(fr, ("name", "response", "id"))
    if "id" in fr:
        cid = str(fr["id"])
    else:
        cid = calls.response(name)
        inner["id"] = None
    response = fr.get("response")
    is_error = False
    extra_key = ""
    content: str
    if (
        isinstance(response, dict)
        and len(response) == 1
        and isinstance(next(iter(response.values())), str)
    ):
        # {"output": …} / {"error": …} as the API documents; another single key (pydantic-ai
        # sends "return_value") is remembered so the same object goes back
        key = next(iter(response))
        content, is_error = response[key], key == "error"
        if key not in ("output", "error"):
            extra_key = key
    else:  # any other shape: the JSON text for other providers, the original kept
        content = json.dumps(response, ensure_ascii=False)
        inner["response"] = response
    if calls.names.get(cid) != name:  # else dump finds it from the call
        inner["name"] = name
    extra = leftovers(part, ("functionResponse",))
    if inner:
        extra["functionResponse"] = inner
    if extra_key:
        extra["response_key"] = extra_key
    block = ToolResultBlock(
        tool_result=ToolResult(tool_use_id=cid, content=content, is_error=is_error)
    )
    attach(block, NAME, extra)
    return block


# -- dump -----------------------------------------------------------------------------------


@guarded("gemini dump (a message's provider_details)")
def shape(messages: Sequence[Message]) -> JSON:
    """The ``{"systemInstruction"?, "contents"}`` payload for a context.

    Leading system messages go to ``systemInstruction``; later system messages, tool messages
    and summaries become user content; consecutive messages of one role merge into one turn.
    A function response takes its name from the call it answers. Images inside a tool result
    follow the response as inline parts.
    """
    system, turns = provider_turns(messages, NAME, system_first=True)
    names = {u.id: u.name for m in messages for u in m.tool_uses}
    payload: JSON = {}
    if system:
        payload["systemInstruction"] = {
            **details(system[0], NAME),
            "parts": [p for m in system for b in m.content for p in _dump_part(b, names)],
        }
    contents: list[JSON] = []
    for role, group in turns:
        parts: list[Any] = []
        extra: JSON = {}
        for m in group:
            own = details(m, NAME)
            foreign = own.pop("parts", None)
            mine = [p for b in m.content for p in _dump_part(b, names)]
            parts.extend(place_foreign(mine, foreign))
            extra = {**own, **extra}
        wire_role = "model" if role == "assistant" else "user"
        content: JSON = {**extra, "role": wire_role, "parts": parts}
        if extra.get("role", "") is None:
            del content["role"]
        contents.append(content)
    payload["contents"] = contents
    return payload


def dump_content(message: Message, names: dict[str, str]) -> JSON | None:
    """One message as one ``Content`` on its own, not merged with its neighbours (for formats
    that keep one message per record, such as Google ADK events): a system message, a tool
    message and the summary roles become user content as in :func:`dump`. ``names`` maps call
    ids to function names (a function response needs its call's name). None when the message has
    nothing for Gemini."""
    _, turns = provider_turns([message], NAME, system_first=False)
    if not turns:
        return None
    role, (m,) = turns[0]
    own = details(m, NAME)
    foreign = own.pop("parts", None)
    parts = place_foreign([p for b in m.content for p in _dump_part(b, names)], foreign)
    content: JSON = {**own, "role": "model" if role == "assistant" else "user", "parts": parts}
    if own.get("role", "") is None:
        del content["role"]
    return content


def _dump_part(b: Block, names: dict[str, str]) -> list[JSON]:
    extra = details(b, NAME)
    if isinstance(b, TextBlock):
        return [{**extra, "text": b.text.content}]
    if isinstance(b, ThinkingBlock):
        if b.thinking.redacted:
            return []  # opaque to every provider but the one that made it
        return [{**extra, "text": b.thinking.content, "thought": True}]
    if isinstance(b, ImageBlock):
        src = b.image.source
        if src.type == "url":
            mime = src.media_type or mimetypes.guess_type(src.data)[0] or "image/jpeg"
            inner = {**extra.pop("fileData", {}), "mimeType": mime, "fileUri": src.data}
            return [{**extra, "fileData": inner}]
        inner = {**extra.pop("inlineData", {}), "mimeType": src.media_type, "data": src.data}
        return [{**extra, "inlineData": inner}]
    if isinstance(b, ToolUseBlock):
        u = b.tool_use
        fc: JSON = {"id": u.id, "name": u.name, "args": u.input}
        fc.update(extra.pop("functionCall", {}))
        return [
            {
                **extra,
                "functionCall": {
                    k: v for k, v in fc.items() if v is not None or k not in ("id", "args")
                },
            }
        ]
    return _dump_result(b, extra, names)


def _dump_result(b: ToolResultBlock, extra: JSON, names: dict[str, str]) -> list[JSON]:
    r = b.tool_result
    inner = extra.pop("functionResponse", {})
    key = extra.pop("response_key", "error" if r.is_error else "output")
    images: list[ImageBlock] = []
    if isinstance(r.content, str):
        body = r.content
    else:
        body = "\n".join(p.text.content for p in r.content if isinstance(p, TextBlock))
        images = [p for p in r.content if isinstance(p, ImageBlock)]
    response = {key: body}
    fr: JSON = {"id": r.tool_use_id, "name": names.get(r.tool_use_id, ""), "response": response}
    fr.update(inner)
    if fr.get("id", "") is None:
        del fr["id"]
    out = [{**extra, "functionResponse": fr}]
    return out + [p for img in images for p in _dump_part(img, names)]


# -- validate -------------------------------------------------------------------------------


def validate(payload: Any) -> None:
    """Check a Gemini payload; raise ``UserError`` listing every broken rule (roles user/model
    alternating from ``user``, no content without parts, each function call answered by a
    function response with its name in the next turn, system instruction holding text)."""
    p = Problems(NAME)
    if not isinstance(payload, dict) or not isinstance(payload.get("contents"), list):
        p.add("payload", 'must be {"systemInstruction"?, "contents": [...]}')
        p.raise_if_any()
        return
    body = _camel_keys(payload)
    system = body.get("systemInstruction")
    if system is not None:
        parts = system.get("parts") if isinstance(system, dict) else None
        if (
            not isinstance(parts, list)
            or not parts
            or not all(isinstance(x, dict) and isinstance(x.get("text"), str) for x in parts)
        ):
            p.add("systemInstruction", "must hold a non-empty list of text parts")
    if not body["contents"]:
        p.add("contents", "is empty")
    roles: list[tuple[str, str]] = []
    turns: list[tuple[str, str, list[str], list[str]]] = []
    for n, c in enumerate(body["contents"]):
        where = f"contents[{n}]"
        if not isinstance(c, dict):
            p.add(where, "is not an object")
            continue
        role = c.get("role", "user")
        if role not in ("user", "model"):
            p.add(where, f"unknown role {role!r}")
            continue
        roles.append((where, role))
        parts = c.get("parts")
        if not isinstance(parts, list) or not parts:
            p.add(where, "content without parts")
            turns.append((where, role, [], []))
            continue
        calls, results = _check_parts(p, where, role, parts, n)
        turns.append((where, role, calls, results))
    check_alternation(p, roles, "user")
    check_adjacent_pairing(p, turns)
    p.raise_if_any()


def _check_parts(
    p: Problems, where: str, role: str, parts: list[Any], turn: int
) -> tuple[list[str], list[str]]:
    calls: list[str] = []
    results: list[str] = []
    seen: dict[str, int] = {}  # id-less calls and responses pair by name and order in the turn

    def key(fn: JSON, kind: str) -> str:
        if fn.get("id"):
            return str(fn["id"])
        n = seen[f"{kind}:{fn['name']}"] = seen.get(f"{kind}:{fn['name']}", 0) + 1
        # id-less: the n-th call of a name in its turn, answered in the next turn; anchored to
        # the call's turn so the same name called again later is not a duplicate id
        return f"{fn['name']}#{n}@{turn if kind == 'call' else turn - 1}"

    for k, raw in enumerate(parts):
        pw = f"{where}.parts[{k}]"
        if not isinstance(raw, dict):
            p.add(pw, "is not an object")
            continue
        part = _camel_keys(raw)
        if "functionCall" in part:
            fc = part["functionCall"]
            if role != "model":
                p.add(pw, "a functionCall must be in a model turn")
            if not isinstance(fc, dict) or not fc.get("name"):
                p.add(pw, "functionCall without name")
                continue
            calls.append(key(fc, "call"))
        elif "functionResponse" in part:
            fr = part["functionResponse"]
            if role != "user":
                p.add(pw, "a functionResponse must be in a user turn")
            if not isinstance(fr, dict) or not fr.get("name"):
                p.add(pw, "functionResponse without name")
                continue
            if not isinstance(fr.get("response"), dict):
                p.add(pw, "functionResponse.response must be an object")
            results.append(key(fr, "response"))
        elif "inlineData" in part or "fileData" in part:
            data = part.get("inlineData") or part.get("fileData")
            if not isinstance(data, dict) or not (data.get("mimeType") or data.get("mime_type")):
                p.add(pw, "inline or file data without mimeType")
        elif not any(k in part for k in ("text", "executableCode", "codeExecutionResult")):
            p.add(pw, "part with no known field (text, inlineData, functionCall…)")
    return calls, results


# -- responses ------------------------------------------------------------------------------


@guarded("gemini response")
def load_response(body: Any) -> Message:
    """The model message of the first candidate of a ``generateContent`` response body, with
    ``model``, ``stop_reason`` and ``usage``. Function calls without an id get a unique
    ``gemini_call_…`` id (kept out of later dumps), so calls of different responses never
    collide."""
    body = _camel_keys(expect_dict(body, "Gemini response"))
    candidates = expect_list(body.get("candidates"), "Gemini response candidates")
    if not candidates:
        raise UserError("Gemini response has no candidates; nothing to load")
    cand = _camel_keys(expect_dict(candidates[0], "candidates[0]"))
    content = _camel_keys(expect_dict(cand.get("content") or {"parts": []}, "candidates[0]"))
    content.setdefault("role", "model")
    content.setdefault("parts", [])
    calls = _CallIds(prefix=f"gemini_call_{uuid.uuid4().hex[:12]}_")
    message = _load_content(content, "candidates[0].content", calls)[0]
    u = _camel_keys(body.get("usageMetadata") or {})
    message.usage = Usage(
        input=int(u.get("promptTokenCount") or 0),
        output=int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0),
        cache_read=int(u.get("cachedContentTokenCount") or 0),
        total=int(u.get("totalTokenCount") or 0),
    )
    message.model = body.get("modelVersion")
    message.stop_reason = cand.get("finishReason")
    return message


dump = Sender(NAME, shape, validate)
