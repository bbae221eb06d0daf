"""Google Agent Development Kit (ADK) dumps: ``Session`` JSON and ``EvalSet`` files.

- A **session dump** (``{"id", "events": [...], ...}``) becomes one session. Each event becomes
  one entry, chained in event order, with the event ``id`` as entry id and its ``timestamp``.
  The event's ``content`` (google-genai ``Content``: ``role`` ``user``/``model`` and ``parts``)
  is read by :mod:`threadline.formats.gemini`, which also gives id-less function calls ids and
  pairs each ``function_response`` with its call by name. The event's other fields (``author``,
  the agent that spoke; ``invocation_id``; ``actions``/``options``…) are kept in the message's
  ``provider_details["google_adk"]``; an event without content becomes a ``custom`` entry
  ``google_adk:event``. The dump's other fields (state/``context``, ``current_agent_name``…) are
  kept in the session metadata.
- An **eval set** (``{"eval_set_id", "eval_cases": [...]}``) becomes one session per eval case:
  each invocation is its ``user_content`` and its ``final_response``. The recorded tool
  trajectory (``intermediate_data``: tool calls without their results) is what the evaluation
  expects, not a conversation, so it stays in the final response's ``provider_details``.

Null fields of google-genai dumps (every ``Part`` field is written, most as ``null``) are read
as absent, and a part whose fields are all null is no part.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from threadline.errors import UserError
from threadline.formats import gemini
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
from threadline.model.content import Message
from threadline.model.entries import (
    Custom,
    CustomEntry,
    MessageEntry,
    SessionInfo,
    SessionInfoEntry,
)

NAME = "google_adk"


def _iso(t: Any) -> str | None:
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return (
            datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return None


def _no_nulls(value: Any) -> Any:
    """``value`` without null fields; a part left empty (every field null) is dropped."""
    if isinstance(value, dict):
        out = {k: _no_nulls(v) for k, v in value.items() if v is not None}
        if isinstance(out.get("parts"), list):
            out["parts"] = [p for p in out["parts"] if p != {}]
        return out
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """A session dump as one draft, or an eval set as one draft per eval case."""
    label = source_name(source, name)
    doc = read_json(source, label)
    at(json_at())
    if isinstance(doc, dict) and isinstance(doc.get("events"), list):
        return [_session(doc, label)]
    if isinstance(doc, dict) and isinstance(doc.get("eval_cases"), list):
        return [_eval_case(doc, case, k, label) for k, case in enumerate(doc["eval_cases"])]
    raise bad(
        label,
        None,
        'not a Google ADK dump: expected a session ("events") or an eval set ("eval_cases")',
    )


def _contents_to_messages(
    contents: list[Any], label: str, places: list[tuple[int | str, ...]]
) -> list[Message | None]:
    """One message per content (None where a content yields none), read together so function
    responses pair with the calls of earlier contents. ``places`` are the contents' JSON paths
    (an error names the content it is about)."""
    cleaned = [_no_nulls(c) for c in contents]
    at(json_at(*places[0][:-2]) if places else json_at())
    try:
        loaded = gemini.load({"contents": [c for c in cleaned if c is not None]})
    except UserError as exc:
        raise bad(label, _culprit(cleaned, places), f"{exc}") from None
    if len(loaded) == sum(1 for c in cleaned if c is not None):
        it = iter(loaded)
        return [None if c is None else next(it) for c in cleaned]
    # a content that split into several messages: read each alone (call ids restart)
    out: list[Message | None] = []
    for c, place in zip(cleaned, places, strict=True):
        at(json_at(*place))
        msgs = gemini.load({"contents": [c]}) if c is not None else []
        out.append(msgs[0] if len(msgs) == 1 else None)
    return out


def _culprit(cleaned: list[Any], places: list[tuple[int | str, ...]]) -> str | None:
    """The path of the first content Gemini refuses on its own (None: only together)."""
    for c, place in zip(cleaned, places, strict=True):
        if c is None:
            continue
        try:
            gemini.load({"contents": [c]})
        except UserError:
            return json_at(*place)
    return None


def _session(doc: dict[str, Any], label: str) -> Draft:
    sid = doc.get("id")
    report = ImportReport(
        format=NAME, source=label, source_id=sid if isinstance(sid, str) else None
    )
    events = doc["events"]
    for k, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise bad(label, json_at("events", k), "the event is not an object")
    meta = {k: v for k, v in doc.items() if k != "events"}
    stamps = [t for t in (_iso(ev.get("timestamp")) for ev in events) if t]
    draft = Draft(
        report,
        source_id=report.source_id,
        metadata={"source": {"format": NAME, **meta}},
        created=min(stamps) if stamps else None,
    )
    contents = [
        ev.get("content")
        if isinstance(ev.get("content"), dict) and isinstance(ev["content"].get("parts"), list)
        else None
        for ev in events
    ]
    msgs = _contents_to_messages(
        contents, label, [("events", k, "content") for k in range(len(events))]
    )
    prev: str | None = None
    last_ts = draft.created or ""
    for k, (ev, msg) in enumerate(zip(events, msgs, strict=True)):
        at(json_at("events", k))
        ts = _iso(ev.get("timestamp")) or last_ts
        last_ts = ts
        eid = draft.unique_id(ev.get("id") if isinstance(ev.get("id"), str) else None)
        extras = {k: v for k, v in ev.items() if k not in ("id", "timestamp", "content")}
        if msg is None:
            prev = draft.add(
                CustomEntry(
                    id=eid,
                    parent_id=prev,
                    timestamp=ts,
                    custom=Custom(
                        custom_type=f"{NAME}:event", data={k: v for k, v in ev.items() if k != "id"}
                    ),
                )
            )
            continue
        details = dict(msg.provider_details or {})
        details[NAME] = extras
        msg.provider_details = details
        prev = draft.add(MessageEntry(id=eid, parent_id=prev, timestamp=ts, message=msg))
    return draft


def _eval_case(doc: dict[str, Any], case: Any, k: int, label: str) -> Draft:
    at(json_at("eval_cases", k))
    if not isinstance(case, dict) or not isinstance(case.get("conversation"), list):
        raise bad(label, None, 'the eval case has no "conversation" list')
    eid_ = case.get("eval_id")
    report = ImportReport(
        format=NAME, source=label, source_id=f"{doc.get('eval_set_id')}/{eid_}" if eid_ else None
    )
    meta = {key: v for key, v in doc.items() if key != "eval_cases"}
    case_meta = {key: v for key, v in case.items() if key != "conversation"}
    turns = case["conversation"]
    stamps = [
        t
        for t in (_iso(inv.get("creation_timestamp")) for inv in turns if isinstance(inv, dict))
        if t
    ]
    draft = Draft(
        report,
        metadata={"source": {"format": NAME, **meta, "eval_case": case_meta}},
        created=min(stamps) if stamps else _iso(doc.get("creation_timestamp")),
    )
    contents: list[Any] = []
    owners: list[tuple[dict[str, Any], str]] = []
    places: list[tuple[int | str, ...]] = []
    for n, inv in enumerate(turns):
        if not isinstance(inv, dict):
            raise bad(
                label, json_at("eval_cases", k, "conversation", n), "the turn is not an object"
            )
        for key in ("user_content", "final_response"):
            c = inv.get(key)
            if isinstance(c, dict) and isinstance(c.get("parts"), list):
                contents.append(c)
                owners.append((inv, key))
                places.append(("eval_cases", k, "conversation", n, key))
    msgs = _contents_to_messages(contents, label, places)
    prev: str | None = None
    last_ts = draft.created or ""
    for (inv, key), msg, place in zip(owners, msgs, places, strict=True):
        at(json_at(*place))
        ts = _iso(inv.get("creation_timestamp")) or last_ts
        last_ts = ts
        inv_id = inv.get("invocation_id")
        eid = draft.unique_id(f"{inv_id}:{key}" if isinstance(inv_id, str) else None)
        if msg is None:
            prev = draft.add(
                CustomEntry(
                    id=eid,
                    parent_id=prev,
                    timestamp=ts,
                    custom=Custom(custom_type=f"{NAME}:{key}", data=inv.get(key)),
                )
            )
            continue
        extras: dict[str, Any] = {"field": key}
        if key == "final_response":
            extras.update(
                {x: v for x, v in inv.items() if x not in ("user_content", "final_response")}
            )
        details = dict(msg.provider_details or {})
        details[NAME] = extras
        msg.provider_details = details
        prev = draft.add(MessageEntry(id=eid, parent_id=prev, timestamp=ts, message=msg))
    if isinstance(eid_, str) and eid_:
        draft.add(
            SessionInfoEntry(
                id=draft.unique_id(None),
                parent_id=prev,
                timestamp=last_ts,
                session_info=SessionInfo(name=eid_),
            )
        )
    return draft


def dump(messages: Sequence[Message]) -> dict[str, Any]:
    """A Google ADK session dump for ``messages``: ``{"id", "app_name", "user_id", "state",
    "events", "last_update_time"}`` with one event per message.

    Each event's ``content`` is the message as a google-genai ``Content``
    (:func:`threadline.formats.gemini.dump_content`: system, tool and summary messages become
    ``user`` content, other roles tagged user text). What ``load`` keeps in
    ``provider_details["google_adk"]`` (``author``, ``invocation_id``, ``actions``…) is written
    back into the event; a message without it gets ``author`` ``"user"`` or ``"model"`` (ADK
    requires one), which ``load`` then keeps there. Event ids are positions, timestamps count
    seconds from the epoch, the session id is derived from the messages. A ``tool`` message comes
    back as ``user`` (Gemini sends function responses as user content) and another provider's
    thinking without its signature.
    ``load(dump(load(f))) == load(f)`` for a session dump or an eval set (an eval case's fields
    ride along in the events).
    """
    names = {u.id: u.name for m in messages for u in m.tool_uses}
    events: list[dict[str, Any]] = []
    for m in messages:
        content = gemini.dump_content(m, names)
        if content is None:  # an empty message (an eval case's answer that was only calls)
            content = {"role": "user" if m.role == "user" else "model", "parts": []}
        extras = m.provider_details.get(NAME) if m.provider_details else None
        if not isinstance(extras, dict):
            extras = {"author": "model" if content.get("role") == "model" else "user"}
        events.append(
            {
                "id": position_uuid(len(events) + 1),
                "timestamp": float(len(events)),
                **extras,
                "content": content,
            }
        )
    return {
        "id": messages_uuid(messages),
        "app_name": "threadline",
        "user_id": "user",
        "state": {},
        "events": events,
        "last_update_time": float(len(events)),
    }


def load(data: Source) -> list[Message]:
    """The messages of a session dump (or of the first eval case of an eval set)."""
    drafts = parse(data)
    return messages_of(drafts[0])


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import a session dump (or a one-case eval set) as a new threadline session."""
    drafts = parse(source)
    if len(drafts) != 1:
        raise bad(
            source_name(source),
            None,
            f"holds {len(drafts)} eval cases; use import_sessions() to import them all",
        )
    (session,) = write(store, drafts, [session_id])
    return session


def import_sessions(store: Any, source: Source) -> list[Any]:
    """Import every session of the file (all or nothing)."""
    return write(store, parse(source))


__all__ = ["dump", "import_session", "import_sessions", "load", "parse"]
