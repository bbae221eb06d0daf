"""ChatGPT data exports (``conversations.json``): one session per conversation.

A conversation is a ``mapping`` of nodes ``{id, parent, children, message}``; editing a prompt or
regenerating an answer adds a sibling, so the mapping is a tree and ``current_node`` is the leaf
the user last saw. The importer keeps the tree: one entry per node, with the node id as entry id,
its parent, and the message's ``create_time`` as timestamp; ``current_node`` becomes the leaf.

- ``user`` / ``assistant`` / ``system`` messages → messages of those roles (``text`` and
  ``multimodal_text`` parts; image parts → image blocks whose URL is the export's
  ``asset_pointer``; ``thoughts`` → thinking blocks; ``model_slug`` → ``model``).
- An assistant message addressed to a tool (``recipient`` other than ``all``, e.g. ``browser``
  or ``python``) → an assistant message with one ``tool_use`` (id = the node id, name = the
  recipient, input ``{"code": …}``). The ``tool`` message that answers it → a ``tool`` message with
  its ``tool_result`` (browsing results, quotes, execution output as text). A call answered by
  several tool messages (``mclick`` quoting three pages) pairs with the first; the others become
  ``custom`` messages holding their text, so every dump keeps one result per call.
- Nodes without a message (the root), and hidden or system nodes with no text (the empty system
  message ChatGPT puts first) → ``custom`` entries (``chatgpt_export:node``) holding the node.
- Everything else of a message (author, status, weight, metadata, citations…) is kept in
  ``provider_details["chatgpt_export"]``; the conversation's fields (title, create_time,
  default_model_slug…) in the session metadata; the title also names the session.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from threadline.errors import UserError
from threadline.formats._common import messages_uuid, position_uuid
from threadline.importing import (
    Draft,
    ImportReport,
    Source,
    at,
    bad,
    json_at,
    messages_of,
    read_json,
    source_name,
    write,
)
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    image_url,
    text,
    thinking,
    tool_result,
    tool_use,
)
from threadline.model.entries import (
    Custom,
    CustomEntry,
    MessageEntry,
    SessionInfo,
    SessionInfoEntry,
)

NAME = "chatgpt_export"


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """One draft per conversation of an export (a list of conversations or a single one)."""
    label = source_name(source, name)
    doc = read_json(source, label)
    convs = doc if isinstance(doc, list) else [doc]
    drafts = []
    for k, conv in enumerate(convs):
        where = f"conversation {k}" if isinstance(doc, list) else "the conversation"
        base: tuple[int, ...] = (k,) if isinstance(doc, list) else ()
        at(json_at(*base))
        if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
            raise bad(
                label,
                None,
                f'{where} has no "mapping" object; this is not a ChatGPT conversations.json export',
            )
        drafts.append(_build(conv, label, where, base))
    return drafts


def _iso(t: Any) -> str | None:
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return (
            datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return None


def _build(conv: dict[str, Any], label: str, where: str, base: tuple[int, ...]) -> Draft:
    mapping: dict[str, Any] = conv["mapping"]
    cid = conv.get("conversation_id") or conv.get("id")
    report = ImportReport(
        format=NAME, source=label, source_id=cid if isinstance(cid, str) else None
    )
    meta = {k: v for k, v in conv.items() if k != "mapping"}
    created = _iso(conv.get("create_time"))
    draft = Draft(
        report,
        source_id=report.source_id,
        metadata={"source": {"format": NAME, **meta}},
        created=created,
    )
    fallback = created or ""
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise bad(label, json_at(*base, "mapping", key), "the node is not an object")
    at(json_at(*base, "mapping"))
    # parents before children, siblings in their stored order
    roots = [k for k, n in mapping.items() if n.get("parent") not in mapping]
    order: list[str] = []
    seen: set[str] = set()
    queue = deque(roots)
    while queue:
        key = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        order.append(key)
        queue.extend(c for c in mapping[key].get("children") or [] if c in mapping)
    for key in mapping:  # nodes in a parent cycle: kept, the tree index reports the cycle
        if key not in seen:
            order.append(key)
    calls: dict[str, str] = {}  # node id of a tool call -> its tool_use id
    answered: set[str] = set()
    last_ts = fallback
    for key in order:
        at(json_at(*base, "mapping", key))
        node = mapping[key]
        parent = node.get("parent") if node.get("parent") in mapping else None
        if node.get("parent") is not None and parent is None:
            report.warn(f"{where}: node {key!r} names an unknown parent; it becomes a root")
        msg = node.get("message")
        ts = (_iso(msg.get("create_time")) if isinstance(msg, dict) else None) or last_ts
        last_ts = ts
        eid = draft.unique_id(str(node.get("id") or key))
        env: dict[str, Any] = {"id": eid, "parent_id": parent, "timestamp": ts}
        if not isinstance(msg, dict) or _hidden_empty(msg):
            data = {k: v for k, v in node.items() if k not in ("id", "parent", "children")}
            draft.add(CustomEntry(**env, custom=Custom(custom_type=f"{NAME}:node", data=data)))
            continue
        draft.add(
            MessageEntry(
                **env, message=_message(msg, key, parent, mapping, calls, answered, label, where)
            )
        )
    at(json_at(*base))
    title = conv.get("title")
    if isinstance(title, str) and title:
        draft.add(
            SessionInfoEntry(
                id=draft.unique_id(None),
                parent_id=None,
                timestamp=fallback,
                session_info=SessionInfo(name=title),
            )
        )
    current = conv.get("current_node")
    if isinstance(current, str) and current in mapping:
        draft.leaf = current
    else:
        report.warn(f"{where}: current_node {current!r} is not a node; the leaf is the last node")
        draft.leaf = order[-1] if order else None
    return draft


def _hidden_empty(msg: dict[str, Any]) -> bool:
    """A hidden node with no text, or an empty system message: nothing the model reads."""
    meta = msg.get("metadata") or {}
    role = (msg.get("author") or {}).get("role")
    if not meta.get("is_visually_hidden_from_conversation") and role != "system":
        return False
    content = msg.get("content") or {}
    parts = content.get("parts") if isinstance(content, dict) else None
    return not parts or all(p == "" for p in parts)


def _message(
    msg: dict[str, Any],
    key: str,
    parent: str | None,
    mapping: dict[str, Any],
    calls: dict[str, str],
    answered: set[str],
    label: str,
    where: str,
) -> Message:
    author = msg.get("author") or {}
    role = author.get("role")
    content = msg.get("content")
    if not isinstance(content, dict):
        raise bad(label, None, "the node's message has no content object")
    ctype = content.get("content_type")
    recipient = msg.get("recipient") or "all"
    meta = msg.get("metadata") or {}
    details = {k: v for k, v in msg.items() if k not in ("id", "content")}
    model = meta.get("model_slug") if isinstance(meta.get("model_slug"), str) else None
    finish = meta.get("finish_details")
    stop = finish.get("type") if isinstance(finish, dict) else None
    body = _content_text(content)
    extra_content = {
        k: v for k, v in content.items() if k not in ("content_type", "parts", "text", "result")
    }
    details["content_type"] = ctype
    if extra_content:
        details["content"] = extra_content
    pd = {NAME: details}
    if role == "assistant" and recipient != "all":
        calls[key] = key
        block = tool_use(key, str(recipient), {"code": body} if ctype == "code" else {"text": body})
        return Message(
            role="assistant", content=[block], model=model, stop_reason=stop, provider_details=pd
        )
    if role == "tool":
        call = _find_call(parent, mapping, calls)
        if call is not None and call not in answered:
            answered.add(call)
            return Message(role="tool", content=[tool_result(call, body)], provider_details=pd)
        return Message(role="custom", content=[text(body)], provider_details=pd)
    blocks: list[Block] = []
    if ctype == "thoughts":
        for th in content.get("thoughts") or []:
            if isinstance(th, dict):
                # a thought ChatGPT kept only the summary of: the summary is the reasoning there
                # is (an empty one would leave an empty assistant message behind)
                said = str(th.get("content") or "") or str(th.get("summary") or "")
                blocks.append(thinking(said, None))
    else:
        blocks = _parts(content)
    if role not in ("user", "assistant", "system"):
        details["role"] = role
        role = "custom"
    return Message(
        role=str(role),
        content=blocks,
        model=model if role == "assistant" else None,
        stop_reason=stop if role == "assistant" else None,
        provider_details=pd,
    )


def _find_call(parent: str | None, mapping: dict[str, Any], calls: dict[str, str]) -> str | None:
    """The tool call a tool message answers: the nearest call among its ancestors, stopping at
    a user or plain assistant message (or at a node seen before: a parent cycle)."""
    cur = parent
    seen: set[str] = set()
    while cur is not None and cur not in seen:
        seen.add(cur)
        if cur in calls:
            return calls[cur]
        msg = mapping[cur].get("message")
        if isinstance(msg, dict) and (msg.get("author") or {}).get("role") in ("user", "assistant"):
            return None
        nxt = mapping[cur].get("parent")
        cur = nxt if nxt in mapping else None
    return None


def _parts(content: dict[str, Any]) -> list[Block]:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return [text(_content_text(content))]
    blocks: list[Block] = []
    for p in parts:
        if isinstance(p, str):
            blocks.append(text(p))
        elif isinstance(p, dict) and p.get("content_type") == "image_asset_pointer":
            img = image_url(str(p.get("asset_pointer", "")))
            rest = {k: v for k, v in p.items() if k != "asset_pointer"}
            img.provider_details = {NAME: rest}
            blocks.append(img)
        else:  # audio, files and parts threadline has no type for: kept, shown as empty text
            blk = text("")
            blk.provider_details = {NAME: {"part": p}}
            blocks.append(blk)
    return blocks


def _content_text(content: dict[str, Any]) -> str:
    ctype = content.get("content_type")
    if ctype == "tether_quote":
        head = " ".join(str(content.get(k, "")) for k in ("title", "url") if content.get(k))
        return (
            f"{head}\n{content.get('text', '')}".strip() if head else str(content.get("text", ""))
        )
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return str(content[key])
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


# -- dump -----------------------------------------------------------------------------------

_ROOT = "client-created-root"
_PARTS_TYPES = ("text", "multimodal_text")


def dump(messages: Sequence[Message]) -> dict[str, Any]:
    """One ChatGPT conversation (an item of ``conversations.json``) for ``messages``: a
    ``mapping`` holding a linear chain under ChatGPT's message-less root node, ``current_node``
    its last node.

    What ``load`` keeps in ``provider_details["chatgpt_export"]`` (author, metadata, content
    type…) is written back, so ``load(dump(load(f))) == load(f)`` for an export. Node ids are
    positions, except a tool call's node, whose id is the call id (ChatGPT pairs calls and results
    through the tree, and ``load`` takes the call id from the node). ChatGPT has no place for a
    few things, which come back changed: a message without those details comes back with them
    (author, content type, ``metadata.model_slug``…); a ``tool_use`` becomes a message of its own
    (after the message's other blocks; thinking goes before them as a ``thoughts`` message,
    without its signature) with
    input ``{"code": …}`` or ``{"text": …}``, any other input coming back as ``{"text": <its
    JSON>}``; a ``tool_result`` (also one inside a user message) becomes a ``tool`` message of its
    own whose content is its text (images and ``is_error`` are dropped), and several results of
    parallel calls pair with the last call; a base64 image becomes an image URL (a ``data:``
    URL); the roles ChatGPT lacks (summaries, ``bashExecution``) come back as ``custom`` with the
    original role in the details.
    """
    names = {u.id: u.name for m in messages for u in m.tool_uses}
    nodes: list[tuple[str, dict[str, Any]]] = []
    for m in messages:
        for node_id, msg in _nodes(m, names):
            nodes.append((node_id or position_uuid(len(nodes) + 1), msg))
    mapping: dict[str, Any] = {
        _ROOT: {"id": _ROOT, "message": None, "parent": None, "children": []}
    }
    parent = _ROOT
    for node_id, msg in nodes:
        mapping[parent]["children"].append(node_id)
        mapping[node_id] = {
            "id": node_id,
            "message": {**msg, "id": node_id},
            "parent": parent,
            "children": [],
        }
        parent = node_id
    sid = messages_uuid(messages)
    return {
        "title": "",
        "create_time": 0.0,
        "update_time": 0.0,
        "mapping": mapping,
        "current_node": parent,
        "conversation_id": sid,
        "id": sid,
    }


def _nodes(m: Message, names: dict[str, str]) -> list[tuple[str | None, dict[str, Any]]]:
    """The ChatGPT messages (node id or None for a fresh one, message) for one message."""
    mine = dict(m.provider_details.get(NAME) or {}) if m.provider_details else {}
    thoughts = [b for b in m.content if isinstance(b, ThinkingBlock)]
    calls = [b for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for b in m.content if isinstance(b, ToolResultBlock)]
    plain: list[Block] = [b for b in m.content if isinstance(b, (TextBlock, ImageBlock))]
    if (
        m.role == "assistant"
        and mine.get("content_type") == "thoughts"
        and thoughts
        and len(thoughts) == len(m.content)
    ):
        return [(None, _thoughts(m, thoughts, mine))]
    if m.role == "assistant" and len(calls) == 1 and len(m.content) == 1:
        return [(calls[0].tool_use.id, _call(m, calls[0], mine))]
    if m.role in ("tool", "custom") and len(results) == 1 and len(m.content) == 1:
        return [(None, _result(results[0], names, mine))]
    if len(plain) != len(m.content):  # split what one ChatGPT message cannot hold
        out: list[tuple[str | None, dict[str, Any]]] = []
        for r in results:
            out.extend(_nodes(Message(role="tool", content=[r]), names))
        if thoughts:
            out.extend(
                _nodes(
                    Message(
                        role=m.role,
                        content=list[Block](thoughts),
                        provider_details={NAME: {"content_type": "thoughts"}},
                    ),
                    names,
                )
            )
        if plain or not (results or thoughts or calls):
            out.extend(
                _nodes(
                    Message(
                        role=m.role,
                        content=plain,
                        model=m.model,
                        stop_reason=m.stop_reason,
                        provider_details=m.provider_details,
                    ),
                    names,
                )
            )
        for c in calls:
            out.extend(_nodes(Message(role="assistant", content=[c], model=m.model), names))
        return out
    role = mine.pop("role", m.role)
    author = mine.pop("author", None) or {"role": role}
    ctype = mine.pop("content_type", None) or (
        "text"
        if all(isinstance(b, TextBlock) and not b.provider_details for b in plain)
        else "multimodal_text"
    )
    msg = {**mine, "author": author, "content": _content(ctype, mine.pop("content", {}), plain)}
    if m.role == "assistant":
        _set_model(msg, m)
    return [(None, msg)]


def _set_model(msg: dict[str, Any], m: Message) -> None:
    meta = dict(msg.get("metadata") or {})
    if m.model is not None and meta.get("model_slug") != m.model:
        meta["model_slug"] = m.model
    finish = meta.get("finish_details")
    if m.stop_reason is not None and not (
        isinstance(finish, dict) and finish.get("type") == m.stop_reason
    ):
        meta["finish_details"] = {
            **(finish if isinstance(finish, dict) else {}),
            "type": m.stop_reason,
        }
    if meta or "metadata" in msg:
        msg["metadata"] = meta


def _thoughts(m: Message, blocks: list[ThinkingBlock], mine: dict[str, Any]) -> dict[str, Any]:
    mine.pop("content_type", None)
    extra = dict(mine.pop("content", {}))
    kept = extra.pop("thoughts", None)
    raw = kept if isinstance(kept, list) else []
    thoughts = [
        _thought(raw[k] if k < len(raw) and isinstance(raw[k], dict) else {"summary": ""}, b)
        for k, b in enumerate(blocks)
    ]
    msg = {
        **mine,
        "author": mine.pop("author", None) or {"role": "assistant"},
        "content": {**extra, "content_type": "thoughts", "thoughts": thoughts},
    }
    _set_model(msg, m)
    return msg


def _thought(raw: dict[str, Any], b: ThinkingBlock) -> dict[str, Any]:
    said = b.thinking.content
    if said and not raw.get("content") and raw.get("summary") == said:
        return dict(raw)  # the summary stood in for content the export did not have
    return {**raw, "content": said}


def _call(m: Message, b: ToolUseBlock, mine: dict[str, Any]) -> dict[str, Any]:
    u = b.tool_use
    given = u.input if isinstance(u.input, dict) else None
    if given is not None and given.keys() == {"code"} and isinstance(given["code"], str):
        ctype, body = "code", given["code"]
    elif given is not None and given.keys() == {"text"} and isinstance(given["text"], str):
        ctype, body = mine.get("content_type") or "text", given["text"]
        if ctype == "code":
            ctype = "text"
    else:
        ctype, body = "text", json.dumps(u.input, ensure_ascii=False)
    mine.pop("content_type", None)
    extra = mine.pop("content", {})
    msg = {
        **mine,
        "author": mine.pop("author", None) or {"role": "assistant"},
        "recipient": u.name,
        "content": _content(ctype, extra, [text(body)]),
    }
    _set_model(msg, m)
    return msg


def _result(b: ToolResultBlock, names: dict[str, str], mine: dict[str, Any]) -> dict[str, Any]:
    r = b.tool_result
    body = (
        r.content
        if isinstance(r.content, str)
        else "\n".join(p.text.content for p in r.content if isinstance(p, TextBlock))
    )
    author = mine.pop("author", None) or {"role": "tool", "name": names.get(r.tool_use_id)}
    ctype = mine.pop("content_type", None) or "text"
    return {
        **mine,
        "author": author,
        "content": _content(ctype, mine.pop("content", {}), [text(body)]),
    }


def _content(ctype: str, extra: dict[str, Any], blocks: Sequence[Block]) -> dict[str, Any]:
    """A ChatGPT ``content`` object of type ``ctype`` holding ``blocks`` (text and images)."""
    out: dict[str, Any] = {"content_type": ctype, **extra}
    if ctype in _PARTS_TYPES or "parts" in extra:
        out["parts"] = [_part(b) for b in blocks]
        return out
    body = "\n".join(b.text.content for b in blocks if isinstance(b, TextBlock))
    if ctype == "tether_quote":
        head = " ".join(str(extra.get(k, "")) for k in ("title", "url") if extra.get(k))
        if head:
            body = body[len(head) + 1 :] if body.startswith(f"{head}\n") else ""
    if body or ctype not in ("reasoning_recap",):
        out["result" if ctype == "tether_browsing_display" else "text"] = body
    return out


def _part(b: Block) -> Any:
    extra = b.provider_details.get(NAME) if b.provider_details else None
    extra = dict(extra) if isinstance(extra, dict) else {}
    if isinstance(b, TextBlock):
        if not b.text.content and "part" in extra:
            return extra["part"]  # a part threadline has no block for
        return b.text.content
    if isinstance(b, ImageBlock):
        src = b.image.source
        url = src.data if src.type == "url" else f"data:{src.media_type};base64,{src.data}"
        return {"content_type": "image_asset_pointer", **extra, "asset_pointer": url}
    raise UserError(f"a ChatGPT message part cannot hold a {type(b).__name__}")


def load(data: Source) -> list[Message]:
    """The messages of the first conversation at its ``current_node``."""
    drafts = parse(data)
    return messages_of(drafts[0])


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import an export holding one conversation (use :func:`import_sessions` for many)."""
    drafts = parse(source)
    if len(drafts) != 1:
        raise bad(
            source_name(source),
            None,
            f"holds {len(drafts)} conversations; use import_sessions() to import them all",
        )
    (session,) = write(store, drafts, [session_id])
    return session


def import_sessions(store: Any, source: Source) -> list[Any]:
    """Import every conversation of an export, one session each (all or nothing)."""
    return write(store, parse(source))


__all__ = ["dump", "import_session", "import_sessions", "load", "parse"]
