"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

A rollout is linear: one ``{"timestamp", "type", "payload"}`` line per event. What the model saw
is the ``response_item`` lines, Responses API items; they are read by
:mod:`threadline.formats.openai_responses` (one message per item, item leftovers in
``provider_details["openai_responses"]``). Codex's freeform tools (``custom_tool_call`` and
``custom_tool_call_output``, e.g. ``apply_patch``) become a ``tool_use`` (input
``{"input": <text>}``) and its ``tool_result``.

Each line becomes one entry, chained in file order with the id ``L<line>``:

- ``response_item`` → a message (an item the Responses reader cannot take becomes a ``custom``
  entry ``codex:response_item`` and is reported);
- ``compacted`` → a ``compaction`` entry whose summary is the payload's ``message``, followed by
  the ``replacement_history`` items as messages (ids ``L<line>.<k>``): Codex replaces the history
  with them, and threadline shows the summary and then what follows the compaction;
- ``turn_context`` → a ``custom`` entry, plus a ``model_change`` when the model changes;
- ``session_meta``, ``event_msg`` (what the UI showed: user_message, agent_message,
  exec_command_end, token_count…), ``world_state`` and unknown types → ``custom`` entries
  ``codex:<type>`` holding the payload. ``thread_name_updated`` also names the session.

The session id is the first ``session_meta`` id; the leaf is the last line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from threadline.errors import UserError
from threadline.formats import openai_responses
from threadline.formats._common import EPOCH, details, messages_uuid
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
from threadline.model.content import (
    Message,
    ToolResultBlock,
    ToolUseBlock,
    tool_result,
    tool_use,
)
from threadline.model.entries import (
    Compaction,
    CompactionEntry,
    Custom,
    CustomEntry,
    MessageEntry,
    ModelChange,
    ModelChangeEntry,
    SessionInfo,
    SessionInfoEntry,
)

NAME = "codex"


