"""The storage contract: a :class:`Backend` of sessions, each session kept in a :class:`Log`.

A log is a dumb, durable sequence of encoded records (one JSON object each) after a header. All
tree logic lives in the session layer above (:class:`threadline.session.Session`), so a backend
only has to keep lines in order, hold one writer at a time, and rewrite atomically. The JSONL,
memory, SQLite and PostgreSQL backends implement the same protocol and pass the same conformance
suite. This layer imports nothing above it: the user-facing :class:`threadline.Store` (sessions
and the catalog) wraps a backend from the layers above.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import gc
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, Literal, NamedTuple, Protocol

import msgspec

from threadline.errors import Hint, NotFoundError, StoreError, UserError
from threadline.model.content import Message
from threadline.model.entries import (
    DECODE_ERRORS,
    AnyRecord,
    MessageEntry,
    RecordError,
    SessionHeader,
    decode_error_reason,
    decode_record,
    envelope_decoder,
)

Durability = Literal["fsync", "group", "flush"]
# \A…\Z, not ^…$: "$" also matches before a trailing newline ("abc\n.jsonl")
SESSION_ID_RE = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise UserError(f"Invalid session id {session_id!r}: use 1-64 letters, digits, '_' or '-'")
    return session_id


class LoadReport(msgspec.Struct, kw_only=True):
    """What a load skipped or repaired; empty lists mean a clean file."""

    corrupt_lines: list[tuple[int, str]] = msgspec.field(default_factory=list)
    duplicate_ids: list[str] = msgspec.field(default_factory=list)
    orphans: list[str] = msgspec.field(default_factory=list)
    cycles: list[str] = msgspec.field(default_factory=list)
    unknown_leaf: list[str] = msgspec.field(default_factory=list)
    torn_bytes: int = 0

    @property
    def clean(self) -> bool:
        return not (
            self.corrupt_lines
            or self.duplicate_ids
            or self.orphans
            or self.cycles
            or self.unknown_leaf
            or self.torn_bytes
        )


class LazyMessage(msgspec.Struct, gc=False):
    """A message entry whose payload is decoded on first use (the bulk of a big session).

    A struct the cyclic GC does not track (it holds strings, ints and the file it reads from,
    never a cycle): a session of 1M entries holds ~1M of these, and a tracked object each would
    be walked by every full collection of the host process."""

    id: str
    parent_id: str | None
    timestamp: str
    _buf: Any
    _start: int
    _end: int
    tree: ClassVar[bool] = True
    type: ClassVar[str] = "message"

    @property
    def size(self) -> int:
        return self._end - self._start

    def raw(self) -> bytes:
        return bytes(self._buf[self._start : self._end])

    def decode(self) -> AnyRecord:
        buf = self._buf
        if isinstance(buf, bytes):
            return decode_record(memoryview(buf)[self._start : self._end])
        return decode_record(buf[self._start : self._end])  # a file read with pread


Slot = AnyRecord | LazyMessage

_SPAN_GAP = 64 * 1024  # bytes of other lines read rather than a second pread
_SPAN_MAX = 8 * 1024 * 1024


def decode_run(slots: Sequence[LazyMessage]) -> list[AnyRecord | None]:
    """Decode many lazy messages at once: those of one file are read in a few ``pread`` calls
    over the spans they cover (lines close together share a read) instead of one call each.
    ``None`` where a line does not decode; the caller decodes it alone (and reports it)."""
    out: list[AnyRecord | None] = [None] * len(slots)
    order = sorted(range(len(slots)), key=lambda i: (id(slots[i]._buf), slots[i]._start))
    k = 0
    while k < len(order):
        first = slots[order[k]]
        buf, lo, hi = first._buf, first._start, first._end
        j = k + 1
        while j < len(order):  # grow the span while the next line is near and the span small
            nxt = slots[order[j]]
            if nxt._buf is not buf or nxt._start - hi > _SPAN_GAP or nxt._end - lo > _SPAN_MAX:
                break
            hi = max(hi, nxt._end)
            j += 1
        try:
            data = memoryview(buf)[lo:hi] if isinstance(buf, bytes) else memoryview(buf[lo:hi])
        except (OSError, StoreError):  # left to the one-by-one decode, which reports it
            k = j
            continue
        for i in order[k:j]:
            sl = slots[i]
            try:
                out[i] = decode_record(data[sl._start - lo : sl._end - lo])
            except RecordError:
                out[i] = None
        k = j
    return out


PURGED_MARK = b'{"purged":true}'  # the payload of a purged entry's line


LAZY_FROM = 10_000  # records: a database session with fewer is loaded whole (one query)
_WINDOW = 128 * 1024  # bytes of neighbouring rows a small read takes along (and keeps)
_WINDOWS_KEPT = 4


class RowSource:
    """The records of one load from a database store, read on demand: what the lazy messages of
    that load decode from (``source[start:end]``, like a file).

    The offsets are virtual: the loaded rows laid end to end, each followed by a newline, as if
    they were a file. A slice maps back to the rows it covers and reads them in one query, so
    :func:`decode_run` reads a context's messages in a few round trips. A small read (one
    message) takes along the rows within ``_WINDOW`` bytes on either side, or twice that ahead
    when it follows on from the last window read (forward or back), and keeps the last few
    such windows: entries read one by one near each other (a branch walked back, a tree page,
    a whole session read in order) cost one query, not one each, and each row is read once.
    ``fetch(first, last)`` returns the raw records of the rows with sequence numbers ``first``
    to ``last``, fewer when the session was rewritten since the load (a purge)."""

    __slots__ = ("fetch", "seqs", "starts", "windows")

    def __init__(self, fetch: Any) -> None:
        self.fetch = fetch
        self.seqs: list[int] = []
        self.starts: list[int] = []
        self.windows: list[tuple[int, bytes]] = []  # (virtual offset, bytes), newest last

    def __getitem__(self, span: slice) -> bytes:
        start, stop = span.start, span.stop
        for lo, data in reversed(self.windows):
            if lo <= start and stop <= lo + len(data):
                return data[start - lo : stop - lo]
        small = stop - start < _WINDOW
        first, last = start, stop
        if small:
            # rows read one after the other (an index walked in order, a branch walked back)
            # take the next window on in their direction; others, a window on either side
            first, last = start - _WINDOW, stop + _WINDOW
            if self.windows:
                lo, data = self.windows[-1]
                if lo <= start < lo + len(data) + _WINDOW:
                    first, last = start, stop + 2 * _WINDOW
                elif lo - _WINDOW < stop <= lo + len(data):
                    first, last = start - 2 * _WINDOW, stop
        lo, data = self._read(max(0, first), last)
        if lo > start or stop > lo + len(data):
            raise StoreError(
                "The session was rewritten (purged or migrated) since it was loaded; open it again"
            )
        if small:
            self.windows = [*self.windows[-(_WINDOWS_KEPT - 1) :], (lo, data)]
        return data[start - lo : stop - lo]

    def _read(self, start: int, stop: int) -> tuple[int, bytes]:
        """The whole rows covering ``start:stop`` (clamped to the load): their offset and bytes."""
        starts = self.starts
        first = max(0, bisect.bisect_right(starts, start) - 1)
        last = max(first, min(len(starts), bisect.bisect_left(starts, stop)) - 1)
        count = last - first + 1
        rows = self.fetch(self.seqs[first], self.seqs[last])
        if len(rows) != count:
            return starts[first], b""
        return starts[first], b"\n".join(rows)


def load_rows(
    rows: Iterable[Sequence[Any]],
    fetch: Any,
    report: LoadReport,
    sizes: dict[str, int],
    first_line_no: int,
) -> list[Slot]:
    """The slots of a database load that read only what it must.

    ``rows``: ``(seq, id, parent_id, timestamp, size, raw)`` in sequence order, ``raw`` left
    out (None) for a readable, unpurged message: it becomes a lazy message read through a
    :class:`RowSource` when used. The other rows are parsed as the lines of a log are, a run
    of consecutive ones at a time."""
    source = RowSource(fetch)
    seqs, starts = source.seqs, source.starts
    slots: list[Slot] = []
    lazy = LazyMessage
    pending: list[bytes] = []  # consecutive rows read whole, parsed together
    pending_line = first_line_no

    def flush() -> None:
        buf = b"".join(pending)
        got, _ = parse_lines(buf, 0, len(buf), report, pending_line, sizes)
        slots.extend(got)
        pending.clear()

    pos = 0
    line_no = first_line_no
    for seq, eid, parent, stamp, size, raw in rows:
        seqs.append(seq)
        starts.append(pos)
        if raw is None:
            if pending:
                flush()
            slots.append(lazy(eid, parent, stamp, source, pos, pos + size))
            sizes[eid] = size
        else:
            if not pending:
                pending_line = line_no
            pending.append(bytes(raw) + b"\n")
        pos += size + 1
        line_no += 1
    if pending:
        flush()
    return slots


class Stamps:
    """Timestamps by row, kept as one string of UTF-8 bytes and their end offsets (an index of
    a million messages would otherwise hold a million ``str`` of ~70 bytes each); each is
    decoded when asked for."""

    __slots__ = ("data", "ends")

    def __init__(self, data: bytes | memoryview, ends: Sequence[int]) -> None:
        self.data, self.ends = data, ends

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, row: int) -> str:
        if row < 0:
            raise IndexError(row)
        ends = self.ends
        return str(self.data[ends[row - 1] if row else 0 : ends[row]], "utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        data = bytes(self.data)
        ends = list(self.ends)
        spans = map(slice, [0, *ends[:-1]], ends)
        if data.isascii():  # the usual case: one decode, then the offsets index the text
            return map(data.decode("ascii").__getitem__, spans)
        return (data[span].decode("utf-8", "surrogatepass") for span in spans)


NO_PARENT = -1  # a parent row of Columns: no parent
NAMED_PARENT = -2  # a parent row of Columns: the parent is kept by name (a record, not a message)


class Columns:
    """The first ``count`` slots of a load, by column (what a JSONL index gives): the messages'
    ids, parents, timestamps and where their lines are in ``source`` (by message row), and the
    decoded records with their positions among the slots. No lazy message exists until
    :meth:`lazy` makes one, and no per-message object but the id: a message's parent is the
    row of another message in ``rows`` (:data:`NO_PARENT`, or :data:`NAMED_PARENT` with the id
    in ``named``). ``breaks``: the rows whose parent is not the row before them (row 0 first),
    so a path is a few runs of consecutive rows. ``record_rows``: per decoded record, the row of
    the message its parent (a tree entry) or its target (a ``leaf`` record) is, else a negative
    row. ``clean``: no entry repeats an id, names a parent, or moves the leaf to an entry not
    seen before it, so the session layer may index it without looking anything up."""

    __slots__ = (
        "_id_lengths",
        "_row",
        "breaks",
        "clean",
        "count",
        "hint",
        "ids",
        "lengths",
        "named",
        "positions",
        "record_rows",
        "records",
        "rows",
        "source",
        "stamps",
        "starts",
    )

    def __init__(
        self,
        ids: Sequence[str],
        rows: Sequence[int],
        named: dict[int, str],
        stamps: Stamps,
        source: Any,
        starts: Sequence[int],
        lengths: Sequence[int],
        positions: list[int],
        records: list[AnyRecord],
        clean: bool,
        breaks: Sequence[int],
        record_rows: Sequence[int],
        id_lengths: Iterable[int] | None = None,
    ) -> None:
        self.ids, self.rows, self.named, self.stamps = ids, rows, named, stamps
        self.source, self.starts, self.lengths = source, starts, lengths
        self.positions, self.records, self.clean = positions, records, clean
        self.breaks, self.record_rows = breaks, record_rows
        self.count = len(ids) + len(records)
        self.hint: dict[str, int] = {}  # rows known without the map (the leaf's)
        self._row: dict[str, int] | None = None
        # the lengths of the ids (None: found on first use): an id of another length is not here
        self._id_lengths: set[int] | None = None if id_lengths is None else set(id_lengths)

    def parent_of(self, row: int) -> str | None:
        """The parent id of the message in ``row``."""
        p = self.rows[row]
        if p >= 0:
            return self.ids[p]
        if p == NO_PARENT:
            return None
        return self.named[row]

    def parent_list(self) -> list[str | None]:
        """Every message's parent id, by row (built when asked for, not kept)."""
        rows = self.rows
        if rows and min(rows) < NAMED_PARENT:
            raise StoreError("The session index names a parent row out of range")
        # a parent row indexes ids; -1 and -2 index the two names put after them
        by_row: list[str | None] = [*self.ids, "", None]
        parents = list(map(by_row.__getitem__, rows))
        for i, name in self.named.items():
            parents[i] = name
        return parents

    def row_map(self) -> dict[str, int]:
        """The row of every message id (built on first use)."""
        rows = self._row
        if rows is None:
            self._row = rows = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return rows

    def row(self, entry_id: str) -> int | None:
        """The row of a message id, None for any other id."""
        r = self.hint.get(entry_id)
        if r is not None:
            return r
        lengths = self._id_lengths
        if lengths is None:  # one C-speed pass: an id of another length is not here
            self._id_lengths = lengths = set(map(len, self.ids))
        if len(entry_id) not in lengths:
            return None
        return self.row_map().get(entry_id)

    def lazy(self, row: int) -> LazyMessage:
        """The lazy slot of the message in ``row``."""
        start = self.starts[row]
        return LazyMessage(
            self.ids[row],
            self.parent_of(row),
            self.stamps[row],
            self.source,
            start,
            start + self.lengths[row],
        )

    def slots(self) -> list[Slot]:
        """The ``count`` slots in file order (a lazy message each: what the session layer
        avoids making)."""
        out: list[Slot] = []
        row = 0
        prev = 0
        for p, rec in zip(self.positions, self.records, strict=True):
            out += map(self.lazy, range(row, row + p - prev))
            row += p - prev
            out.append(rec)
            prev = p + 1
        out += map(self.lazy, range(row, len(self.ids)))
        return out


