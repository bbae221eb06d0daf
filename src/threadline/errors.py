"""The threadline exception tree.

    ThreadlineError                 root: catch this to catch everything threadline raises
    ├── UserError                   bad input: unknown id, invalid name, refused operation,
    │                               limit exceeded
    │   ├── NotFoundError           an unknown session, entry, tag or operation
    │   └── LimitError              an ingest limit (size, depth, UTF-8, NaN, NUL) was exceeded
    ├── StoreError                  the store failed: I/O, corruption it cannot route around, lock
    │   └── SessionLockedError      another writer holds the session
    └── ProviderError               an LLM provider call failed: missing key, HTTP error, timeout

Every message names the object and the next step.
"""

from __future__ import annotations


class ThreadlineError(Exception):
    """Root of every error threadline raises."""


class UserError(ThreadlineError):
    """The caller asked for something invalid; nothing was written."""


class NotFoundError(UserError):
    """An unknown session, entry, tag or operation."""


class LimitError(UserError):
    """An ingest limit was exceeded; nothing was written."""


class StoreError(ThreadlineError):
    """The store failed (I/O, lock, unrecoverable corruption)."""


class SessionLockedError(StoreError):
    """Another writer holds the session's lock."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        self.session_id = session_id
        self.pid = pid
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"Session '{session_id}' is locked by {holder}; "
            "close the other writer or open read-only"
        )


class ProviderError(ThreadlineError):
    """A call to an LLM provider failed (missing key, connection, HTTP status, timeout, bad
    stream). The message names the endpoint and the fix; nothing was written to any session."""

    def __init__(self, message: str, *, endpoint: str | None = None,
                 status: int | None = None) -> None:
        self.endpoint = endpoint
        self.status = status
        super().__init__(message)
