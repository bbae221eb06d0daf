"""pi coding-agent sessions (``~/.pi/agent/sessions/**.jsonl``), format versions 1, 2 and 3.

A pi session file is a ``{"type":"session"}`` header followed by one entry per line. Version 1
files are linear and carry no ids: the importer gives each entry the id ``L<line>``, chains them
in file order and turns a compaction's ``firstKeptEntryIndex`` (an index into the file's entries,
header included, corrupt lines excluded, as pi counts it) into ``first_kept_entry_id``. Versions 2
and 3 are trees (``id`` / ``parentId``); ids, parents and timestamps are kept as they are. pi's
``hookMessage`` role (v2) is its ``custom`` role (v3).

Mapping (pi → threadline):

- ``message``: ``user`` → ``user``; ``assistant`` → ``assistant`` (``toolCall`` → ``tool_use``,
  ``thinking`` → ``thinking`` with its signature, ``usage`` → usage, ``stopReason`` →
  ``stop_reason``); ``toolResult`` → a ``tool`` message holding one ``tool_result`` block;
  ``bashExecution`` → ``bashExecution`` whose text is what pi shows the model; ``custom``
  (``hookMessage``) → ``custom``. Whatever has no threadline field (``api``, ``provider``,
  ``timestamp``, ``cost``, ``errorMessage``, ``toolName``, ``details``, …) is kept in the
  message's or block's ``provider_details["pi"]`` under its pi name.
- ``custom_message`` entries, which pi puts in the context, → ``custom`` messages (with
  ``customType``, ``display`` and ``details`` in ``provider_details["pi"]``), so the imported
  context holds exactly the messages pi's ``buildSessionContext`` returns.
- ``model_change``, ``thinking_level_change``, ``compaction``, ``branch_summary``, ``label``,
  ``session_info`` and ``custom`` map to the threadline entries of the same meaning; unknown entry
  types become ``custom`` entries of type ``pi:<type>`` holding the whole entry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec

from threadline.errors import UserError
from threadline.formats._common import EPOCH, details, messages_uuid
from threadline.importing import (
    Draft,
    ImportReport,
    Source,
    at,
    bad,
    decode_line,
    import_path,
    iter_lines,
    messages_of,
    read_bytes,
    source_name,
)
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    image,
    text,
    thinking,
    tool_result,
    tool_use,
)
from threadline.model.entries import (
    BranchSummary,
    BranchSummaryEntry,
    Compaction,
    CompactionEntry,
    Custom,
    CustomEntry,
    KnownRecord,
    Label,
    LabelEntry,
    MessageEntry,
    ModelChange,
    ModelChangeEntry,
    SessionInfo,
    SessionInfoEntry,
    ThinkingLevel,
    ThinkingLevelEntry,
)

NAME = "pi"
_ENVELOPE = ("type", "id", "parentId", "timestamp")


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """The session in a pi ``.jsonl`` file (path, text or bytes) as one draft.

    The file is read line by line and each entry is converted and spooled as it is read (see
    :class:`~threadline.importing.Draft`): what is kept across lines is ids, not entries. A
    version 1 file is read twice, the first time for its entry numbering (only line numbers are
    kept), since a compaction's ``firstKeptEntryIndex`` may name any entry of the file.
    """
    label = source_name(source, name)
    report = ImportReport(format=NAME, source=label)
    lines = _numbered(source, label)
    header: dict[str, Any] | None = None
    for n, line in lines:
        obj, problem = _decoded(line)
        if problem is not None or not isinstance(obj, dict) or obj.get("type") != "session":
            raise bad(
                label, n, 'not a pi session: the first line must be a {"type":"session"} header'
            )
        header = obj
        break
    if header is None:
        raise bad(label, None, "the file is empty; a pi session starts with a session header")
    draft, version = _draft(header, report, label)
    v1_lines: list[int] | None = None
    if version < 2:
        if isinstance(source, Iterator):  # readable once: what is left is kept for two passes
            rest = list(lines)
            lines, v1_lines = iter(rest), _good_lines(rest)
        else:
            again = _numbered(source, label)
            next(again, None)  # the header
            v1_lines = _good_lines(again)
    _fill(draft, version, lines, v1_lines, label)
    return [draft]


def _numbered(source: Source | Iterator[Any], label: str) -> Iterator[tuple[int, Any]]:
    if isinstance(source, (list, tuple, Iterator)):  # entries already parsed
        return enumerate(source, 1)
    return iter_lines(source, label)


def _decoded(line: Any) -> tuple[Any, str | None]:
    """A line's entry, or the reason it is not one."""
    obj, problem = decode_line(line) if isinstance(line, bytes) else (line, None)
    if problem is None and not isinstance(obj, dict):
        problem = "a pi entry must be a JSON object"
    return obj, problem