class Loaded(msgspec.Struct, kw_only=True):
    header: SessionHeader
    slots: list[Any]  # list[Slot]: the slots after the columns' (all of them without columns)
    # encoded size of every record with an id (the lazy messages an index gave know their own)
    sizes: dict[str, int]
    report: LoadReport
    columns: Columns | None = None  # the first slots by column, when an index gave them

    def all_slots(self) -> list[Slot]:
        """Every slot of the load, in file order."""
        if self.columns is None:
            return self.slots
        return [*self.columns.slots(), *self.slots]


def parse_lines(
    buf: Any,
    start: int,
    end: int,
    report: LoadReport,
    first_line_no: int,
    sizes: dict[str, int],
    source: Any = None,
    base: int = 0,
    spans: list[tuple[int, int]] | None = None,
) -> tuple[list[Slot], int]:
    """Parse complete lines of ``buf[start:end]``; returns the slots and the offset after the
    last newline. Messages stay lazy; corrupt lines are reported and skipped. Lazy messages
    read their bytes from ``source`` at ``base`` + their offset in ``buf`` when a source is
    given (a file read in chunks), else from ``buf``.

    The fast path decodes every envelope in one ``decode_lines`` call (the payloads are only
    skipped); a file with a corrupt or blank line takes the line-by-line path.
    """
    bounds: list[int] = []
    find = buf.find
    pos = start
    while True:
        nl = find(b"\n", pos, end)
        if nl < 0:
            break
        bounds.append(nl)
        pos = nl + 1
    last = pos
    mv = memoryview(buf)
    try:
        envs = envelope_decoder.decode_lines(mv[start:last]) if bounds else []
    except DECODE_ERRORS:
        envs = None
    if source is None:
        source = buf
    if envs is None or len(envs) != len(bounds):
        each = _parse_each(mv, start, bounds, report, first_line_no, sizes, source, base, spans)
        return each, last
    slots: list[Slot] = []
    append = slots.append
    line_start = start
    line_no = first_line_no
    # a purged message is decoded now, so the session knows it is purged even when its
    # ``purge`` record was lost (one search per chunk; the marker cannot occur inside a string)
    marked = find(PURGED_MARK, start, last) >= 0
    for env, nl in zip(envs, bounds, strict=True):
        kind = env.type
        eid = env.id
        if (
            kind == "message"
            and eid
            and env.timestamp is not None
            and not (marked and find(PURGED_MARK, line_start, nl) >= 0)
        ):
            append(
                LazyMessage(eid, env.parent_id, env.timestamp, source, base + line_start, base + nl)
            )
            sizes[eid] = nl - line_start
        else:
            try:
                rec = decode_record(mv[line_start:nl])
            except RecordError as exc:
                report.corrupt_lines.append((line_no, str(exc)))
            else:
                append(rec)
                if rec.id is not None:
                    sizes[rec.id] = nl - line_start
                if spans is not None:
                    spans.append((base + line_start, nl - line_start))
        line_start = nl + 1
        line_no += 1
    return slots, last


