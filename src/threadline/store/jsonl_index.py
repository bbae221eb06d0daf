"""The index beside a JSONL log: ``<session_id>.jsonl.idx`` (derived data, issue 19).

It holds what a load of the log finds, without the text: for every record slot in file order
its kind (a lazy message, or a record the load decodes), its byte offset and length; for every
message its id, its parent (as the row of another message, or the id itself when the parent is
not a message) and its timestamp; the corrupt lines reported and the line count. With it a load
reads the header, the index and the few records it decodes (meta records, summaries, labels),
not the whole file, and finds no newline.

Never trusted over the log: the index names how many bytes of the log it covers and checksums
of the header line and of the last 4 KiB it covered. A log that does not match (replaced,
truncated, rewritten by a purge) is parsed in full and the index written again; a log that grew
by appends is parsed from where the index stops and the index extended. An unreadable, torn or
foreign index file (its own checksum, format version, array lengths) is the same as none. It is
written to a temp file and renamed, never synced: after a crash it is at worst stale or missing,
which the checks above catch. It holds no message text, so a purge has nothing to clean in it
(a rewrite removes it anyway, and the next load builds it again).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from array import array
from pathlib import Path
from typing import Any

import msgspec

from threadline.model.entries import decode_record
from threadline.store.base import (
    NAMED_PARENT,
    NO_PARENT,
    Columns,
    LazyMessage,
    LoadReport,
    Slot,
    Stamps,
)

MAGIC = b"TLIX"
VERSION = 5  # 5: where runs of parents break, record rows, id lengths, clean covers records
TAIL = 4096  # bytes of the log's covered end that the tail checksum reads
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONE = NO_PARENT  # parent row: no parent
_NAMED = NAMED_PARENT  # parent row: the parent id is kept by name (not a message)


class IndexBody(msgspec.Struct, array_like=True):
    """The index file after its 8-byte prefix (magic, crc32 of this body). The arrays decode
    as views of the file's bytes (no copy): an open of 1M entries reads ~55 MB once."""

    version: int
    end: int  # bytes of the log covered: the offset after the last complete line
    line_no: int  # the line number the next line of the log gets
    head_crc: int  # crc32 of the header line
    tail_crc: int  # crc32 of the TAIL bytes before ``end``
    kinds: bytes  # per slot: 0 a lazy message, 1 a record decoded at load
    starts: memoryview  # array("q") per slot: byte offset in the log
    lengths: memoryview  # array("I") per slot: line length without the newline
    # per message; a tuple: the cyclic GC stops tracking a tuple of strings, and the session
    # keeps this one (a list of 1M ids would be walked by every full collection, ~10 ms)
    ids: tuple[str, ...]
    parents: memoryview  # array("i") per message: row of the parent message, _NONE or _NAMED
    named: dict[int, str]  # message row -> parent id, for the _NAMED rows
    stamps: memoryview  # per message, one after another: its timestamp in UTF-8
    stamp_ends: memoryview  # array("q") per message: where its timestamp ends in stamps
    corrupt: list[tuple[int, str]]
    # no entry repeats an id, names a parent or moves the leaf to an entry not seen before it
    clean: bool
    record_ids: list[str | None]  # per decoded record: its id when it is a tree entry
    # array("i"), ascending: the message rows whose parent is not the row before (row 0 first)
    breaks: memoryview
    # array("i") per decoded record: the row of the message that is its parent (a tree entry)
    # or its target (a leaf record), else _NONE or _NAMED
    record_rows: memoryview
    id_lengths: list[int]  # the lengths of the message ids, each once (a filter for lookups)


_decoder = msgspec.msgpack.Decoder(IndexBody)
_encoder = msgspec.msgpack.Encoder()


def index_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".idx")


def checksums(fd: int, header_line: bytes, end: int, body_start: int) -> tuple[int, int]:
    """(header crc, tail crc) of a log whose covered part ends at ``end``."""
    lo = max(body_start, end - TAIL)
    tail = os.pread(fd, end - lo, lo) if end > lo else b""
    return zlib.crc32(header_line), zlib.crc32(tail)


