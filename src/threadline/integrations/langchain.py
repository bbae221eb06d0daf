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
from threadline.integrations._common import OneSession, append_chain, check_id, missing_extra
from threadline.model.content import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text,
    thinking,
    tool_use,
)

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
        message_to_dict,
        messages_from_dict,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("LangChain", "langchain", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session
    from threadline.stores import Store

__all__ = ["ThreadlineChatMessageHistory"]

NAME = "langchain"


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
        converted = [_to_threadline(m) for m in messages]
        with self._lock:
            append_chain(self._open(), converted)

    def clear(self) -> None:
        """Empty the context; the old messages stay in the tree."""
        with self._lock:
            self._open().reset_leaf()


def _to_threadline(m: BaseMessage) -> Message:
    if isinstance(m, AIMessage):
        out = _from_ai_message(m)
        out.provider_details = {NAME: {"message": message_to_dict(m)}}
        return out
    payload = convert_to_openai_messages([m])
    loaded = openai_chat.load(payload)
    out = (
        loaded[0]
        if len(loaded) == 1
        else Message(role="user", content=[b for x in loaded for b in x.content])
    )
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
    if m.role == "assistant":
        return [_ai_message(m)]
    results = [b for b in m.content if isinstance(b, ToolResultBlock)]
    if results and len(results) == len(m.content):
        return [
            ToolMessage(
                _result_text(b),
                tool_call_id=b.tool_result.tool_use_id,
                name=names.get(b.tool_result.tool_use_id),
                status="error" if b.tool_result.is_error else "success",
            )
            for b in results
        ]
    payload: Any = openai_chat.shape([m])
    if isinstance(payload, dict):
        payload = payload.get("messages", [])
    return list(convert_to_messages(payload))


def _ai_message(m: Message) -> AIMessage:
    """An AIMessage for an assistant message another framework wrote: reasoning as LangChain
    ``reasoning`` content blocks, tool uses as ``tool_calls``."""
    blocks: list[str | dict[str, Any]] = []
    calls = []
    for b in m.content:
        if isinstance(b, ThinkingBlock) and not b.thinking.redacted:
            blocks.append({"type": "reasoning", "reasoning": b.thinking.content})
        elif isinstance(b, TextBlock):
            blocks.append({"type": "text", "text": b.text.content})
        elif isinstance(b, ToolUseBlock):
            args = (
                b.tool_use.input
                if isinstance(b.tool_use.input, dict)
                else {"input": b.tool_use.input}
            )
            calls.append({"id": b.tool_use.id, "name": b.tool_use.name, "args": args})
    content: str | list[str | dict[str, Any]] = blocks
    if all(isinstance(x, dict) and x["type"] == "text" for x in blocks):
        content = "".join(str(x["text"]) for x in blocks if isinstance(x, dict))
    return AIMessage(content=content, tool_calls=calls)


def _result_text(b: ToolResultBlock) -> str:
    body = b.tool_result.content
    if isinstance(body, str):
        return body
    return "".join(c.text.content for c in body if isinstance(c, TextBlock))


def _from_ai_message(m: AIMessage) -> Message:
    """An AIMessage's blocks: its text and reasoning content blocks, then its tool calls (the
    OpenAI conversion would drop the reasoning)."""
    blocks: list[Any] = []
    parts = m.content if isinstance(m.content, list) else [m.content]
    for p in parts:
        if isinstance(p, str):
            if p:
                blocks.append(text(p))
        elif p.get("type") == "text" and p.get("text"):
            blocks.append(text(str(p["text"])))
        elif p.get("type") in ("reasoning", "thinking"):
            words = p.get("reasoning") or p.get("thinking") or ""
            if words:
                blocks.append(thinking(str(words)))
    blocks += [tool_use(c.get("id") or "", c["name"], c["args"]) for c in m.tool_calls]
    return Message(role="assistant", content=blocks)