def _parse_each(
    mv: memoryview,
    start: int,
    bounds: list[int],
    report: LoadReport,
    first_line_no: int,
    sizes: dict[str, int],
    source: Any,
    base: int,
    spans: list[tuple[int, int]] | None = None,
) -> list[Slot]:
    slots: list[Slot] = []
    buf: Any = mv.obj
    pos = start
    for line_no, nl in enumerate(bounds, first_line_no):
        line = mv[pos:nl]
        if nl > pos:
            try:
                env = envelope_decoder.decode(line)
            except DECODE_ERRORS as exc:
                report.corrupt_lines.append((line_no, decode_error_reason(exc, line)))
                env = None
            if env is not None:
                if (
                    env.type == "message"
                    and env.id
                    and env.timestamp is not None
                    and buf.find(PURGED_MARK, pos, nl) < 0
                ):
                    slots.append(
                        LazyMessage(
                            env.id, env.parent_id, env.timestamp, source, base + pos, base + nl
                        )
                    )
                    sizes[env.id] = nl - pos
                else:
                    try:
                        rec = decode_record(line)
                    except RecordError as exc:
                        report.corrupt_lines.append((line_no, str(exc)))
                    else:
                        slots.append(rec)
                        if rec.id is not None:
                            sizes[rec.id] = nl - pos
                        if spans is not None:
                            spans.append((base + pos, nl - pos))
        pos = nl + 1
    return slots