def _good_lines(lines: Iterable[tuple[int, Any]]) -> list[int]:
    """pi's numbering of a version 1 file: entry ``i`` is on line ``result[i]`` (the header is
    entry 0, damaged lines are skipped)."""
    return [0, *(n for n, line in lines if _decoded(line)[1] is None)]


def _draft(header: dict[str, Any], report: ImportReport, label: str) -> tuple[Draft, int]:
    version = header.get("version", 1)
    if not isinstance(version, int) or version < 1:
        raise bad(label, 1, f"unknown pi session version {version!r}")
    if version > 3:
        report.warn(f"pi session version {version} is newer than 3; read as version 3")
    sid = header.get("id")
    created = header.get("timestamp") if isinstance(header.get("timestamp"), str) else None
    meta = {k: v for k, v in header.items() if k not in ("type", "id", "timestamp", "cwd")}
    draft = Draft(
        report,
        source_id=sid if isinstance(sid, str) else None,
        cwd=header.get("cwd") if isinstance(header.get("cwd"), str) else None,
        metadata={"source": {"format": NAME, **meta}} if meta else {"source": {"format": NAME}},
        created=created,
    )
    report.source_id = draft.source_id
    return draft, version


def _fill(
    draft: Draft,
    version: int,
    lines: Iterator[tuple[int, Any]],
    v1_lines: list[int] | None,
    label: str,
) -> None:
    """Convert and add the entries of ``lines`` one at a time (``v1_lines``: a version 1 file's
    entry numbering, ``None`` for a tree)."""
    report = draft.report
    linear = v1_lines is not None
    fallback_ts = draft.created or ""
    prev: str | None = None
    leaf: str | None = None
    for n, line in lines:
        at(n)
        obj, problem = _decoded(line)
        if problem is not None:
            # kept where it stood: in the chain (v1) or as a root (v2/v3, its parent is unknown)
            eid = draft.add_corrupt_line(n, line, problem, prev if linear else None, fallback_ts)
            if linear:
                prev = eid
            continue
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise bad(label, n, 'a pi entry needs a string "type"')
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) else fallback_ts
        if linear:
            eid = draft.unique_id(f"L{n}", n)
            parent = prev
        else:
            raw_id = obj.get("id")
            if not isinstance(raw_id, str) or not raw_id:
                raise bad(label, n, f'a version {version} pi entry needs a string "id"')
            eid = draft.unique_id(raw_id, n)
            raw_parent = obj.get("parentId")
            parent = raw_parent if isinstance(raw_parent, str) and raw_parent else None
            if parent is not None and not draft.has(parent):
                if parent != draft.source_id:
                    report.warn(
                        f"line {n}: parent {parent!r} of entry {raw_id!r} is not an "
                        "earlier entry; the entry becomes a root"
                    )
                parent = None
        draft.add(_record(obj, kind, eid, parent, ts, label, n, v1_lines))
        prev = eid
        leaf = eid
    # pi's leaf is its last good entry; a damaged line after it must not move it
    draft.leaf = leaf


