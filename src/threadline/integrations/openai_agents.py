"""OpenAI Agents SDK sessions stored in threadline: :class:`ThreadlineSession`.

``ThreadlineSession`` implements the SDK's ``agents.memory.Session`` protocol over any
threadline store, so ``Runner.run(agent, "…", session=ThreadlineSession("chat-1"))`` keeps the
conversation as a threadline session tree:

- items are stored as messages through :mod:`threadline.formats.openai_responses`, which keeps
  what has no threadline field (item ids, statuses, reasoning's encrypted content, built-in tool
  items) in ``provider_details``: ``get_items()`` gives back exactly the items added;
- ``get_items()`` returns the *current context*: a compaction, branch switch, undo or context
  operation done with threadline (CLI, web viewer, MCP) is what the next ``Runner.run`` sends;
- ``pop_item()`` and ``clear_session()`` move the leaf back instead of deleting: the abandoned
  items stay in the tree (``threadline tree ID``) and ``session.branch(entry_id)`` returns to them.

The store I/O runs in a worker thread, so an asyncio program is not blocked by it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.formats import openai_responses
from threadline.integrations._common import OneSession, append_chain, check_id, missing_extra
from threadline.model.content import Message

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
    from agents.memory.session_settings import coerce_session_settings as coerce
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("OpenAI Agents SDK", "openai-agents", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session
    from threadline.stores import Store

__all__ = ["ThreadlineSession"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class ThreadlineSession:
    """An OpenAI Agents SDK session kept in a threadline store.

    ``ThreadlineSession(session_id, store=None | Store | url)``: ``session_id`` is also the
    threadline session id (created on first use); ``store`` defaults to ``$THREADLINE_HOME`` /
    ``~/.threadline``. The instance holds the session's writer lock from its first write until
    :meth:`close` (or ``async with``).
    """

    def __init__(
        self,
        session_id: str,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = check_id(session_id, "OpenAI Agents")
        # as the SDK's own sessions: a dict is checked and made SessionSettings, None the default
        self.session_settings: SessionSettings = (
            SessionSettings() if session_settings is None else coerce(session_settings)
        )
        self._one = OneSession(self.session_id, store, "openai-agents")
        self._lock = threading.Lock()
        # encoded items of each view message (entries never change; synthetic ids are unique)
        self._items: dict[str, list[bytes]] = {}

    # -- the threadline side -------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The threadline session behind this SDK session (created on first use): tag, undo,
        branch, compact or edit it, and the next ``get_items`` reflects it."""
        with self._lock:
            return self._open()

    def _open(self) -> Session:
        return self._one.get()

    def close(self) -> None:
        """Release the writer lock (and the store, when this object opened it)."""
        with self._lock:
            self._one.close()

    async def __aenter__(self) -> ThreadlineSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- the SDK protocol ----------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The Responses input items of the current context, oldest first (the latest
        ``limit`` of them when a limit is given or set in ``session_settings``)."""
        n = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._get_items, n)

    async def add_items(self, items: list[Any]) -> None:
        """Append items under the current leaf, in one durable write."""
        if items:
            await asyncio.to_thread(self._add_items, list(items))

    async def pop_item(self) -> Any | None:
        """Remove the most recent item from the context and return it; ``None`` when empty.

        The leaf moves back to before the entry that holds the item; when that entry held
        more items (an assistant turn of several output items), the others are appended again
        on the new branch. The popped entry stays in the tree."""
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        """Empty the context: the leaf moves before the first entry, nothing is deleted."""
        await asyncio.to_thread(self._clear)

    # -- work (in a worker thread) -------------------------------------------------------------

    def _encoded(self, view_id: str, message: Message) -> list[bytes]:
        got = self._items.get(view_id)
        if got is None:
            got = [_encode(item) for item in openai_responses.shape([message])]
            self._items[view_id] = got
        return got

    def _get_items(self, limit: int | None) -> list[Any]:
        with self._lock:
            ctx = self._open().context()
            ids = ctx.view.ids()
            cache = self._items
            out: list[bytes] = []
            pos = len(ids) - 1
            # newest first until the limit is met (all of them without a limit); a message is
            # only decoded when its items are not cached yet
            while pos >= 0 and (limit is None or len(out) < limit):
                got = cache.get(ids[pos])
                if got is None:
                    got = self._encoded(ids[pos], ctx.messages[pos])
                out.extend(reversed(got))
                pos -= 1
            if limit is not None:
                out = out[: max(limit, 0)]
            out.reverse()
            return list(_decode(b"[" + b",".join(out) + b"]"))

    def _add_items(self, items: Sequence[Any]) -> None:
        messages = openai_responses.load(list(items))
        with self._lock:
            session = self._open()
            append_chain(session, messages)

    def _pop_item(self) -> Any | None:
        with self._lock:
            session = self._open()
            ctx = session.context()
            if not len(ctx.view):
                return None
            item = ctx.view[-1]
            encoded = self._encoded(item.id, ctx.messages[-1])
            entry_id = item.entry_id or item.id
            parent = session.entry(entry_id).parent_id
            if parent is None:
                session.reset_leaf()
            else:
                session.branch(parent)
            if len(encoded) > 1:
                kept = openai_responses.load([_decode(b) for b in encoded[:-1]])
                append_chain(session, kept)
            return _decode(encoded[-1]) if encoded else None

    def _clear(self) -> None:
        with self._lock:
            self._open().reset_leaf()