class AtLeaf(NamedTuple):
    """What :meth:`Log.append_at_leaf` did: ``behind``, whether the log holds records the
    session has not read (others' appends before the new record, which then went under the
    last of them; the session reads them with :meth:`Log.read_newer` before it is next read)."""

    behind: bool


class Log(Protocol):
    """One session's durable record sequence. Implementations: jsonl, memory, sqlite, postgres."""

    session_id: str
    # True when the last append (or its failure) gave the writer lock up: the session takes it
    # again, with what other writers appended meanwhile, before its next write. PostgreSQL
    # sets it for a writer that had to wait for the lock (it hands the lock on after each
    # append) and when the writer's connection broke; the other stores keep the lock.
    let_go: bool

    def load(self) -> Loaded:
        """Read the header and every complete record."""

    def acquire(self) -> list[Slot]:
        """Become the writer (non-blocking; SessionLockedError when held) and return the records
        other writers appended since the load. Idempotent once held."""

    def append(self, lines: Sequence[bytes], records: Sequence[AnyRecord] | None = None) -> None:
        """Durably append encoded records (no trailing newline); all or nothing. ``records``:
        the records ``lines`` were encoded from, when the caller has them (a backend that indexes
        what a record holds may read it from them instead of decoding the lines again)."""

    def append_at_leaf(self, line: bytes, record: AnyRecord, parent: str | None) -> AtLeaf | None:
        """Append one tree entry under the session's latest entry without becoming the writer,
        in one exchange with the store: ``line`` encodes ``record``, a child of ``parent`` (the
        session's leaf as this process knows it). When other writers appended since, the store
        puts the record under the last of their entries instead and says so (the session reads
        those records later). None when this store cannot, or not now (the caller then takes
        the writer lock and appends)."""

    def read_newer(self) -> list[Slot]:
        """The records appended since the session last read the log (only after
        :meth:`append_at_leaf` said it is behind)."""

    def raw_lines(self) -> Iterator[bytes]:
        """Every record line as stored (unknown records included), header excluded."""

    def raw_header(self) -> bytes:
        """The header line as stored (no newline), unknown fields included."""

    def companion_files(self) -> list[str]:
        """Files beside the log that hold copies of its content (backups, torn tails), which a
        purge must clean; empty for backends that keep none."""

    def rewrite(self, header: bytes, lines: Iterable[bytes]) -> None:
        """Atomically replace the whole log (writer only). No backup is kept; callers that
        need one make it first with :meth:`backup`."""

    def backup(self, suffix: str) -> str | None:
        """Keep a copy of the current log; returns where, or None for stores that keep none."""

    def release(self) -> None:
        """Give the writer lock up (no-op when not held)."""

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """A block whose appends are made durable together when it exits (one sync); stores
        whose appends are each durable on their own return a block that does nothing."""

    def size(self) -> int:
        """Encoded size of the stored log in bytes."""


