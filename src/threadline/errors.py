"""The threadline exception tree.

    ThreadlineError                 root: catch this to catch everything threadline raises
    ├── UserError                   bad input: unknown id, invalid name, refused operation,
    │                               limit exceeded
    │   ├── NotFoundError           an unknown session, entry, tag or operation
    │   └── LimitError              an ingest limit (size, depth, UTF-8, NaN, NUL) was exceeded
    ├── StoreError                  the store failed: I/O, corruption it cannot route around, lock
    │   └── SessionLockedError      another writer holds the session
    └── ProviderError               an LLM provider call failed: missing key, HTTP error, timeout

Every message names the object and the next step. Where the next step is "look something up"
(the sessions, a session's entry ids, its tags) the error also carries a :class:`Hint`, so each
interface words that step in its own terms: the CLI says ``run 'threadline tree abc'``, the MCP
server names its tool, the REPL its slash command, the viewer its tab
(:meth:`ThreadlineError.message_for`). ``str(exc)`` keeps a wording that fits anywhere.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import NamedTuple

#: The interface-neutral wording of each hint action ({session}: the session id).
NEUTRAL_HINTS = {
    "list_sessions": "list the sessions to see their ids",
    "list_entries": "the session's tree lists its entry ids",
    "list_tags": "list the session's tags to see their names",
    "rebuild_catalog": "rebuild the catalog",
}


class Hint(NamedTuple):
    """The next step of an error, for an interface to word: ``action`` is a key of
    :data:`NEUTRAL_HINTS`, ``session_id`` the session it is about (if any)."""

    action: str
    session_id: str = ""


class ThreadlineError(Exception):
    """Root of every error threadline raises."""

    def __init__(self, *args: object, hint: Hint | None = None) -> None:
        if hint is not None and args and isinstance(args[0], str):
            self.core = args[0]
            args = (
                f"{args[0]}; {NEUTRAL_HINTS[hint.action].format(session=hint.session_id)}",
                *args[1:],
            )
        super().__init__(*args)
        self.hint = hint

    def message_for(self, hints: Mapping[str, str]) -> str:
        """The message with its next step worded by ``hints`` (action -> template with
        ``{session}``); the neutral wording when the interface has none for it."""
        if self.hint is None or self.hint.action not in hints:
            return str(self)
        return f"{self.core}; {hints[self.hint.action].format(session=self.hint.session_id)}"


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

    def __init__(
        self, message: str, *, endpoint: str | None = None, status: int | None = None
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        super().__init__(message)


def malformed_input(what: str, exc: BaseException) -> UserError:
    """The UserError for input a reader choked on (a list where a string was expected, JSON
    nested deeper than Python recurses): names the input, the problem and the function that
    noticed it, so a report points at the reader to make stricter."""
    if isinstance(exc, RecursionError):
        return UserError(f"{what}: nested too deeply to read; nothing was loaded")
    frames = traceback.extract_tb(exc.__traceback__)
    site = f" in {frames[-1].name}" if frames else ""
    detail = (str(exc).splitlines() or [""])[0][:200]
    return UserError(
        f"{what}: malformed input ({type(exc).__name__}{site}: {detail}); nothing was loaded"
    )
