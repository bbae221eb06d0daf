"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is a record. Records with a ``uuid`` form a tree through ``parentUuid``; a file often
has several roots (a resumed or cleared conversation, a compaction, subagent sidechains). The
importer keeps that tree: one threadline entry per record, with the record's ``uuid`` as the
entry id, its parent and its timestamp.

- ``user`` / ``assistant`` records → ``user`` / ``assistant`` messages (content blocks read as
  Anthropic blocks: text, images, ``tool_use``, ``tool_result`` with text or image content,
  ``thinking`` with its signature, ``redacted_thinking``). Claude Code writes one record per
  content block of a streamed reply, so one reply is several consecutive assistant entries; the
  provider formats merge them back into one turn. The Messages API fields of the reply (``id``,
  ``usage`` beyond the token counts, ``stop_sequence``…) and the record's own fields
  (``sessionId``, ``cwd``, ``gitBranch``, ``toolUseResult``, ``isMeta``…) are kept in
  ``provider_details["claude_code"]``; blocks threadline has no type for are kept there too, under
  ``"blocks"`` as ``[index, block]`` pairs.
- A ``compact_boundary`` system record → a ``compaction`` entry placed under the record it
  continues (``logicalParentUuid``). Its summary is the text of the ``isCompactSummary`` user
  record that follows it, which becomes a ``custom`` entry (``claude_code:compact_summary``) so the
  summary is not shown twice.