def read(path: Path) -> IndexBody | None:
    """The index at ``path``, or None when it is missing or unreadable in any way."""
    try:  # never through a symbolic link (as the log itself)
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if len(data) < 8 or data[:4] != MAGIC:
        return None
    if int.from_bytes(data[4:8], "little") != zlib.crc32(memoryview(data)[8:]):
        return None
    try:
        body = _decoder.decode(memoryview(data)[8:])
    except (msgspec.DecodeError, ValueError, TypeError):
        return None
    n = len(body.kinds)
    m = len(body.ids)
    if (
        body.version != VERSION
        or len(body.starts) != 8 * n
        or len(body.lengths) != 4 * n
        or len(body.parents) != 4 * m
        or len(body.stamp_ends) != 8 * m
        or body.kinds.count(0) != m
        or len(body.record_ids) != n - m
        or len(body.record_rows) != 4 * (n - m)
        or len(body.breaks) % 4
        or (m and body.breaks[:4] != bytes(4))
        or body.end < 0
    ):
        return None
    return body


def build(
    base: IndexBody | None,
    slots: list[Slot],
    spans: list[tuple[int, int]],
    report: LoadReport,
    end: int,
    line_no: int,
    crcs: tuple[int, int],
) -> IndexBody:
    """The index of a load: ``base`` (the index of the log's first part, None for none)
    extended by ``slots``, the slots that follow it in file order, and the spans of the
    decoded records among them. Costs what the new slots cost, plus one C-speed pass over the
    old ids when a new entry names a parent other than the message before it."""
    if base is None:
        kinds = bytearray()
        starts = array("q")
        lengths = array("I")
        parents = array("i")
        ids: list[str] = []
        stamps = bytearray()
        stamp_ends = array("q")
        named: dict[int, str] = {}
        record_ids: list[str | None] = []
        breaks = array("i")
        record_rows = array("i")
        clean = True
    else:
        kinds = bytearray(base.kinds)
        starts = _array("q", base.starts)
        lengths = _array("I", base.lengths)
        parents = _array("i", base.parents)
        ids = list(base.ids)
        stamps = bytearray(base.stamps)
        stamp_ends = _array("q", base.stamp_ends)
        named = dict(base.named)
        record_ids = list(base.record_ids)
        breaks = _array("i", base.breaks)
        record_rows = _array("i", base.record_rows)
        clean = base.clean
    seen: set[str] | None = None  # every tree id so far (for ``clean``), built when needed
    row: dict[str, int] | None = None  # a row of every message id so far, built when needed

    def row_of(name: str | None) -> int:
        nonlocal row
        if name is None:
            return _NONE
        if ids and ids[-1] == name:  # the common case: the message before it
            return len(ids) - 1
        if row is None:
            row = dict(zip(ids, range(len(ids)), strict=True))
        return row.get(name, _NAMED)

    def seen_ids() -> set[str]:
        nonlocal seen
        if seen is None:
            seen = set(ids)
            seen.update(r for r in record_ids if r is not None)
        return seen

    decoded = iter(spans)
    for slot in slots:
        if slot.__class__ is LazyMessage:
            eid, p = slot.id, slot.parent_id
            if clean:
                known = seen_ids()
                clean = eid not in known and (p is None or p in known)
            if seen is not None:
                seen.add(eid)
            r = row_of(p)
            if r == _NAMED:
                named[len(ids)] = p  # type: ignore[assignment]  # (p is not None here)
            if not ids or r != len(ids) - 1:
                breaks.append(len(ids))
            parents.append(r)
            if row is not None:
                row[eid] = len(ids)
            ids.append(eid)
            stamps += slot.timestamp.encode("utf-8", "surrogatepass")
            stamp_ends.append(len(stamps))
            kinds.append(0)
            starts.append(slot._start)
            lengths.append(slot._end - slot._start)
        else:
            kinds.append(1)
            rid = slot.id if slot.tree else None
            target: str | None = None
            if rid is not None:  # a tree entry: it points at its parent
                target = slot.parent_id
                if clean:
                    known = seen_ids()
                    clean = rid not in known and (target is None or target in known)
                if seen is not None:
                    seen.add(rid)
            elif slot.type == "leaf":  # a leaf record: at its target
                target = getattr(getattr(slot, "payload", None), "target_id", None)
                if clean:
                    clean = target is None or target in seen_ids()
            record_ids.append(rid)
            record_rows.append(row_of(target))
            start, length = next(decoded)
            starts.append(start)
            lengths.append(length)
    return IndexBody(
        version=VERSION,
        end=end,
        line_no=line_no,
        head_crc=crcs[0],
        tail_crc=crcs[1],
        kinds=bytes(kinds),
        starts=memoryview(starts.tobytes()),
        lengths=memoryview(lengths.tobytes()),
        ids=tuple(ids),
        parents=memoryview(parents.tobytes()),
        named=named,
        stamps=memoryview(bytes(stamps)),
        stamp_ends=memoryview(stamp_ends.tobytes()),
        corrupt=list(report.corrupt_lines),
        clean=clean,
        record_ids=record_ids,
        breaks=memoryview(breaks.tobytes()),
        record_rows=memoryview(record_rows.tobytes()),
        id_lengths=sorted(set(map(len, ids))),
    )


