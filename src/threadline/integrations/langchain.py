"""LangChain chat histories stored in threadline: :class:`ThreadlineChatMessageHistory`.

``ThreadlineChatMessageHistory(session_id, store=None | Store | url)`` is a langchain-core
``BaseChatMessageHistory`` (``RunnableWithMessageHistory(chain, lambda sid:
ThreadlineChatMessageHistory(sid, store))``):

- messages go through :mod:`threadline.formats.openai_chat` (LangChain's own OpenAI
  conversion), so AI tool calls and tool messages are tool uses and results every other adapter
  reads; the LangChain message itself rides in ``provider_details["langchain"]`` and comes back
  equal;
- ``messages`` is the session's *current context* (threadline's undo, branches, compaction and
  context operations apply); messages another framework wrote come back converted;
- ``clear()`` moves the leaf before the first entry: nothing is deleted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from threadline.formats import openai_chat
from threadline.integrations._common import check_id, close_store, missing_extra, resolve_store
from threadline.model.content import Message, TextBlock, ToolUseBlock
from threadline.model.entries import MessageEntry, new_id, now

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        BaseMessage,
        convert_to_messages,
        convert_to_openai_messages,
        message_to_dict,
        messages_from_dict,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("LangChain", "langchain", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session
    from threadline.store.base import Store

__all__ = ["ThreadlineChatMessageHistory"]

NAME = "langchain"


class ThreadlineChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in the threadline session ``session_id``
    (created on first use)."""

    def __init__(self, session_id: str, store: Store | str | os.PathLike[str] | None = None
                 ) -> None:
        self.session_id = check_id(session_id, "LangChain")
        self._store, self._owned = resolve_store(store)
        self._session: Session | None = None
        self._lock = threading.Lock()

    @property
    def session(self) -> Session:
        """The threadline session behind this history."""
        with self._lock:
            return self._open()

    def _open(self) -> Session:
        if self._session is None:
            store = self._store
            self._session = (store.open(self.session_id) if store.exists(self.session_id)
                             else store.create(session_id=self.session_id,
                                               metadata={"framework": "langchain"}))
        return self._session

    def close(self) -> None:
        """Release the writer lock (and the store, when this object opened it)."""
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
            if self._owned:
                close_store(self._store)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The current context as LangChain messages."""
        with self._lock:
            ctx = self._open().context()
            names: dict[str, str] = {}
            return [m for msg in ctx.messages for m in _to_langchain(msg, names)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages under the current leaf in one durable write."""
        converted = [_to_threadline(m) for m in messages]
        with self._lock:
            s = self._open()
            records = []
            parent = s.leaf_id
            stamp = now()
            for m in converted:
                rec = MessageEntry(id=new_id(), parent_id=parent, timestamp=stamp, message=m)
                records.append(rec)
                parent = rec.id
            s.append_records(records)

    def clear(self) -> None:
        """Empty the context; the old messages stay in the tree."""
        with self._lock:
            self._open().reset_leaf()


def _to_threadline(m: BaseMessage) -> Message:
    payload = convert_to_openai_messages([m])
    loaded = openai_chat.load(payload)
    out = loaded[0] if len(loaded) == 1 else Message(
        role="user", content=[b for x in loaded for b in x.content])
    # an AI message with tool calls and no words has content "": no empty text block for it
    kept = [b for b in out.content if not (isinstance(b, TextBlock) and not b.text.content)]
    if kept:
        out.content = kept
    out.provider_details = {**(out.provider_details or {}), NAME: {"message": message_to_dict(m)}}
    return out


def _to_langchain(m: Message, names: dict[str, str]) -> list[BaseMessage]:
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            names[b.tool_use.id] = b.tool_use.name
    mine = (m.provider_details or {}).get(NAME)
    if isinstance(mine, dict) and isinstance(mine.get("message"), dict):
        return list(messages_from_dict([mine["message"]]))
    payload: Any = openai_chat.dump([m])
    if isinstance(payload, dict):
        payload = payload.get("messages", [])
    return list(convert_to_messages(payload))