- Sidechains (``isSidechain``: a subagent's conversation) are kept apart in the same session: a
  sidechain record whose parent is on the main conversation becomes a root of its own (the
  original parent is kept in ``provider_details["claude_code"]["parentUuid"]``), so a sidechain is
  never on the main path. Parallel tool calls fork Claude Code's tree (each result's parent is
  its own call's record); a result whose parent already has a continuation is attached to the end
  of that continuation instead, or just before the next reply when that reply was written before
  the result (the original parents are kept in ``provider_details["claude_code"]["parentUuid"]``),
  so the main path holds every call followed by its result, as the API received them. The leaf
  is the last main-conversation message of the file (the last message when the file holds only
  a sidechain, as ``subagents/agent-*.jsonl`` files do).
- Every other record (``progress``, ``attachment``, other ``system`` subtypes, and records
  without ``uuid`` such as ``summary``, ``file-history-snapshot``, ``queue-operation``) → a
  ``custom`` entry of type ``claude_code:<type>`` holding the whole record, so nothing is lost;
  records without ``uuid`` become roots. The session name comes from ``custom-title``, else a
  ``summary`` whose ``leafUuid`` is in the file, else ``ai-title`` (a ``session_info`` entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadline.formats import anthropic
from threadline.formats._common import (
    EPOCH,
    WRAPPED_ROLES,
    place_foreign,
    position_uuid,
    wrap,
)
from threadline.importing import (
    Draft,
    ImportReport,
    Source,
    at,
    bad,
    decode_line,
    iter_lines,
    messages_of,
    source_name,
    write,
)
from threadline.model.content import Block, Message, TextBlock, Usage, text
from threadline.model.entries import (
    Compaction,
    CompactionEntry,
    Custom,
    CustomEntry,
    KnownRecord,
    MessageEntry,
    SessionInfo,
    SessionInfoEntry,
)

NAME = "claude_code"
_ENVELOPE = frozenset({"uuid", "parentUuid", "timestamp", "type"})


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """The conversation tree in a Claude Code ``.jsonl`` transcript as one draft."""
    label = source_name(source, name)
    report = ImportReport(format=NAME, source=label)
    rows: list[tuple[int, Any, str | None]] = []
    for n, line in _numbered(source, label):
        obj, problem = decode_line(line) if isinstance(line, bytes) else (line, None)
        if problem is None and not isinstance(obj, dict):
            problem = "a Claude Code record must be a JSON object"
        rows.append((n, obj if problem is None else line, problem))
    good = [(n, o) for n, o, p in rows if p is None]
    if not good:
        if not rows:
            raise bad(label, None, "the file is empty; no Claude Code records in it")
        first, last = rows[0][0], rows[-1][0]
        raise bad(
            label,
            first if first == last else f"lines {first}-{last}",
            "no Claude Code records in them (each line must be a JSON object)",
        )
    if not any(
        isinstance(o.get("type"), str) and ("uuid" in o or o.get("type") == "summary")
        for _, o in good
    ):
        n0 = good[0][0]
        raise bad(label, n0, 'not a Claude Code transcript: no record has a "uuid" and a "type"')
    return [_build(rows, report, label)]


def _numbered(source: Source, label: str) -> Any:
    if isinstance(source, (list, tuple)):
        return enumerate(source, 1)
    return iter_lines(source, label)


def _build(rows: list[tuple[int, Any, str | None]], report: ImportReport, label: str) -> Draft:
    good = [(n, o) for n, o, p in rows if p is None]
    uuids = {o["uuid"] for _, o in good if isinstance(o.get("uuid"), str)}
    side = {o["uuid"] for _, o in good if isinstance(o.get("uuid"), str) and o.get("isSidechain")}
    summary_of: dict[str, str] = {}  # compact boundary uuid -> its summary record's uuid
    for _, o in good:
        uid = o.get("uuid")
        if o.get("isCompactSummary") and isinstance(o.get("parentUuid"), str):
            summary_of.setdefault(o["parentUuid"], uid if isinstance(uid, str) else "")
    compact_summaries = set(summary_of.values())
    texts = {
        o["uuid"]: _message_text(o)
        for _, o in good
        if isinstance(o.get("uuid"), str) and o["uuid"] in compact_summaries
    }

    first: dict[str, Any] = next((o for _, o in good if isinstance(o.get("sessionId"), str)), {})
    stamps = [o["timestamp"] for _, o in good if isinstance(o.get("timestamp"), str)]
    draft = Draft(
        report,
        source_id=first.get("sessionId"),
        cwd=first.get("cwd"),
        metadata={"source": {"format": NAME}},
        created=min(stamps) if stamps else None,
        hold=True,  # parallel tool results re-parent records already added (_move_under)
    )
    report.source_id = draft.source_id
    fallback_ts = draft.created or ""
    main_leaf: str | None = None
    any_leaf: str | None = None
    names: dict[str, str] = {}
    last_child: dict[str, str] = {}
    by_id: dict[str, KnownRecord] = {}
    role_of: dict[str, str] = {}
    before: KnownRecord | None = None
    for n, obj, problem in rows:
        at(n)
        if problem is not None:
            draft.add_corrupt_line(n, obj, problem, None, fallback_ts)
            continue
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise bad(label, n, 'a Claude Code record needs a string "type"')
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) else fallback_ts
        uid = obj.get("uuid")
        if (
            kind == "summary"
            and isinstance(obj.get("summary"), str)
            and obj.get("leafUuid") in uuids
        ):
            names.setdefault("summary", obj["summary"])
        elif kind == "custom-title" and isinstance(obj.get("customTitle"), str):
            names["custom"] = obj["customTitle"]
        elif kind == "ai-title" and isinstance(obj.get("aiTitle"), str):
            names["ai"] = obj["aiTitle"]
        if not isinstance(uid, str) or not uid:
            eid = draft.unique_id(None)
            draft.add(
                CustomEntry(
                    id=eid,
                    parent_id=None,
                    timestamp=ts,
                    custom=Custom(custom_type=f"{NAME}:{kind}", data=obj),
                )
            )
            continue
        eid = draft.unique_id(uid, n)
        parent = obj.get("parentUuid")
        moved: dict[str, Any] = {}
        if kind == "system" and obj.get("subtype") == "compact_boundary" and parent is None:
            logical = obj.get("logicalParentUuid")
            if isinstance(logical, str) and logical in uuids:
                parent = logical
        if not isinstance(parent, str) or not parent:
            parent = None
        elif parent not in uuids:
            report.warn(
                f"line {n}: parent {parent!r} of {uid!r} is not in the file; the entry "
                "becomes a root"
            )
            moved["parentUuid"] = parent
            parent = None
        elif uid in side and parent not in side:
            moved["parentUuid"] = parent  # a sidechain starts its own subtree
            parent = None
        elif parent in last_child and _is_tool_result(obj):
            # Parallel tool calls: each result names its own call's record as parent, which
            # forks the tree at every call. The conversation goes on after the last of them,
            # so a result joins the end of what already follows its parent, or, when the next
            # reply was written before this result, goes just before that reply.
            tip = _tip(last_child, parent)
            if tip != parent:
                moved["parentUuid"] = parent
                late = _reply_after_results(by_id, role_of, parent, tip)
                if late is None:
                    parent = tip
                else:
                    parent = late.parent_id
                    before = late
        if parent is not None:
            last_child[parent] = eid
        record = _record(
            obj, kind, eid, parent, ts, label, n, moved, summary_of, texts, compact_summaries
        )
        draft.add(record)
        by_id[eid] = record
        role_of[eid] = (
            "result" if _is_tool_result(obj) else kind if record.type == "message" else "other"
        )
        if before is not None:
            _move_under(before, eid)
            last_child[eid] = before.id
            before = None
        if record.type == "message":
            any_leaf = eid
            if uid not in side:
                main_leaf = eid
    name = names.get("custom") or names.get("summary") or names.get("ai")
    if name:
        draft.add(
            SessionInfoEntry(
                id=draft.unique_id(None),
                parent_id=None,
                timestamp=fallback_ts,
                session_info=SessionInfo(name=name),
            )
        )
    draft.leaf = main_leaf or any_leaf
    return draft


def _is_tool_result(obj: dict[str, Any]) -> bool:
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    return (
        obj.get("type") == "user"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _reply_after_results(
    by_id: dict[str, KnownRecord], role_of: dict[str, str], call: str, tip: str, limit: int = 1000
) -> KnownRecord | None:
    """The first assistant record after a tool result on the chain from ``call`` to ``tip``."""
    chain: list[str] = []
    cur: str | None = tip
    while cur is not None and cur != call and len(chain) < limit:
        chain.append(cur)
        cur = by_id[cur].parent_id if cur in by_id else None
    if cur != call:
        return None
    seen_result = False
    for eid in reversed(chain):
        role = role_of.get(eid)
        if role == "result":
            seen_result = True
        elif role == "assistant" and seen_result:
            return by_id[eid]
    return None


def _move_under(record: KnownRecord, parent: str) -> None:
    """Re-parent an already built record, keeping its original parent in its details."""
    original = record.parent_id
    record.parent_id = parent
    if isinstance(record, MessageEntry):
        pd = dict(record.message.provider_details or {})
        mine = dict(pd.get(NAME) or {})
        mine.setdefault("parentUuid", original)
        pd[NAME] = mine
        record.message.provider_details = pd


def _tip(last_child: dict[str, str], start: str, limit: int = 1000) -> str:
    """The latest record reached by following last children from ``start``."""
    cur = start
    for _ in range(limit):
        nxt = last_child.get(cur)
        if nxt is None:
            return cur
        cur = nxt
    return start  # a long continuation: not a parallel-call fork, leave the parent alone


def _message_text(obj: dict[str, Any]) -> str:
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _record(
    obj: dict[str, Any],
    kind: str,
    eid: str,
    parent: str | None,
    ts: str,
    label: str,
    n: int,
    moved: dict[str, Any],
    summary_of: dict[str, str],
    texts: dict[str, str],
    compact_summaries: set[str],
) -> KnownRecord:
    env: dict[str, Any] = {"id": eid, "parent_id": parent, "timestamp": ts}
    uid = obj.get("uuid")
    if kind in ("user", "assistant") and uid not in compact_summaries:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise bad(label, n, f'a Claude Code {kind} record needs a "message" object')
        extras = {k: v for k, v in obj.items() if k not in _ENVELOPE and k != "message"}
        extras.update(moved)
        return MessageEntry(**env, message=message_from_record(msg, kind, extras, label, n))
    if kind == "system" and obj.get("subtype") == "compact_boundary":
        meta = obj.get("compactMetadata")
        tokens = meta.get("preTokens", 0) if isinstance(meta, dict) else 0
        summary_id = summary_of.get(str(uid))
        summary = texts.get(summary_id, "") if summary_id else ""
        if not summary:
            content = obj.get("content")
            summary = content if isinstance(content, str) else ""
        return CompactionEntry(
            **env,
            compaction=Compaction(
                summary=summary,
                first_kept_entry_id=None,
                tokens_before=tokens if isinstance(tokens, int) else 0,
                details={NAME: {**{k: v for k, v in obj.items() if k not in _ENVELOPE}, **moved}},
            ),
        )
    data = {k: v for k, v in obj.items() if k not in ("uuid", "parentUuid")}
    data.update(moved)
    custom_type = (
        f"{NAME}:compact_summary"
        if uid in compact_summaries
        else f"{NAME}:system:{obj.get('subtype')}"
        if kind == "system"
        else f"{NAME}:{kind}"
    )
    return CustomEntry(**env, custom=Custom(custom_type=custom_type, data=data))


def message_from_record(
    msg: dict[str, Any],
    role: str,
    extras: dict[str, Any],
    label: str = "<data>",
    n: int | None = None,
) -> Message:
    """The ``message`` of a user or assistant record as a threadline :class:`Message`."""
    content = msg.get("content", "")
    blocks: list[Block] = []
    foreign: list[list[Any]] = []
    if isinstance(content, str):
        blocks.append(text(content))
    elif isinstance(content, list):
        for k, b in enumerate(content):
            if not isinstance(b, dict):
                raise bad(label, n, f"content block {k} is not an object")
            loaded = anthropic.load_block(b, f"line {n} content[{k}]")
            if loaded is None:
                foreign.append([k, b])
            else:
                blocks.append(loaded)
    else:
        raise bad(label, n, "message content must be a string or a list of blocks")
    api = {
        k: v
        for k, v in msg.items()
        if k not in ("role", "content", "model", "stop_reason", "usage")
    }
    usage = msg.get("usage")
    u: Usage | None = None
    if isinstance(usage, dict):
        u = Usage(
            input=_int(usage.get("input_tokens")),
            output=_int(usage.get("output_tokens")),
            cache_read=_int(usage.get("cache_read_input_tokens")),
            cache_write=_int(usage.get("cache_creation_input_tokens")),
        )
        u.total = u.input + u.output + u.cache_read + u.cache_write
        api["usage"] = usage
    details = dict(extras)
    if api:
        details["message"] = api
    if foreign:
        details["blocks"] = foreign
    model, stop = msg.get("model"), msg.get("stop_reason")
    return Message(
        role=role,
        content=blocks,
        model=model if isinstance(model, str) else None,
        usage=u,
        stop_reason=stop if isinstance(stop, str) else None,
        provider_details={NAME: details} if details else None,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- dump -----------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A Claude Code transcript for ``messages``: its records as dicts (write each as one JSON
    line to get the ``.jsonl`` file), one ``user`` or ``assistant`` record per message chained
    by ``uuid``/``parentUuid``, each ``message`` in Anthropic shape
    (:func:`threadline.formats.anthropic.dump_block`).

    What ``load`` keeps in ``provider_details["claude_code"]`` (``sessionId``, ``cwd``, the
    API's ``id`` and raw ``usage``, a tool result's original ``parentUuid``…) is written back, so
    ``load(dump(load(f))) == load(f)`` for a transcript. Uuids are positions, except that the
    record of a call whose result names its original parent takes that uuid again, so the result
    can name it, and a ``progress`` record (``data.type`` ``threadline_placeholder``) stands for
    what Claude Code wrote between a call and its result when ``load`` moved that result (its
    details name the original parent); timestamps are
    :data:`~threadline.formats._common.EPOCH`. A leading
    ``compactionSummary`` becomes Claude Code's compact boundary and summary records. Claude
    Code has no place for a few things, which come back changed: a ``tool`` message comes back as
    a ``user`` message (Claude Code's tool results are user records); ``system``, ``custom``,
    ``bashExecution``, ``branchSummary`` and a later ``compactionSummary`` come back as ``user``
    messages holding their text in a tag (``<system_message>…``); usage without the raw API usage
    comes back with it in the details and ``total`` recomputed.
    """
    call_owner = {u.id: k for k, m in enumerate(messages) for u in m.tool_uses}
    uuids = [position_uuid(k + 1) for k in range(len(messages))]
    original = [_mine(m).get("parentUuid") for m in messages]
    for k, m in enumerate(messages):
        result = next(iter(m.tool_results), None)
        if (
            isinstance(original[k], str)
            and result is not None
            and call_owner.get(result.tool_use_id, k) < k
        ):
            uuids[call_owner[result.tool_use_id]] = str(original[k])
    # A reply Claude Code wrote before the last result of its parallel calls: load put that
    # result before it and kept the reply's own parent (the record before the result). Writing
    # the reply first, under that record, makes load do the same again.
    late = {
        k
        for k in range(2, len(messages))
        if isinstance(original[k], str)
        and not messages[k].tool_results
        and isinstance(original[k - 1], str)
        and messages[k - 1].tool_results
        and uuids[k - 2] == position_uuid(k - 1)
    }
    for k in late:
        uuids[k - 2] = str(original[k])
    known = set(uuids)
    order = []
    for k in range(len(messages)):
        if k in late:
            continue
        if k + 1 in late:
            order.append(k + 1)
        order.append(k)
    records: list[dict[str, Any]] = []
    for k in order:
        m = messages[k]
        uid = uuids[k]
        if m.role == "compactionSummary" and k == 0 and _plain_text(m) is not None:
            boundary = position_uuid(len(messages) + 1)
            records.append(
                {
                    "type": "system",
                    "subtype": "compact_boundary",
                    "uuid": boundary,
                    "parentUuid": None,
                    "timestamp": EPOCH,
                    "content": "Conversation compacted",
                    "compactMetadata": {"trigger": "manual", "preTokens": 0},
                }
            )
            records.append(
                {
                    "type": "user",
                    "uuid": uid,
                    "parentUuid": boundary,
                    "timestamp": EPOCH,
                    "isCompactSummary": True,
                    "message": {"role": "user", "content": _plain_text(m)},
                }
            )
            continue
        mine = _mine(m)
        moved = mine.pop("parentUuid", None)
        link = uuids[k - 1] if k else None
        if isinstance(moved, str) and (k == 0 or k in late or (moved in known and m.tool_results)):
            # load moves the record back under ``link`` and keeps ``moved`` in its details
            if m.tool_results and k and uuids[k - 1] == moved:
                # load moved it because its call had another child (a progress record)
                records.append(
                    {
                        "type": "progress",
                        "uuid": position_uuid(len(messages) + 2 + k),
                        "parentUuid": moved,
                        "timestamp": EPOCH,
                        "data": {"type": "threadline_placeholder"},
                    }
                )
            link = moved
        records.append(
            {
                **mine,
                "type": "assistant" if m.role == "assistant" else "user",
                "uuid": uid,
                "parentUuid": link,
                "timestamp": EPOCH,
                "message": _api_message(m, mine),
            }
        )
    return records


def _mine(m: Message) -> dict[str, Any]:
    found = m.provider_details.get(NAME) if m.provider_details else None
    return dict(found) if isinstance(found, dict) else {}


def _plain_text(m: Message) -> str | None:
    if (
        len(m.content) == 1
        and isinstance(m.content[0], TextBlock)
        and not m.content[0].provider_details
    ):
        return m.content[0].text.content
    return None


def _api_message(m: Message, mine: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic ``message`` of a record (pops the record's message details from
    ``mine``)."""
    api = dict(mine.pop("message", None) or {})
    foreign = mine.pop("blocks", None)
    role = "assistant" if m.role == "assistant" else "user"
    blocks = (
        m.content
        if m.role in ("user", "assistant", "tool")
        else wrap(m, WRAPPED_ROLES.get(m.role, "custom_message"))
    )
    out: dict[str, Any] = {**api, "role": role}
    single = _plain_text(Message(role=role, content=list(blocks)))
    if role == "user" and single is not None and not foreign:
        out["content"] = single
    else:
        out["content"] = place_foreign([anthropic.dump_block(b) for b in blocks], foreign)
    if m.model is not None:
        out["model"] = m.model
    if m.stop_reason is not None:
        out["stop_reason"] = m.stop_reason
    if m.usage is not None and "usage" not in api:
        u = m.usage
        out["usage"] = {
            "input_tokens": u.input,
            "output_tokens": u.output,
            "cache_read_input_tokens": u.cache_read,
            "cache_creation_input_tokens": u.cache_write,
        }
    return out


def load(data: Source) -> list[Message]:
    """The messages of the transcript's main conversation at its last message."""
    (draft,) = parse(data)
    return messages_of(draft)


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import a Claude Code transcript as a new threadline session (one atomic write)."""
    (draft,) = parse(source)
    (session,) = write(store, [draft], [session_id])
    return session


__all__ = ["dump", "import_session", "load", "message_from_record", "parse"]