def _record(
    obj: dict[str, Any],
    kind: str,
    eid: str,
    parent: str | None,
    ts: str,
    label: str,
    n: int,
    v1_lines: list[int] | None,
) -> KnownRecord:
    env: dict[str, Any] = {"id": eid, "parent_id": parent, "timestamp": ts}
    try:
        if kind == "message":
            msg = obj.get("message")
            if not isinstance(msg, dict):
                raise bad(label, n, 'a pi "message" entry needs a "message" object')
            return MessageEntry(**env, message=message_from_pi(msg, label, n))
        if kind == "custom_message":
            extras = _extras(obj, ("customType", "content", "display", "details"))
            details: dict[str, Any] = {
                "entryType": "custom_message",
                "customType": obj.get("customType"),
                "display": obj.get("display"),
            }
            if "details" in obj:
                details["details"] = obj["details"]
            details.update(extras)
            return MessageEntry(
                **env,
                message=Message(
                    role="custom",
                    content=_content(obj.get("content", ""), label, n),
                    provider_details=_pd(details),
                ),
            )
        if kind == "model_change":
            return ModelChangeEntry(
                **env,
                model_change=ModelChange(
                    provider=_str(obj, "provider", label, n),
                    model_id=_str(obj, "modelId", label, n),
                ),
            )
        if kind == "thinking_level_change":
            return ThinkingLevelEntry(
                **env,
                thinking_level=ThinkingLevel(thinking_level=_str(obj, "thinkingLevel", label, n)),
            )
        if kind == "compaction":
            first = obj.get("firstKeptEntryId")
            index = obj.get("firstKeptEntryIndex")
            if v1_lines is not None and isinstance(index, int) and not isinstance(index, bool):
                first = f"L{v1_lines[index]}" if 0 < index < len(v1_lines) else None
            tokens = obj.get("tokensBefore", 0)
            return CompactionEntry(
                **env,
                compaction=Compaction(
                    summary=_str(obj, "summary", label, n),
                    first_kept_entry_id=first if isinstance(first, str) else None,
                    tokens_before=tokens if isinstance(tokens, int) else 0,
                    details=_details(
                        obj,
                        (
                            "summary",
                            "firstKeptEntryId",
                            "firstKeptEntryIndex",
                            "tokensBefore",
                            "details",
                        ),
                    ),
                ),
            )
        if kind == "branch_summary":
            from_id = obj.get("fromId")
            return BranchSummaryEntry(
                **env,
                branch_summary=BranchSummary(
                    summary=_str(obj, "summary", label, n),
                    from_id=from_id if isinstance(from_id, str) else None,
                    details=_details(obj, ("summary", "fromId", "details")),
                ),
            )
        if kind == "label":
            value = obj.get("label")
            return LabelEntry(
                **env,
                label=Label(
                    target_id=_str(obj, "targetId", label, n),
                    label=value if isinstance(value, str) else None,
                ),
            )
        if kind == "session_info":
            value = obj.get("name")
            return SessionInfoEntry(
                **env, session_info=SessionInfo(name=value if isinstance(value, str) else "")
            )
        if kind == "custom":
            return CustomEntry(
                **env,
                custom=Custom(custom_type=_str(obj, "customType", label, n), data=obj.get("data")),
            )
    except (msgspec.ValidationError, TypeError) as exc:
        raise bad(label, n, f"invalid pi {kind} entry ({exc})") from None
    data = {k: v for k, v in obj.items() if k not in ("id", "parentId")}
    return CustomEntry(**env, custom=Custom(custom_type=f"pi:{kind}", data=data))


def _str(obj: dict[str, Any], key: str, label: str, n: int) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise bad(label, n, f'a pi {obj.get("type")} entry needs a string "{key}"')
    return value