def _rows(source: Source, label: str) -> Iterator[tuple[int, Any, str | None]]:
    """``(line, entry, None)`` for good lines, ``(line, raw bytes, problem)`` for damaged ones."""
    for n, line in iter_lines(source, label):
        obj, problem = decode_line(line)
        if problem is None and not (isinstance(obj, dict) and isinstance(obj.get("type"), str)):
            problem = 'a rollout line must be an object with a string "type"'
        yield n, obj if problem is None else line, problem


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """The rollout in a Codex ``.jsonl`` file as one draft, read twice line by line (the
    first time for its ``session_meta``), never held whole."""
    label = source_name(source, name)
    report = ImportReport(format=NAME, source=label)
    # first pass: is it a rollout, and its session_meta (the header fields and the provider
    # come from it); nothing else is kept, the second pass converts line by line
    first: int | None = None
    last: int | None = None
    rollout = False
    meta: dict[str, Any] | None = None
    for n, obj, problem in _rows(source, label):
        first = n if first is None else first
        last = n
        if problem is None:
            rollout = rollout or obj["type"] in ("session_meta", "response_item")
            if meta is None and obj["type"] == "session_meta":
                payload = obj.get("payload")
                meta = payload if isinstance(payload, dict) else None
        if rollout and meta is not None:
            break
    if not rollout:
        if first is None or last is None:
            raise bad(label, None, "the file is empty; not a Codex rollout")
        raise bad(
            label,
            first if first == last else f"lines {first}-{last}",
            "not a Codex rollout: no session_meta or response_item line",
        )
    meta = meta or {}
    sid = meta.get("id") or meta.get("session_id")
    draft = Draft(
        report,
        source_id=sid if isinstance(sid, str) else None,
        cwd=meta.get("cwd") if isinstance(meta.get("cwd"), str) else None,
        metadata={"source": {"format": NAME}},
        created=meta.get("timestamp") if isinstance(meta.get("timestamp"), str) else None,
    )
    report.source_id = draft.source_id
    provider = str(meta.get("model_provider") or "openai")
    prev: str | None = None
    model: str | None = None
    name_: str | None = None
    last_ts = draft.created or ""
    for n, obj, problem in _rows(source, label):
        at(n)
        if problem is not None:
            prev = draft.add_corrupt_line(n, obj, problem, prev, last_ts)
            continue
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) else last_ts
        last_ts = ts
        kind = obj["type"]
        payload = obj.get("payload")
        eid = draft.unique_id(f"L{n}", n)
        env: dict[str, Any] = {"id": eid, "parent_id": prev, "timestamp": ts}
        if kind == "response_item" and isinstance(payload, dict):
            msgs = _messages(payload, report, n)
            if msgs is None:
                prev = draft.add(
                    CustomEntry(
                        **env, custom=Custom(custom_type=f"{NAME}:response_item", data=payload)
                    )
                )
                continue
            prev = _chain(draft, msgs, env)
            continue
        if kind == "compacted" and isinstance(payload, dict):
            summary = payload.get("message")
            rest = {k: v for k, v in payload.items() if k not in ("message", "replacement_history")}
            prev = draft.add(
                CompactionEntry(
                    **env,
                    compaction=Compaction(
                        summary=summary if isinstance(summary, str) else "",
                        first_kept_entry_id=None,
                        details={NAME: rest} if rest else None,
                    ),
                )
            )
            for k, item in enumerate(payload.get("replacement_history") or [], 1):
                if not isinstance(item, dict):
                    raise bad(label, n, f"replacement_history[{k - 1}] is not an object")
                msgs = _messages(item, report, n)
                env = {"id": draft.unique_id(f"L{n}.{k}", n), "parent_id": prev, "timestamp": ts}
                if msgs is None:
                    prev = draft.add(
                        CustomEntry(
                            **env, custom=Custom(custom_type=f"{NAME}:response_item", data=item)
                        )
                    )
                else:
                    prev = _chain(draft, msgs, env)
            continue
        sub = payload.get("type") if isinstance(payload, dict) else None
        custom_type = f"{NAME}:{kind}:{sub}" if kind == "event_msg" and sub else f"{NAME}:{kind}"
        prev = draft.add(CustomEntry(**env, custom=Custom(custom_type=custom_type, data=payload)))
        if kind == "turn_context" and isinstance(payload, dict):
            m = payload.get("model")
            if isinstance(m, str) and m != model:
                model = m
                prev = draft.add(
                    ModelChangeEntry(
                        id=draft.unique_id(f"L{n}.model", n),
                        parent_id=prev,
                        timestamp=ts,
                        model_change=ModelChange(provider=provider, model_id=m),
                    )
                )
        if sub == "thread_name_updated" and isinstance(payload, dict):
            t = payload.get("thread_name") or payload.get("name")
            if isinstance(t, str) and t:
                name_ = t
    if name_:
        prev = draft.add(
            SessionInfoEntry(
                id=draft.unique_id(None),
                parent_id=prev,
                timestamp=last_ts,
                session_info=SessionInfo(name=name_),
            )
        )
    return [draft]


def _chain(draft: Draft, msgs: list[Message], env: dict[str, Any]) -> str:
    """Add one or more messages from one item under ``env``'s parent; returns the last id."""
    prev = env["parent_id"]
    for k, m in enumerate(msgs):
        eid = env["id"] if k == 0 else draft.unique_id(f"{env['id']}.{k}")
        prev = draft.add(
            MessageEntry(id=eid, parent_id=prev, timestamp=env["timestamp"], message=m)
        )
    return str(prev)


