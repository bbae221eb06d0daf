"""What every framework adapter shares: resolving the store argument, the extra's ImportError,
and the session-id rule."""

from __future__ import annotations

import hashlib
import os
import re
from typing import TYPE_CHECKING

from threadline.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadline.model.content import Message
    from threadline.session import Session
    from threadline.stores import Store

_ID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")


def missing_extra(framework: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError an adapter raises when its framework is not installed."""
    return ImportError(
        f"threadline's {framework} adapter needs the '{extra}' extra ({exc}); "
        f"run: pip install 'threadline[{extra}]'"
    )


def resolve_store(store: Store | str | os.PathLike[str] | None) -> tuple[Store, bool]:
    """``(store, owned)``: a Store as given, or one opened from a URL/path (``None``: the
    default store); ``owned`` is True when the adapter opened it and so closes it."""
    if store is None or isinstance(store, (str, os.PathLike)):
        from threadline.stores import open_store

        return open_store(store), True
    return store, False


def close_store(store: Store) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


def check_id(session_id: str, framework: str) -> str:
    """A framework session id used as the threadline session id (so ``threadline show ID``
    finds it); ids that cannot name a file are refused with the rule."""
    if not isinstance(session_id, str) or not _ID.match(session_id):
        raise UserError(
            f"{framework} session id {session_id!r} cannot be a threadline session id; "
            "use 1-64 characters among letters, digits, '_' and '-'"
        )
    return session_id


def scoped_id(prefix: str, *parts: str) -> str:
    """A stable threadline session id for a framework key made of several parts (ADK's app,
    user and session ids): ``<prefix>-`` and 40 hex digits of their SHA-256."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}-{digest[:40]}"


class OneSession:
    """The one threadline session an adapter object works on: opened, or created with
    ``metadata={"framework": …}``, on first use; its writer lock is held from the first write
    until :meth:`close`, which also closes the store when the adapter opened it."""

    def __init__(
        self, session_id: str, store: Store | str | os.PathLike[str] | None, framework: str
    ) -> None:
        self.session_id = session_id
        self.store, self._owned = resolve_store(store)
        self._framework = framework
        self._session: Session | None = None

    def get(self) -> Session:
        if self._session is None:
            store = self.store
            self._session = (
                store.open(self.session_id)
                if store.exists(self.session_id)
                else store.create(
                    session_id=self.session_id, metadata={"framework": self._framework}
                )
            )
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._owned:
            close_store(self.store)


def append_chain(session: Session, messages: Sequence[Message]) -> list[str]:
    """Append ``messages`` as a chain under the leaf in one durable write."""
    from threadline.model.entries import MessageEntry, new_id, now

    records = []
    # the writer lock first: another writer may have moved the leaf (a PostgreSQL writer that
    # waited for the lock hands it on after each append and takes it again here)
    if messages:
        session.state.ensure_writer()
    parent = session.leaf_id
    stamp = now()
    for m in messages:
        rec = MessageEntry(id=new_id(), parent_id=parent, timestamp=stamp, message=m)
        records.append(rec)
        parent = rec.id
    return session.append_records(records)
