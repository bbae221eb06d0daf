"""Strands Agents sessions stored in threadline: :class:`ThreadlineSessionRepository`.

``RepositorySessionManager(session_id="chat-1", session_repository=ThreadlineSessionRepository(
store))`` makes a Strands ``Agent`` keep its conversation, state and conversation-manager state
in threadline:

- the Strands session is the header of the threadline session ``session_id`` (multi-agent state
  is a ``custom`` entry ``strands:multi_agent`` there);
- each agent's conversation is a threadline session of its own (:meth:`threadline_id`:
  ``<session_id>--<agent_id>``, or a hash when that is not a valid id); its messages go through
  :mod:`threadline.formats.bedrock` (Strands speaks the Converse shape), the Strands record kept
  in ``provider_details["strands"]`` so it reads back exactly; the agent record (state,
  conversation-manager state) is a ``custom`` entry ``strands:agent`` after the message it
  follows, so undoing the conversation also rolls the agent's state back;
- ``list_messages`` lists the *current context*: threadline's undo, tags, branches, compaction
  and context operations apply to what the agent restores (message ids are positions in it);
- ``update_message`` (a guardrail redaction) never overwrites: the latest message is replaced by
  a new branch, an earlier one by a ``revise`` operation; the original stays in the tree.

The repository keeps the sessions it opened (and their writer locks) until :meth:`close`.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from typing import TYPE_CHECKING, Any

from threadline.errors import UserError
from threadline.formats import bedrock
from threadline.integrations._common import (
    check_id,
    close_store,
    missing_extra,
    resolve_store,
    scoped_id,
)
from threadline.model.content import Message, text
from threadline.model.entries import CustomEntry, MessageEntry, new_id, now

try:
    from strands.session.session_repository import SessionRepository
    from strands.types.exceptions import SessionException
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("Strands Agents", "strands", exc) from None

if TYPE_CHECKING:
    from strands.multiagent import MultiAgentBase

    from threadline.session import Session as TlSession
    from threadline.stores import Store

__all__ = ["ThreadlineSessionRepository"]

NAME = "strands"
AGENT = "strands:agent"
MULTI = "strands:multi_agent"
_ID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")


class ThreadlineSessionRepository(SessionRepository):
    """A Strands ``SessionRepository`` over a threadline store (``None``: the default store, a
    URL or path, or a Store)."""

    def __init__(self, store: Store | str | os.PathLike[str] | None = None) -> None:
        self._store, self._owned = resolve_store(store)
        self._open: dict[str, TlSession] = {}
        self._lock = threading.RLock()

    @staticmethod
    def threadline_id(session_id: str, agent_id: str) -> str:
        """The threadline session holding one agent's conversation."""
        plain = f"{session_id}--{agent_id}"
        return plain if _ID.match(plain) else scoped_id("strands", session_id, agent_id)

    def session(self, session_id: str, agent_id: str) -> TlSession:
        """The threadline session of an agent's conversation: tag, undo, branch or compact it;
        the agent sees the result the next time a session manager initializes it."""
        with self._lock:
            s = self._get(self.threadline_id(session_id, agent_id))
            if s is None:
                raise SessionException(f"Agent {agent_id} does not exist in session {session_id}")
            return s

    def close(self) -> None:
        """Release every session this repository opened (and the store, when it opened it)."""
        with self._lock:
            for s in self._open.values():
                s.close()
            self._open.clear()
            if self._owned:
                close_store(self._store)

    def _get(self, tid: str) -> TlSession | None:
        s = self._open.get(tid)
        if s is None:
            if not self._store.exists(tid):
                return None
            s = self._open[tid] = self._store.open(tid)
        return s

    def _session_log(self, session_id: str) -> TlSession:
        s = self._get(_session_tid(session_id))
        if s is None:
            raise SessionException(f"Session {session_id} does not exist")
        return s

    def _agent_log(self, session_id: str, agent_id: str) -> TlSession:
        self._session_log(session_id)
        s = self._get(self.threadline_id(session_id, agent_id))
        if s is None:
            raise SessionException(f"Agent {agent_id} does not exist in session {session_id}")
        return s

    # -- sessions ------------------------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        with self._lock:
            tid = _session_tid(session.session_id)
            if self._store.exists(tid):
                raise SessionException(f"Session {session.session_id} already exists")
            record = session.to_dict()
            record["session_type"] = str(session.session_type.value)
            self._open[tid] = self._store.create(session_id=tid, metadata={NAME: record})
            return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        with self._lock:
            s = self._get(_session_tid(session_id))
            if s is None:
                return None
            record = dict((s.header.metadata or {}).get(NAME, {}))
            record["session_type"] = SessionType(record.get("session_type", "AGENT"))
            return Session.from_dict(record)

    # -- agents ----------------------------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        with self._lock:
            self._session_log(session_id)
            tid = self.threadline_id(session_id, session_agent.agent_id)
            if self._store.exists(tid):
                raise SessionException(
                    f"Agent {session_agent.agent_id} already exists in session {session_id}"
                )
            s = self._open[tid] = self._store.create(
                session_id=tid,
                metadata={NAME: {"session_id": session_id, "agent_id": session_agent.agent_id}},
            )
            s.append_session_info(f"{session_id} / {session_agent.agent_id}")
            s.append_custom(AGENT, session_agent.to_dict())

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        with self._lock:
            if self._get(_session_tid(session_id)) is None:
                return None
            s = self._get(self.threadline_id(session_id, agent_id))
            if s is None:
                return None
            record = _latest(s, AGENT)
            return None if record is None else SessionAgent.from_dict(record)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        with self._lock:
            s = self._agent_log(session_id, session_agent.agent_id)
            s.append_custom(AGENT, session_agent.to_dict())

    # -- messages --------------------------------------------------------------------------------

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        with self._lock:
            s = self._agent_log(session_id, agent_id)
            # the writer lock first: another writer may have moved the leaf (a PostgreSQL
            # writer that waited for the lock hands it on after each append)
            s.state.ensure_writer()
            n = len(s.context().messages)
            if session_message.message_id < n:
                raise SessionException(
                    f"Message {session_message.message_id} already exists in agent {agent_id} "
                    f"in session {session_id}"
                )
            s.append_records(
                [
                    MessageEntry(
                        id=new_id(),
                        parent_id=s.leaf_id,
                        timestamp=now(),
                        message=_to_threadline(session_message),
                    )
                ]
            )

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> SessionMessage | None:
        with self._lock:
            if self._get(_session_tid(session_id)) is None:
                return None
            s = self._get(self.threadline_id(session_id, agent_id))
            if s is None:
                return None
            ctx = s.context()
            if not 0 <= message_id < len(ctx.messages):
                return None
            return _to_strands(ctx.messages[message_id], message_id)

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        with self._lock:
            s = self._agent_log(session_id, agent_id)
            ctx = s.context()
            pos = session_message.message_id
            if not 0 <= pos < len(ctx.messages):
                raise SessionException(f"Message {pos} does not exist in session {session_id}")
            new = _to_threadline(session_message)
            item = ctx.view[pos]
            if pos == len(ctx.messages) - 1 and item.kind == "message":
                parent = s.entry(item.id).parent_id
                # later non-message entries (the agent record) come along to the new branch
                tail = [
                    e
                    for e in s.path()[s.path_ids().index(item.id) + 1 :]
                    if isinstance(e, CustomEntry)
                ]
                if parent is None:
                    s.reset_leaf()
                else:
                    s.branch(parent)
                s.append_message(new)
                for e in tail:
                    s.append_custom(e.custom.custom_type, e.custom.data)
            else:
                try:
                    s.revise(pos, pos, [new])
                except UserError as exc:
                    raise SessionException(str(exc)) from exc

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: int | None = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> list[SessionMessage]:
        with self._lock:
            if self._get(_session_tid(session_id)) is None:
                return []
            s = self._get(self.threadline_id(session_id, agent_id))
            if s is None:
                return []
            messages = s.context().messages
            end = len(messages) if limit is None else min(len(messages), offset + limit)
            return [_to_strands(messages[i], i) for i in range(offset, end)]

    # -- multi-agent state -----------------------------------------------------------------------

    def create_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        with self._lock:
            s = self._session_log(session_id)
            s.append_custom(MULTI, {"id": multi_agent.id, "state": multi_agent.serialize_state()})

    def read_multi_agent(
        self, session_id: str, multi_agent_id: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        with self._lock:
            s = self._get(_session_tid(session_id))
            if s is None:
                return None
            found = _latest(s, MULTI, key=multi_agent_id)
            return None if found is None else dict(found["state"])

    def update_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        with self._lock:
            s = self._session_log(session_id)
            if _latest(s, MULTI, key=multi_agent.id) is None:
                raise SessionException(
                    f"MultiAgent {multi_agent.id} does not exist in session {session_id}"
                )
            s.append_custom(MULTI, {"id": multi_agent.id, "state": multi_agent.serialize_state()})


def _session_tid(session_id: str) -> str:
    return check_id(session_id, "Strands")


def _latest(s: TlSession, custom_type: str, *, key: str | None = None) -> Any:
    """The data of the latest ``custom_type`` entry on the current path (else anywhere in the
    tree: an agent cleared back to nothing still exists)."""
    for records in (reversed(s.path()), reversed(s.entries())):
        for rec in records:
            if (
                isinstance(rec, CustomEntry)
                and rec.custom.custom_type == custom_type
                and (key is None or rec.custom.data.get("id") == key)
            ):
                return rec.custom.data
    return None


def _to_threadline(sm: SessionMessage) -> Message:
    """The threadline message of a Strands record (the record rides in provider_details)."""
    loaded = bedrock.load([_base64(sm.to_message())])
    m = (
        loaded[0]
        if len(loaded) == 1
        else Message(
            role=str(sm.message.get("role", "user")), content=[b for x in loaded for b in x.content]
        )
    )
    record = sm.to_dict()
    record.pop("message_id", None)
    m.provider_details = {**(m.provider_details or {}), NAME: {"record": record}}
    return m


def _base64(value: Any) -> Any:
    """``value`` with bytes as base64 text, as the Converse JSON API carries them."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _base64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_base64(v) for v in value]
    return value


def _to_strands(m: Message, position: int) -> SessionMessage:
    """The Strands record of a context message: the stored one when Strands wrote it, else
    one made from the message (another framework's, a summary, an edit)."""
    mine = (m.provider_details or {}).get(NAME)
    if isinstance(mine, dict) and isinstance(mine.get("record"), dict):
        return SessionMessage.from_dict({**mine["record"], "message_id": position})
    dumped = bedrock.shape([m]).get("messages") or [
        {"role": "user", "content": [{"text": m.text or ""}]}
    ]
    message = dumped[0]
    if m.role in ("compactionSummary", "branchSummary", "system") and not message.get("content"):
        message = {"role": "user", "content": [{"text": text(m.text).text.content}]}
    return SessionMessage(message=message, message_id=position)
