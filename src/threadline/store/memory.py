"""The in-memory store: the same contract as the JSONL store, kept in a dict (tests, scratch)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence

from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.model.entries import AnyRecord, SessionHeader, decode_header, encode
from threadline.store.base import (
    BaseStore,
    Changes,
    Loaded,
    LoadReport,
    Slot,
    check_session_id,
    not_found,
    parse_lines,
)


class _Data:
    __slots__ = ("header", "lines", "writer")

    def __init__(self, header: bytes, lines: list[bytes]) -> None:
        self.header = header
        self.lines = lines
        self.writer: object | None = None


class MemoryLog:
    let_go = False  # the writer lock is kept until release()

    def __init__(self, data: _Data, session_id: str) -> None:
        self.session_id = session_id
        self._data = data
        self._seen = 0

    def _parse(
        self, lines: list[bytes], report: LoadReport, sizes: dict[str, int], first: int
    ) -> list[Slot]:
        buf = b"".join(line + b"\n" for line in lines)
        slots, _ = parse_lines(buf, 0, len(buf), report, first, sizes)
        return slots

    def load(self) -> Loaded:
        header = decode_header(self._data.header)
        report = LoadReport()
        sizes: dict[str, int] = {}
        lines = list(self._data.lines)
        self._seen = len(lines)
        return Loaded(
            header=header, slots=self._parse(lines, report, sizes, 2), sizes=sizes, report=report
        )

    def acquire(self) -> list[Slot]:
        if self._data.writer is self:
            return []
        if self._data.writer is not None:
            raise SessionLockedError(self.session_id, os.getpid())
        self._data.writer = self
        newer = self._data.lines[self._seen :]
        self._seen = len(self._data.lines)
        return self._parse(list(newer), LoadReport(), {}, self._seen) if newer else []

    def append(self, lines: Sequence[bytes], records: Sequence[AnyRecord] | None = None) -> None:
        if self._data.writer is not self:
            raise StoreError(f"Session '{self.session_id}' is not held for writing")
        self._data.lines.extend(lines)
        self._seen = len(self._data.lines)

    def append_at_leaf(self, line: bytes, record: AnyRecord, parent: str | None) -> None:
        return None  # the writer takes the lock and keeps it: no shared append

    def read_newer(self) -> list[Slot]:
        return []  # append_at_leaf never leaves the session behind

    def raw_lines(self) -> Iterator[bytes]:
        return iter(list(self._data.lines))

    def raw_header(self) -> bytes:
        return self._data.header

    def companion_files(self) -> list[str]:
        return []

    def rewrite(self, header: bytes, lines: Iterable[bytes]) -> None:
        self._data.header = header
        self._data.lines = list(lines)
        self._seen = len(self._data.lines)

    def backup(self, suffix: str) -> str | None:
        return None

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # every append is durable on its own

    def release(self) -> None:
        if self._data.writer is self:
            self._data.writer = None

    def size(self) -> int:
        return len(self._data.header) + 1 + sum(len(x) + 1 for x in self._data.lines)


class MemoryStore(BaseStore):
    """Sessions in a dict; gone when the process ends."""

    def __init__(self) -> None:
        self.url = "memory://"
        self._sessions: dict[str, _Data] = {}

    def exists(self, session_id: str) -> bool:
        return check_session_id(session_id) in self._sessions  # refused like every backend

    def open_log(self, session_id: str) -> MemoryLog:
        return MemoryLog(self._sessions[session_id], session_id)

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> MemoryLog:
        if header.id in self._sessions:
            raise UserError(f"Session '{header.id}' already exists; choose another id")
        self._sessions[header.id] = _Data(encode(header), list(lines))
        return self.open_log(header.id)

    def session_ids(self) -> list[str]:
        return list(self._sessions)

    def changes_since(self, session_id: str, cursor: str, limit: int | None = None) -> Changes:
        data = self._sessions[session_id]
        ident, _, seen = cursor.partition(":")
        reset = ident != str(id(data.lines))  # a rewrite replaces the list
        start = 0 if reset else int(seen or 0)
        lines = data.lines[start:]
        buf = b"".join(line + b"\n" for line in lines)
        slots, _ = parse_lines(buf, 0, len(buf), LoadReport(), 0, {})
        return reset, slots, f"{id(data.lines)}:{start + len(lines)}"

    def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        if self._sessions.pop(session_id, None) is None:
            raise not_found(session_id)
