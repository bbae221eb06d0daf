"""The viewer's open sessions: loaded once, reloaded when the log changed underneath.

Paging a 10,000-message session must not re-read the file for every page, so sessions stay open
between requests. A session is reloaded when its stored :func:`version` differs from what this
process last saw (another process appended or rewrote it), and dropped after every write the
viewer makes, so the next request reads the file as it now is. The writer lock is released at the
end of every request: the viewer never keeps a CLI, REPL or agent from writing while it is open.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadline.session import Session


def version(s: Session) -> str:
    """A token that changes whenever the stored log changes: size, plus inode and mtime for a
    file, so a rewrite (purge, compaction by another process) counts even at the same size.

    The page compares it across polls; the viewer's own writes return it, so the page can tell
    its own changes from another process's.
    """
    from threadline.store.jsonl import JsonlLog

    if isinstance(s.state.log, JsonlLog):
        try:
            st = os.stat(s.state.log.path)
        except FileNotFoundError:
            return "missing"
        return f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}"
    return str(s.state.log.size())


class SessionCache:
    """Open sessions of one store, used by one request at a time."""

    def __init__(self, store: Any, max_open: int = 8) -> None:
        self.store = store
        self.max_open = max_open
        self.lock = threading.RLock()
        self._open: dict[str, tuple[Session, str]] = {}

    @contextmanager
    def session(self, session_id: str, *, write: bool = False) -> Iterator[Session]:
        """The session, fresh from the store; with ``write`` it is reloaded afterwards."""
        with self.lock:
            s = self._get(session_id)
            try:
                yield s
            finally:
                s.close()
                # The version stays the one taken when the session was loaded: one taken now
                # would hide an append another process made while this request ran.
                if write:
                    self._open.pop(session_id, None)

    def _get(self, session_id: str) -> Session:
        cached = self._open.get(session_id)
        if cached is not None:
            s, seen = cached
            if version(s) == seen and self.store.exists(session_id):
                return s
            self._open.pop(session_id, None)
        s = self._load(session_id)
        if len(self._open) >= self.max_open:
            self._open.pop(next(iter(self._open)))
        self._open[session_id] = (s, version(s))
        return s

    def _load(self, session_id: str) -> Session:
        from threadline.session import Session

        s = self.store.open(session_id)
        assert isinstance(s, Session)
        return s

    def forget(self, session_id: str | None = None) -> None:
        """Drop one cached session (or all): the next request reloads it."""
        with self.lock:
            if session_id is None:
                self._open.clear()
            else:
                self._open.pop(session_id, None)
