"""LangChain chat histories stored in threadline: :class:`ThreadlineChatMessageHistory`.

``ThreadlineChatMessageHistory(session_id, store=None | Store | url)`` is a langchain-core
``BaseChatMessageHistory`` (``RunnableWithMessageHistory(chain, lambda sid:
ThreadlineChatMessageHistory(sid, store))``):

- messages convert through :mod:`threadline.formats.langchain` (shared with the LangGraph
  checkpointer): AI tool calls and tool messages are tool uses and results every other adapter
  reads, reasoning content blocks are thinking blocks, and the fields threadline has no place for
  ride in ``provider_details["langchain"]``, so a message comes back equal;
- ``messages`` is the session's *current context* (threadline's undo, branches, compaction and
  context operations apply); messages another framework wrote come back converted, each tool
  result as a ``ToolMessage`` named after the tool its call named;
- ``clear()`` moves the leaf before the first entry: nothing is deleted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from threadline.formats import langchain as lc
from threadline.integrations._common import OneSession, append_chain, check_id, missing_extra
from threadline.model.content import Message, ToolResultBlock, ToolUseBlock

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("LangChain", "langchain", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session
    from threadline.stores import Store

__all__ = ["ThreadlineChatMessageHistory"]


class ThreadlineChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in the threadline session ``session_id``
    (created on first use)."""

    def __init__(
        self, session_id: str, store: Store | str | os.PathLike[str] | None = None
    ) -> None:
        self.session_id = check_id(session_id, "LangChain")
        self._one = OneSession(self.session_id, store, "langchain")
        self._lock = threading.Lock()

    @property
    def session(self) -> Session:
        """The threadline session behind this history."""
        with self._lock:
            return self._open()

    def _open(self) -> Session:
        return self._one.get()

    def close(self) -> None:
        """Release the writer lock (and the store, when this object opened it)."""
        with self._lock:
            self._one.close()

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The current context as LangChain messages."""
        with self._lock:
            ctx = self._open().context()
            names: dict[str, str] = {}
            return [m for msg in ctx.messages for m in _to_langchain(msg, names)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages under the current leaf in one durable write."""
        converted = lc.load(messages)
        for m in converted:  # marked as LangChain's own, even with no field to keep
            m.provider_details = {lc.NAME: {}, **(m.provider_details or {})}
        with self._lock:
            append_chain(self._open(), converted)

    def clear(self) -> None:
        """Empty the context; the old messages stay in the tree."""
        with self._lock:
            self._open().reset_leaf()


def _to_langchain(m: Message, names: dict[str, str]) -> list[BaseMessage]:
    """``m`` as LangChain messages: one, or one ``ToolMessage`` per result of a message that
    holds only tool results (other frameworks put parallel results in one message). ``names``
    maps the call ids seen so far to their tools, to name the ``ToolMessage``."""
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            names[b.tool_use.id] = b.tool_use.name
    mine = (m.provider_details or {}).get(lc.NAME)
    if isinstance(mine, dict) and isinstance(mine.get("message"), dict):
        # written by this adapter before it shared the format module: the message whole
        return list(messages_from_dict([mine["message"]]))
    results = [b for b in m.content if isinstance(b, ToolResultBlock)]
    if mine is not None or not results or len(results) != len(m.content):
        return [lc.from_message(m)]
    out: list[BaseMessage] = []
    for b in results:
        tool = lc.from_message(Message(role="tool", content=[b]))
        if isinstance(tool, ToolMessage) and tool.name is None:
            tool.name = names.get(b.tool_result.tool_use_id)
        out.append(tool)
    return out