def _extras(obj: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return _rest(obj, known + _ENVELOPE)


def _details(obj: dict[str, Any], known: tuple[str, ...]) -> Any:
    """pi's ``details``; fields threadline has no place for (``fromHook``) ride along in it."""
    details = obj.get("details")
    extras = _extras(obj, known)
    if not extras:
        return details
    merged = (
        dict(details)
        if isinstance(details, dict)
        else ({} if details is None else {"details": details})
    )
    merged["pi"] = extras
    return merged


# -- messages -------------------------------------------------------------------------------


def message_from_pi(msg: dict[str, Any], label: str = "<data>", n: int | None = None) -> Message:
    """One pi ``AgentMessage`` as a threadline :class:`Message`."""
    role = msg.get("role")
    if role == "assistant":
        return _assistant(msg, label, n)
    if role == "toolResult":
        call_id = msg.get("toolCallId")
        if not isinstance(call_id, str):
            raise bad(label, n, 'a pi toolResult message needs a string "toolCallId"')
        blocks = _content(msg.get("content", ""), label, n)
        parts: list[TextBlock | ImageBlock] = [
            b for b in blocks if isinstance(b, (TextBlock, ImageBlock))
        ]
        return Message(
            role="tool",
            content=[tool_result(call_id, parts, bool(msg.get("isError", False)))],
            provider_details=_pd(_extras(msg, ("role", "toolCallId", "content", "isError"))),
        )
    if role == "bashExecution":
        return Message(
            role="bashExecution",
            content=[text(bash_text(msg))],
            provider_details=_pd(_extras(msg, ("role",))),
        )
    if role in ("user", "custom", "hookMessage", "system"):
        details = _extras(msg, ("role", "content"))
        if role == "hookMessage":
            details["role"] = "hookMessage"
        return Message(
            role="user" if role == "user" else "system" if role == "system" else "custom",
            content=_content(msg.get("content", ""), label, n),
            provider_details=_pd(details),
        )
    if role in ("branchSummary", "compactionSummary"):
        return Message(
            role=role,
            content=[text(str(msg.get("summary", "")))],
            provider_details=_pd(_extras(msg, ("role", "summary"))),
        )
    # an unknown role: kept whole, shown as a custom message
    return Message(
        role="custom",
        content=_content(msg.get("content", ""), label, n),
        provider_details=_pd({"role": role, **_extras(msg, ("role", "content"))}),
    )


def bash_text(msg: dict[str, Any]) -> str:
    """The text pi gives the model for a ``bashExecution`` message."""
    out = f"Ran `{msg.get('command', '')}`\n"
    output = msg.get("output")
    out += f"```\n{output}\n```" if output else "(no output)"
    code = msg.get("exitCode")
    if msg.get("cancelled"):
        out += "\n\n(command cancelled)"
    elif code not in (None, 0):
        out += f"\n\nCommand exited with code {code}"
    if msg.get("truncated") and msg.get("fullOutputPath"):
        out += f"\n\n[Output truncated. Full output: {msg['fullOutputPath']}]"
    return out


def _assistant(msg: dict[str, Any], label: str, n: int | None) -> Message:
    blocks = _content(msg.get("content", []), label, n)
    usage = msg.get("usage")
    details = _extras(msg, ("role", "content", "model", "usage", "stopReason"))
    u: Usage | None = None
    if isinstance(usage, dict):
        u = Usage(
            input=_int(usage.get("input")),
            output=_int(usage.get("output")),
            cache_read=_int(usage.get("cacheRead")),
            cache_write=_int(usage.get("cacheWrite")),
            total=_int(usage.get("totalTokens")),
        )
        rest = {
            k: v
            for k, v in usage.items()
            if k not in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
        }
        if rest:
            details["usage"] = rest
    model = msg.get("model")
    stop = msg.get("stopReason")
    return Message(
        role="assistant",
        content=blocks,
        model=model if isinstance(model, str) else None,
        usage=u,
        stop_reason=stop if isinstance(stop, str) else None,
        provider_details=_pd(details),
    )


def _pd(extras: dict[str, Any]) -> dict[str, Any] | None:
    """Leftovers namespaced by format, the convention of every ``threadline.formats`` module."""
    return {NAME: extras} if extras else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _content(content: Any, label: str, n: int | None) -> list[Block]:
    if isinstance(content, str):
        return [text(content)]
    if not isinstance(content, list):
        raise bad(label, n, "pi message content must be a string or a list of blocks")
    return [_block(b, label, n) for b in content]


def _block(b: Any, label: str, n: int | None) -> Block:
    if not isinstance(b, dict):
        raise bad(label, n, f"a pi content block must be an object, not {b!r:.40}")
    kind = b.get("type")
    if kind == "text":
        blk: Block = text(str(b.get("text", "")))
        rest = _rest(b, ("type", "text"))
    elif kind == "thinking":
        sig = b.get("thinkingSignature")
        blk = thinking(
            str(b.get("thinking", "")),
            sig if isinstance(sig, str) else None,
            bool(b.get("redacted", False)),
        )
        rest = _rest(b, ("type", "thinking", "thinkingSignature", "redacted"))
    elif kind == "toolCall":
        cid, tname = b.get("id"), b.get("name")
        if not isinstance(cid, str) or not isinstance(tname, str):
            raise bad(label, n, 'a pi toolCall block needs string "id" and "name"')
        args = b.get("arguments")
        blk = tool_use(cid, tname, {} if args is None else args)
        rest = _rest(b, ("type", "id", "name", "arguments"))
    elif kind == "image":
        blk = image(str(b.get("data", "")), str(b.get("mimeType", "")))
        rest = _rest(b, ("type", "data", "mimeType"))
    else:
        blk = text("")
        rest = {"block": b}
    if rest:
        blk.provider_details = _pd(rest)
    return blk


def _rest(b: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    if b.keys() <= _known(known):  # the common case, answered by a set operation in C
        return {}
    return {k: v for k, v in b.items() if k not in known}


_KNOWN: dict[tuple[str, ...], frozenset[str]] = {}


def _known(keys: tuple[str, ...]) -> frozenset[str]:
    found = _KNOWN.get(keys)
    if found is None:
        found = _KNOWN[keys] = frozenset(keys)
    return found


# -- dump -----------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A pi version 3 session file for ``messages``: its lines as dicts, the ``session`` header
    first, then one ``message`` entry per message chained by ``id``/``parentId`` (write each
    dict as one JSON line to get the ``.jsonl`` file).

    Ids are the entry's position (``00000001``…), the session id is derived from the messages
    and every timestamp is :data:`~threadline.formats._common.EPOCH`, so equal histories give
    equal files. What ``load`` keeps in ``provider_details["pi"]`` is written back, so
    ``load(dump(load(f))) == load(f)`` for a pi file. pi has no place for a few things, which
    come back changed: an image given by URL becomes the text ``[image: <url>]``; a
    ``tool_result`` block becomes a ``toolResult`` message of its own (a message holding several
    becomes several, its other blocks a ``user`` message after them) whose string content
    becomes one text block; a ``bashExecution`` message without pi's command fields, and a
    summary message with other than one text block, become a ``custom`` message.
    """
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": messages_uuid(messages), "timestamp": EPOCH}
    ]
    parent: str | None = None
    for m in messages:
        for msg in _to_pi(m):
            eid = f"{len(lines):08x}"
            env = {"type": "message", "id": eid, "parentId": parent, "timestamp": EPOCH}
            if msg.get("entryType") == "custom_message" and msg.get("role") == "custom":
                entry = {k: v for k, v in msg.items() if k not in ("entryType", "role")}
                lines.append({**entry, **env, "type": "custom_message"})
            else:
                lines.append({**env, "message": msg})
            parent = eid
    return lines


def _to_pi(m: Message) -> list[dict[str, Any]]:
    """One threadline message as pi ``AgentMessage`` dicts (usually one)."""
    extras = details(m, NAME)
    results = [b for b in m.content if isinstance(b, ToolResultBlock)]
    if results and (m.role != "tool" or len(m.content) != 1):
        rest: list[Block] = [b for b in m.content if not isinstance(b, ToolResultBlock)]
        split = [Message(role="tool", content=[b]) for b in results]
        if rest:
            split.append(Message(role="user", content=rest))
        return [d for part in split for d in _to_pi(part)]
    if m.role == "tool" and results:
        r = results[0].tool_result
        out: dict[str, Any] = {
            **extras,
            "role": "toolResult",
            "toolCallId": r.tool_use_id,
            "content": r.content
            if isinstance(r.content, str)
            else [_block_to_pi(b) for b in r.content],
        }
        if r.is_error:
            out["isError"] = True
        return [out]
    blocks = [_block_to_pi(b) for b in m.content]
    if m.role == "assistant":
        usage_rest = extras.pop("usage", None)
        out = {**extras, "role": "assistant", "content": blocks}
        if m.model is not None:
            out["model"] = m.model
        if m.usage is not None:
            u = m.usage
            out["usage"] = {
                **(usage_rest if isinstance(usage_rest, dict) else {}),
                "input": u.input,
                "output": u.output,
                "cacheRead": u.cache_read,
                "cacheWrite": u.cache_write,
                "totalTokens": u.total,
            }
        if m.stop_reason is not None:
            out["stopReason"] = m.stop_reason
        return [out]
    if m.role == "bashExecution" and "command" in extras:
        return [{**extras, "role": "bashExecution"}]
    if (
        m.role in ("branchSummary", "compactionSummary")
        and len(m.content) == 1
        and isinstance(m.content[0], TextBlock)
        and not m.content[0].provider_details
    ):
        return [{**extras, "role": m.role, "summary": m.content[0].text.content}]
    if m.role in ("user", "system"):
        return [{**extras, "role": m.role, "content": blocks}]
    # custom (pi's custom and hookMessage roles, unknown roles kept under "role") and the roles
    # pi cannot hold as they are
    role = extras.pop("role", "custom") if m.role == "custom" else "custom"
    return [{**extras, "role": role, "content": blocks}]


def _block_to_pi(b: Block) -> dict[str, Any]:
    extra = details(b, NAME)
    if isinstance(b, TextBlock):
        if not b.text.content and extra.keys() == {"block"}:
            return dict(extra["block"])  # a block pi has that threadline has no type for
        return {**extra, "type": "text", "text": b.text.content}
    if isinstance(b, ThinkingBlock):
        th = b.thinking
        out: dict[str, Any] = {**extra, "type": "thinking", "thinking": th.content}
        if th.signature is not None:
            out["thinkingSignature"] = th.signature
        if th.redacted:
            out["redacted"] = True
        return out
    if isinstance(b, ToolUseBlock):
        u = b.tool_use
        return {**extra, "type": "toolCall", "id": u.id, "name": u.name, "arguments": u.input}
    if isinstance(b, ImageBlock):
        src = b.image.source
        if src.type != "base64":  # pi holds inline images only
            return {"type": "text", "text": f"[image: {src.data}]"}
        return {**extra, "type": "image", "data": src.data, "mimeType": src.media_type}
    raise UserError("a pi message cannot hold a tool_result block inside another block")


# -- the format module contract --------------------------------------------------------------


def load(data: Source) -> list[Message]:
    """The messages pi's ``buildSessionContext`` gives for the current leaf of a session (a
    path, its text or bytes, or its entries as dicts), as threadline messages. A single pi
    message object (a dict, or a file holding one) gives that one message."""
    if isinstance(data, dict):
        if "role" not in data:
            raise UserError('a pi message needs a "role"; pass a session file for a session')
        return [message_from_pi(data)]
    if isinstance(data, (str, bytes, os.PathLike)):
        label = source_name(data)
        raw = read_bytes(data, label)
        doc, problem = decode_line(raw)
        if problem is None and isinstance(doc, dict) and "role" in doc:
            return [message_from_pi(doc, label)]
        data = raw
    (draft,) = parse(data)
    return messages_of(draft)


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import a pi session file as a new threadline session (one atomic write)."""
    (session,) = import_path(store, NAME, source, session_id=session_id)
    return session


__all__ = ["bash_text", "dump", "import_session", "load", "message_from_pi", "parse"]