class SessionSummary(msgspec.Struct, kw_only=True):
    """One row of ``Store.list()``."""

    id: str
    name: str | None
    created: str
    modified: str
    message_count: int
    first_message: str | None
    parent_session: str | None = None
    path: str = ""  # where the session lives: its file for JSONL, else ``<store url>#<id>``
    # what is wrong with the session's log, when something is (unreadable lines, no header):
    # a damaged session is still listed, flagged, and never hides the others
    damaged: str | None = None


class SessionListing(list[SessionSummary]):
    """What :meth:`Backend.list` returns: the rows (a list, newest first) and, in ``skipped``,
    the sessions that could not be read, each with the reason (as a load report names them)."""

    skipped: list[tuple[str, str]]

    def __init__(
        self, rows: Iterable[SessionSummary] = (), skipped: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(rows)
        self.skipped = list(skipped)


class CatalogLocation(msgspec.Struct, frozen=True, kw_only=True):
    """Where a backend's catalog lives: ``kind`` names the catalog implementation (``sqlite``:
    a SQLite database at ``path``, ``":memory:"`` for none on disk; ``postgres``: tables in the
    store's own database), ``exists`` whether an index was already built there."""

    kind: str
    path: str | None = None
    exists: bool = True


Changes = tuple[bool, list[Slot], str]


class Backend(Protocol):
    """What every storage backend provides. ``threadline.store.open_backend(url)`` returns one;
    :class:`threadline.Store` wraps it with sessions and the catalog."""

    url: str

    def exists(self, session_id: str) -> bool:
        """True when the session exists (UserError for an invalid id)."""

    def delete(self, session_id: str) -> None:
        """Remove the session and everything stored for it."""

    def open_log(self, session_id: str) -> Log:
        """The log of an existing session (no lock taken)."""

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> Log:
        """Create a new session atomically with its first records; UserError if it exists."""

    def session_ids(self) -> list[str]:
        """Every session id, in no particular order."""

    def list(self) -> SessionListing:
        """Every readable session, newest first; unreadable ones in ``skipped``."""

    def changes_since(self, session_id: str, cursor: str, limit: int | None = None) -> Changes:
        """What ``session_id`` appended since ``cursor`` (``""``: from the start), for
        incremental indexing: ``(reset, slots, new_cursor)``; ``reset`` means the session was
        replaced (rewritten, purged) and ``slots`` holds every record from the start. With
        ``limit`` a backend may return only the first part (about ``limit`` bytes of records)
        and a cursor after it: call again from that cursor until it stops moving."""

    def catalog_location(self) -> CatalogLocation:
        """Where this backend's catalog lives (see :class:`CatalogLocation`)."""

    def forget_listing(self, session_id: str) -> None:
        """Drop whatever the backend caches about the session outside its log (after a purge,
        a listing cache must not keep the first message)."""

    def close(self) -> None:
        """Release backend resources (connections, pools)."""


CREATE_CHUNK = 10_000
"""Records a SQL backend's ``create_log`` inserts per statement batch (an import streams)."""


def chunked(lines: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    """``lines`` in lists of at most ``size``, read as they are needed."""
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def summarize_records(
    header: SessionHeader, records: Iterable[AnyRecord | LazyMessage]
) -> SessionSummary:
    """A list row from a session's records (backends with an index compute it incrementally)."""
    name: str | None = None
    modified = header.timestamp
    count = 0
    first: str | None = None
    for rec in records:
        if rec.type == "session_info" and not isinstance(rec, LazyMessage):
            name = rec.payload.name if hasattr(rec.payload, "name") else name
        if rec.tree and rec.timestamp:
            modified = max(modified, rec.timestamp)
        if rec.type == "message":
            count += 1
            if first is None:
                msg = _message_of(rec)
                if msg is not None and msg.is_user_input:
                    first = msg.text[:200]
    return SessionSummary(
        id=header.id,
        name=name,
        created=header.timestamp,
        modified=modified,
        message_count=count,
        first_message=first,
        parent_session=header.parent_session,
    )


def _message_of(rec: AnyRecord | LazyMessage) -> Message | None:
    if isinstance(rec, LazyMessage):
        try:
            rec = rec.decode()
        except RecordError:
            return None
    return rec.message if isinstance(rec, MessageEntry) else None


@contextlib.contextmanager
def bulk_load() -> Iterator[None]:
    """Pause the cyclic garbage collector while a load builds many small objects (it costs
    3-5x otherwise); the objects built hold no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def damaged_summary(session_id: str, problem: str, modified: str = "") -> SessionSummary:
    """The list row of a session whose log cannot be read: listed, flagged, never hidden."""
    return SessionSummary(
        id=session_id,
        name=None,
        created=modified,
        modified=modified,
        message_count=0,
        first_message=None,
        damaged=problem,
    )


def not_found(session_id: str) -> NotFoundError:
    return NotFoundError(f"Session '{session_id}' not found", hint=Hint("list_sessions"))


class BaseStore:
    """Shared backend logic; backends implement ``open_log``, ``create_log``, ``session_ids``,
    ``exists`` and ``delete``, and override the rest where they can do better."""

    url: str = ""

    def open_log(self, session_id: str) -> Log:
        raise NotImplementedError

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> Log:
        raise NotImplementedError

    def session_ids(self) -> list[str]:
        raise NotImplementedError

    def exists(self, session_id: str) -> bool:
        raise NotImplementedError

    def delete(self, session_id: str) -> None:
        raise NotImplementedError

    def summary(self, session_id: str) -> SessionSummary:
        """The list row of one session (backends with an index read it from there)."""
        log = self.open_log(session_id)
        loaded = log.load()
        return summarize_records(loaded.header, loaded.all_slots())

    def list(self) -> SessionListing:
        """Every session, most recently modified first; unreadable ones in ``skipped``."""
        rows = []
        skipped = []
        for sid in self.session_ids():
            try:
                rows.append(self.summary(sid))
            except Exception as exc:  # reported in the listing, never silently dropped
                skipped.append((sid, str(exc)))
        rows.sort(key=lambda r: r.modified, reverse=True)
        return SessionListing(self._located(rows), skipped)

    def location(self, session_id: str) -> str:
        """Where a session lives: the file of a JSONL session, else ``<store url>#<id>`` (a
        password in the URL is left out)."""
        url = re.sub(r"://([^:/@]*):[^@/]*@", r"://\1@", self.url)
        return f"{url}#{session_id}"

    def _located(self, rows: builtins.list[SessionSummary]) -> builtins.list[SessionSummary]:
        return [msgspec.structs.replace(r, path=self.location(r.id)) for r in rows]

    def changes_since(self, session_id: str, cursor: str, limit: int | None = None) -> Changes:
        """The portable fallback: every record, every time (backends override it)."""
        log = self.open_log(session_id)
        loaded = log.load()
        return True, list(loaded.all_slots()), f"full:{log.size()}"

    def catalog_location(self) -> CatalogLocation:
        return CatalogLocation(kind="sqlite", path=":memory:", exists=False)

    def scrub(self) -> builtins.list[str]:
        """After a purge: remove deleted text from the backend's own files where it can
        (PostgreSQL rewrites its tables); returns the places that may still hold it."""
        return []

    def forget_listing(self, session_id: str) -> None:
        return None

    def close(self) -> None:
        """Release backend resources (connections, pools)."""