def _messages(item: dict[str, Any], report: ImportReport, n: int) -> list[Message] | None:
    kind = item.get("type")
    if kind == "custom_tool_call" and isinstance(item.get("call_id"), str):
        rest = {k: v for k, v in item.items() if k not in ("type", "call_id", "name", "input")}
        block = tool_use(item["call_id"], str(item.get("name", "")), {"input": item.get("input")})
        block.provider_details = {NAME: {"type": kind, **rest}}
        return [Message(role="assistant", content=[block])]
    if (
        kind in ("custom_tool_call_output", "function_call_output")
        and isinstance(item.get("call_id"), str)
        and not isinstance(item.get("output"), (str, list))
    ):
        # an output Codex stored as an object: its JSON text is what the tool returned
        out = item.get("output")
        rest = {k: v for k, v in item.items() if k not in ("type", "call_id", "output")}
        result = tool_result(item["call_id"], json.dumps(out, ensure_ascii=False))
        result.provider_details = {NAME: {"type": kind, "output": out, **rest}}
        return [Message(role="tool", content=[result])]
    if kind == "custom_tool_call_output" and isinstance(item.get("call_id"), str):
        out = item["output"]
        rest = {k: v for k, v in item.items() if k not in ("type", "call_id", "output")}
        if isinstance(out, list):
            texts = [
                p.get("text", "")
                for p in out
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            result = tool_result(item["call_id"], "\n".join(texts))
            rest["output"] = out
        else:
            result = tool_result(item["call_id"], out)
        result.provider_details = {NAME: {"type": kind, **rest}}
        return [Message(role="tool", content=[result])]
    try:
        msgs = openai_responses.load([item])
    except UserError as exc:
        report.warn(f"line {n}: a {kind} item was kept as a custom entry ({exc})")
        return None
    return msgs or None


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A Codex rollout for ``messages``: its lines as dicts (write each as one JSON line), a
    ``session_meta`` line and then one ``response_item`` line per Responses item.

    Items come from :func:`threadline.formats.openai_responses.dump`, one message at a time, so
    roles the Responses API has no slot for travel as tagged user text, as there; a tool call or
    output ``load`` read from a ``custom_tool_call`` item is written as one again. The session id
    is derived from the messages and every timestamp is
    :data:`~threadline.formats._common.EPOCH`. ``load(dump(load(f))) == load(f)`` for a rollout;
    a message the Responses API holds as several items (an assistant reply with reasoning, text
    and calls) comes back as one message per item, thinking from another provider comes back
    unsigned (it travels as ``<think>`` text), and a message with nothing for the Responses API
    (no content, no details) is left out.
    """
    sid = messages_uuid(messages)
    lines: list[dict[str, Any]] = [
        {"timestamp": EPOCH, "type": "session_meta", "payload": {"id": sid, "timestamp": EPOCH}}
    ]
    for m in messages:
        for item in _items(m):
            lines.append({"timestamp": EPOCH, "type": "response_item", "payload": item})
    return lines


def _items(m: Message) -> list[dict[str, Any]]:
    if len(m.content) == 1 and not m.provider_details:
        b = m.content[0]
        mine = details(b, NAME)
        kind = mine.pop("type", None)
        if isinstance(b, ToolUseBlock) and kind == "custom_tool_call" and m.role == "assistant":
            u = b.tool_use
            value = u.input.get("input") if isinstance(u.input, dict) else None
            return [{"type": kind, **mine, "call_id": u.id, "name": u.name, "input": value}]
        if (
            isinstance(b, ToolResultBlock)
            and m.role == "tool"
            and kind in ("custom_tool_call_output", "function_call_output")
        ):
            r = b.tool_result
            # "output" in the details is the original output (an object, or a list of parts)
            return [{"type": kind, "call_id": r.tool_use_id, "output": r.content, **mine}]
    return openai_responses.shape([m])


def load(data: Source) -> list[Message]:
    """The messages of a rollout as the model last saw them (after the latest compaction)."""
    (draft,) = parse(data)
    return messages_of(draft)


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import a Codex rollout as a new threadline session (one atomic write)."""
    (draft,) = parse(source)
    (session,) = write(store, [draft], [session_id])
    return session


__all__ = ["dump", "import_session", "load", "parse"]
