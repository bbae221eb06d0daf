"""Google ADK sessions stored in threadline: :class:`ThreadlineSessionService`.

``ThreadlineSessionService(store=…)`` is an ADK ``BaseSessionService`` over any threadline store
(``Runner(agent=…, app_name=…, session_service=ThreadlineSessionService(store))``).

How an ADK session is kept (docs/integrations.md):

- one threadline session per ADK session, with the id ``adk-`` + 40 hex digits of the SHA-256 of
  ``app_name``, ``user_id`` and the ADK session id (ADK ids are only unique per app and user;
  :meth:`ThreadlineSessionService.threadline_id` gives it), named ``app/user/session``;
- an event with content is a message entry (its content read by :mod:`threadline.formats.gemini`,
  so every other adapter and provider format reads it), the whole event kept in
  ``provider_details["google_adk"]["event"]`` so ``get_session`` gives back the very same event;
  an event without content is a ``custom`` entry ``google_adk:event``;
- session state is the initial state (a ``custom`` entry ``google_adk:state``) plus the state
  deltas of the events on the current branch: undoing or branching the conversation in
  threadline also rolls its state back;
- ``app:`` and ``user:`` state live in one small threadline session per app and per app and
  user (``adk-app-…``, ``adk-user-…``), which also list the app's users and the user's sessions;
- ``temp:`` state is never stored (ADK's rule); ``delete_session`` deletes the threadline session;
- each entry of a recently read session is decoded once (its event, state delta, tool names:
  kept for the last ``DECODED_SESSIONS`` sessions read); a read walks
  the current branch and returns copies of the events, as ADK's own services do (shared, under
  ADK's ``IN_MEMORY_SESSION_SERVICE_LIGHT_COPY`` feature, as ADK's in-memory service shares them).

Events on the current branch are the session's events: ``threadline undo``/``branch`` change
them; compaction and context operations change what a provider payload built by threadline
holds, not ADK's event list (ADK compacts its events itself).
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.formats import gemini
from threadline.integrations._common import close_store, missing_extra, resolve_store, scoped_id
from threadline.model.content import Message, ToolUseBlock
from threadline.model.entries import Custom, CustomEntry, MessageEntry
from threadline.store.base import bulk_load

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events import Event
    from google.adk.features import FeatureName, is_feature_enabled
    from google.adk.sessions import BaseSessionService, Session
    from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
    from google.adk.sessions.state import State
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("Google ADK", "adk", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session as TlSession
    from threadline.stores import Store

__all__ = ["ThreadlineSessionService"]

NAME = "google_adk"
DECODED_SESSIONS = 16  # sessions whose decoded events a service keeps (least recently read out)
STATE = "google_adk:state"
EVENT = "google_adk:event"
MEMBER = "google_adk:member"
_STALE = (
    "The session has been modified in storage since it was loaded; get_session() it "
    "again before appending more events"
)


class ThreadlineSessionService(BaseSessionService):
    """An ADK session service over a threadline store (``None``: the default store, a URL or
    path, or a Store). Sessions stay open (holding their writer lock once written) until
    :meth:`close`."""

    def __init__(self, store: Store | str | os.PathLike[str] | None = None) -> None:
        self._store, self._owned = resolve_store(store)
        self._open: dict[str, TlSession] = {}
        # the stored last update time of each open session (a stale copy is refused by it)
        self._updated: dict[str, float] = {}
        # what each entry of a recently read session means to ADK, decoded once (see _Item);
        # the least recently read sessions' are dropped past DECODED_SESSIONS (memory: about
        # 5 KB an event)
        self._items: OrderedDict[str, dict[str, _Item]] = OrderedDict()
        self._lock = threading.RLock()

    # -- ids ---------------------------------------------------------------------------------

    @staticmethod
    def threadline_id(app_name: str, user_id: str, session_id: str) -> str:
        """The threadline session id of an ADK session (``threadline show`` takes it)."""
        return scoped_id("adk", app_name, user_id, session_id)

    # -- lifecycle ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Release every session this service opened (and the store, when it opened it)."""
        with self._lock:
            for s in self._open.values():
                s.close()
            self._open.clear()
            self._updated.clear()
            self._items.clear()
            if self._owned:
                close_store(self._store)

    async def __aenter__(self) -> ThreadlineSessionService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- BaseSessionService --------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await asyncio.to_thread(self._create, app_name, user_id, state or {}, session_id)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await asyncio.to_thread(self._get, app_name, user_id, session_id, config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        return await asyncio.to_thread(self._list, app_name, user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await asyncio.to_thread(self._delete, app_name, user_id, session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._scoped_state, _user_log(app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        await asyncio.to_thread(self._store_event, session, event)
        self._update_session_state(session, event)
        session.events.append(event)
        session.last_update_time = event.timestamp
        return event

    # -- work (in a worker thread, under the service lock) -----------------------------------

    def _session(self, tid: str) -> TlSession | None:
        s = self._open.get(tid)
        if s is None:
            if not self._store.exists(tid):
                return None
            s = self._open[tid] = self._store.open(tid)
        return s

    def _create(self, app: str, user: str, state: dict[str, Any], sid: str | None) -> Session:
        sid = sid.strip() if sid and sid.strip() else str(uuid.uuid4())
        tid = self.threadline_id(app, user, sid)
        created = time.time()
        with self._lock:
            if self._session(tid) is not None:
                raise AlreadyExistsError(f"Session with id {sid} already exists.")
            app_delta, user_delta, own = _split(state)
            meta = {NAME: {"app_name": app, "user_id": user, "session_id": sid, "created": created}}
            s = self._store.create(session_id=tid, metadata=meta)
            self._open[tid] = s
            s.append_session_info(f"{app}/{user}/{sid}")
            if own:
                s.append_custom(STATE, {"delta": own})
            _log_append(self._store, _app_log(app), app_delta, member=user)
            _log_append(self._store, _user_log(app, user), user_delta, member=sid)
            return self._read(s, app, user, sid, None)

    def _get(
        self, app: str, user: str, sid: str, config: GetSessionConfig | None
    ) -> Session | None:
        with self._lock:
            sid = self._resolve(app, user, sid)
            s = self._session(self.threadline_id(app, user, sid))
            return None if s is None else self._read(s, app, user, sid, config)

    def _resolve(self, app: str, user: str, sid: str) -> str:
        """``sid``, or its stripped form when no session has the padded id: create_session
        strips the ids it is given, as ADK's own services do."""
        if sid == sid.strip() or self._store.exists(self.threadline_id(app, user, sid)):
            return sid
        return sid.strip()

    def _read(
        self,
        s: TlSession,
        app: str,
        user: str,
        sid: str,
        config: GetSessionConfig | None,
        *,
        with_events: bool = True,
    ) -> Session:
        state: dict[str, Any] = {}
        events: list[Event] = []
        updated = float((s.header.metadata or {}).get(NAME, {}).get("created", 0.0))
        names: dict[str, str] = {}
        items = self._items.setdefault(s.id, {})
        self._items.move_to_end(s.id)
        while len(self._items) > DECODED_SESSIONS:
            self._items.popitem(last=False)
        light = is_feature_enabled(FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY)
        # the events and copies built here hold no cycles: the cyclic GC, pausing over the
        # cached events of a long session again and again, was half of a read
        purged = s.state.purged  # the one way an entry changes: its content purged
        with bulk_load():
            for eid in s.path_ids():
                item = items.get(eid)
                if item is None or eid in purged:
                    item = items[eid] = _item_of(s.entry(eid), names)
                else:
                    names.update(item.names)
                if item.state is not None:
                    state.update(item.state)
                event = item.event
                if event is None:
                    continue
                updated = event.timestamp
                if with_events:
                    events.append(event)
            if not light:
                state = copy.deepcopy(state)  # its values are the cached entries' own
        app_state = self._scoped_state(_app_log(app))
        state.update({State.APP_PREFIX + k: v for k, v in app_state.items()})
        state.update(
            {State.USER_PREFIX + k: v for k, v in self._scoped_state(_user_log(app, user)).items()}
        )
        if config is not None:
            if config.after_timestamp is not None:
                events = [e for e in events if e.timestamp >= config.after_timestamp]
            if config.num_recent_events is not None:
                n = config.num_recent_events
                events = events[-n:] if n else []
        if not light:
            # copies, as ADK's own services return: the caller may change its session's events,
            # never the cached ones (ADK's light-copy feature shares them, and so do we then)
            with bulk_load():
                events = [e.model_copy(deep=True) for e in events]
        return Session(
            id=sid, app_name=app, user_id=user, state=state, events=events, last_update_time=updated
        )

    def _scoped_state(self, log_id: str) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for data in _log_records(self._store, log_id):
            state.update(data.get("delta", {}))
        return state

    def _list(self, app: str, user: str | None) -> ListSessionsResponse:
        with self._lock:
            users = _members(self._store, _app_log(app)) if user is None else [user]
            out = []
            for u in users:
                for sid in _members(self._store, _user_log(app, u)):
                    s = self._session(self.threadline_id(app, u, sid))
                    if s is not None:
                        out.append(self._read(s, app, u, sid, None, with_events=False))
            out.sort(key=lambda x: x.last_update_time)
            return ListSessionsResponse(sessions=out)

    def _delete(self, app: str, user: str, sid: str) -> None:
        with self._lock:
            sid = self._resolve(app, user, sid)
            tid = self.threadline_id(app, user, sid)
            s = self._open.pop(tid, None)
            self._updated.pop(tid, None)
            self._items.pop(tid, None)
            if s is not None:
                s.close()
            if self._store.exists(tid):
                self._store.delete(tid)
                _log_append(self._store, _user_log(app, user), {}, member=sid, removed=True)

    def _store_event(self, session: Session, event: Event) -> None:
        with self._lock:
            s = self._session(self.threadline_id(session.app_name, session.user_id, session.id))
            if s is None:
                raise SessionNotFoundError(
                    f"Session {session.id!r} of app {session.app_name!r} and user "
                    f"{session.user_id!r} does not exist; create_session() it first"
                )
            tid = s.id
            stored = self._updated.get(tid)
            if stored is None:
                stored = self._read(
                    s, session.app_name, session.user_id, session.id, None, with_events=False
                ).last_update_time
            if stored > session.last_update_time + 1e-6:
                raise StaleSessionError(_STALE)
            app_delta, user_delta, _ = _split(event.actions.state_delta if event.actions else {})
            data = msgspec.json.decode(event.model_dump_json(exclude_none=True, by_alias=True))
            message = _message_of(event)
            stamp = _iso(event.timestamp)
            s.state.ensure_writer()  # the lock first: another writer may have moved the leaf
            if message is None:
                rec: Any = CustomEntry(
                    id=_entry_id(event, s),
                    parent_id=s.leaf_id,
                    timestamp=stamp,
                    custom=Custom(custom_type=EVENT, data={"event": data}),
                )
            else:
                message.provider_details = {
                    **(message.provider_details or {}),
                    NAME: {"event": data},
                }
                rec = MessageEntry(
                    id=_entry_id(event, s), parent_id=s.leaf_id, timestamp=stamp, message=message
                )
            s.append_records([rec])
            self._updated[tid] = event.timestamp
            if app_delta:
                _log_append(self._store, _app_log(session.app_name), app_delta)
            if user_delta:
                _log_append(self._store, _user_log(session.app_name, session.user_id), user_delta)


# -- helpers ---------------------------------------------------------------------------------


def _app_log(app: str) -> str:
    return scoped_id("adk-app", app)


def _user_log(app: str, user: str) -> str:
    return scoped_id("adk-user", app, user)


def _split(state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``state`` as (app, user, session) deltas, prefixes stripped; ``temp:`` keys dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for k, v in (state or {}).items():
        if k.startswith(State.APP_PREFIX):
            app[k.removeprefix(State.APP_PREFIX)] = v
        elif k.startswith(State.USER_PREFIX):
            user[k.removeprefix(State.USER_PREFIX)] = v
        elif not k.startswith(State.TEMP_PREFIX):
            own[k] = v
    return app, user, own


def _log_records(store: Store, log_id: str) -> Iterator[dict[str, Any]]:
    if not store.exists(log_id):
        return
    s = store.open(log_id, read_only=True)
    try:
        for rec in s.path():
            if isinstance(rec, CustomEntry) and rec.custom.custom_type in (STATE, MEMBER):
                yield rec.custom.data
    finally:
        s.close()


def _members(store: Store, log_id: str) -> list[str]:
    seen: dict[str, bool] = {}
    for data in _log_records(store, log_id):
        if "member" in data:
            seen.pop(data["member"], None)
            if not data.get("removed"):
                seen[data["member"]] = True
    return list(seen)


def _log_append(
    store: Store,
    log_id: str,
    delta: dict[str, Any],
    *,
    member: str | None = None,
    removed: bool = False,
) -> None:
    """Append a state delta and/or a member change to a shared app/user log, holding its
    writer lock only for this write."""
    if not delta and member is None:
        return
    s = store.open(log_id) if store.exists(log_id) else store.create(session_id=log_id)
    try:
        if member is not None:
            s.append_custom(MEMBER, {"member": member, **({"removed": True} if removed else {})})
        if delta:
            s.append_custom(STATE, {"delta": delta})
    finally:
        s.close()


def _entry_id(event: Event, s: TlSession) -> str:
    eid = event.id or Event.new_id()
    return eid if not s.has_entry(eid) else str(uuid.uuid4())


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _message_of(event: Event) -> Message | None:
    """The threadline message of an event's content (None: no content, or only parts no
    provider format carries)."""
    if event.content is None or not event.content.parts:
        return None
    raw = event.content.model_dump(mode="json", exclude_none=True)
    messages = gemini.load([raw])
    if len(messages) != 1:
        return None
    return messages[0]


class _Item:
    """What one entry means to ADK: the state delta it applies (the initial state, or its
    event's delta), its event (None: not an event), and the tool names it declares (for events
    made from other frameworks' tool results further on). Entries only change by a purge (then
    they are decoded again), so this is decoded once; ``get_session`` then copies the events."""

    __slots__ = ("event", "names", "state")

    def __init__(
        self, event: Event | None, state: dict[str, Any] | None, names: dict[str, str]
    ) -> None:
        self.event, self.state, self.names = event, state, names


def _item_of(rec: Any, names: dict[str, str]) -> _Item:
    """The :class:`_Item` of a path entry; ``names`` (the tool names declared before it on the
    path) gains the ones it declares."""
    if isinstance(rec, CustomEntry) and rec.custom.custom_type == STATE:
        return _Item(None, dict(rec.custom.data["delta"]), {})
    event = _event_of(rec, names)
    declared = (
        {b.tool_use.id: b.tool_use.name for b in rec.message.content if isinstance(b, ToolUseBlock)}
        if isinstance(rec, MessageEntry)
        else {}
    )
    delta = event.actions.state_delta if event is not None and event.actions else None
    return _Item(event, dict(delta) if delta else None, declared)


def _event_of(rec: Any, names: dict[str, str]) -> Event | None:
    """The ADK event behind a path entry: the stored event when ADK wrote it, else one made
    from the message (written by another framework or by threadline itself)."""
    if isinstance(rec, CustomEntry):
        if rec.custom.custom_type == EVENT:
            return Event.model_validate_json(msgspec.json.encode(rec.custom.data["event"]))
        return None
    if not isinstance(rec, MessageEntry):
        return None
    m = rec.message
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            names[b.tool_use.id] = b.tool_use.name
    mine = (m.provider_details or {}).get(NAME)
    if isinstance(mine, dict) and "event" in mine:
        return Event.model_validate_json(msgspec.json.encode(mine["event"]))
    content = gemini.dump_content(m, names)
    if content is None:
        return None
    stamp = datetime.fromisoformat(rec.timestamp.replace("Z", "+00:00")).timestamp()
    return Event(
        id=rec.id,
        invocation_id="",
        author="user" if content.get("role") == "user" else "model",
        content=types.Content.model_validate(content),
        timestamp=stamp,
    )
