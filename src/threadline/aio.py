"""asyncio access to sessions and stores without blocking the event loop (DESIGN §3, threads).

Every backend does blocking I/O (``fdatasync``, SQLite, psycopg), so an async caller runs each
call in a worker thread (:func:`asyncio.to_thread`). Sessions and stores are safe to share between
threads: calls on one session serialize on its lock, calls on different sessions run side by
side, and the event loop keeps running while any of them waits::

    store = AsyncStore(tl.open_store(url))
    s = await store.create()
    eid = await s.append_message("user", "hi")
    ctx = await s.context()

Any method of the wrapped object is available as a coroutine with the same arguments.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from threadline.session import Session
from threadline.stores import Store

__all__ = ["AsyncSession", "AsyncStore"]


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return call


class AsyncSession:
    """A :class:`~threadline.session.Session` whose methods are coroutines."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.id = session.id

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        attr = getattr(self.session, name)
        if not callable(attr):
            raise AttributeError(f"{name} is not a method of Session; read it from .session")
        return _in_thread(attr)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.session.close)


class AsyncStore:
    """A store whose methods are coroutines; sessions come back as :class:`AsyncSession`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, **kwargs: Any) -> AsyncSession:
        return AsyncSession(await asyncio.to_thread(self.store.create, **kwargs))

    async def open(
        self, session_id: str, *, read_only: bool = False, shared: bool = False
    ) -> AsyncSession:
        return AsyncSession(
            await asyncio.to_thread(self.store.open, session_id, read_only=read_only, shared=shared)
        )

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        attr = getattr(self.store, name)
        if not callable(attr):
            raise AttributeError(f"{name} is not a method of the store; read it from .store")
        return _in_thread(attr)