def slots_of(
    body: IndexBody, source: Any, sizes: dict[str, int]
) -> tuple[list[tuple[int, int]], Columns]:
    """The load of the indexed part by column (lazy messages read from ``source``, made only
    when asked for; records decoded now, their sizes put in ``sizes``) and the spans of the
    decoded records. Makes no object per message: the ids are the index's, the parents stay
    rows (the session layer walks them). Raises on anything that does not decode (the caller
    then parses the log instead)."""
    # views of the index's bytes as typed arrays (no copy)
    starts = body.starts.cast("q")
    lengths = body.lengths.cast("I")
    rows = body.parents.cast("i")
    breaks = body.breaks.cast("i")
    record_rows = body.record_rows.cast("i")
    stamp_ends = body.stamp_ends.cast("q")
    if stamp_ends and stamp_ends[-1] != len(body.stamps):
        raise ValueError("the timestamps do not end where their last one does")
    ids = body.ids
    named = body.named
    if any(not 0 <= i < len(rows) or rows[i] != _NAMED for i in named):
        raise ValueError("a named parent row without its name")
    kinds = body.kinds
    positions: list[int] = []  # where the decoded records stand among the slots
    p = kinds.find(1)
    while p >= 0:
        positions.append(p)
        p = kinds.find(1, p + 1)
    n = len(kinds)
    if positions:
        msg_starts = array("q")
        msg_lengths = array("I")
        prev = 0
        for p in [*positions, n]:
            msg_starts.frombytes(body.starts[8 * prev : 8 * p])
            msg_lengths.frombytes(body.lengths[4 * prev : 4 * p])
            prev = p + 1
    else:
        msg_starts, msg_lengths = starts, lengths  # type: ignore[assignment]
    spans = [(starts[p], lengths[p]) for p in positions]
    records = [decode_record(source[a : a + n_]) for a, n_ in spans]
    for rec, (_, size) in zip(records, spans, strict=True):
        if rec.id is not None:
            sizes[rec.id] = size
    cols = Columns(
        ids,
        rows,
        named,
        Stamps(body.stamps, stamp_ends),
        source,
        msg_starts,
        msg_lengths,
        positions,
        records,
        body.clean,
        breaks,
        record_rows,
        body.id_lengths,
    )
    return spans, cols


def _array(typecode: str, data: memoryview) -> array[Any]:
    out = array(typecode)
    out.frombytes(data)
    return out


def write(path: Path, body: IndexBody, tag: str) -> None:
    """Write the index atomically (temp file, rename); a failure leaves no index (the log is
    parsed next time), never an error."""
    data = _encoder.encode(body)
    tmp = path.with_name(f".{path.name}.{tag}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW | _O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + zlib.crc32(data).to_bytes(4, "little"))
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
