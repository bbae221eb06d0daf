"""The SQLite store: every session of a store in one database file (DESIGN §9).

The database runs in WAL mode with ``synchronous=FULL`` (``durability="flush"`` uses NORMAL for
bulk work). Each record is one row of ``tl_records``: columns (seq, id, parent_id, type,
timestamp) and the record's JSON, read back exactly as written (so unknown records round-trip);
since schema version 4 the row keeps it packed (:func:`pack`: the JSON after the envelope the
columns hold, deflated with a preset dictionary). It is a rowid table (schema version 2): a row
of up to ~4,000 bytes shares its page with the rows before it, where the version-1 ``WITHOUT
ROWID`` table gave a row over ~1,000 bytes an overflow page of its own.
``tl_sessions`` keeps the list columns (name, modified, message count, first message) up to date
on every append, so listing never reads a session's records.

One writer per session: the first write takes a ``flock`` on ``<db>-writers/<session_id>.lock``
(the kernel drops it when the holder dies, so a restarted process that gets the same pid is never
locked out) and records itself in a ``tl_writers`` row inside ``BEGIN IMMEDIATE``; a second writer
gets :class:`~threadline.errors.SessionLockedError` naming the holder's pid, and a row left by a
dead writer is taken over.
Appends and rewrites are single transactions: all or nothing.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import functools
import os
import socket
import sqlite3
import threading
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.model.entries import (
    AnyRecord,
    SessionHeader,
    decode_header,
    encode,
    envelope_decoder,
    now,
)
from threadline.store import migrations
from threadline.store.base import (
    CREATE_CHUNK,
    LAZY_FROM,
    PURGED_MARK,
    BaseStore,
    CatalogLocation,
    Durability,
    Loaded,
    LoadReport,
    SessionListing,
    SessionSummary,
    Slot,
    check_session_id,
    chunked,
    load_rows,
    not_found,
    parse_lines,
    summarize_records,
)

_HOST = socket.gethostname()


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path.db`` -> ``/abs/path.db``; ``sqlite://rel.db`` -> ``rel.db``."""
    rest = url[len("sqlite:") :]
    if rest.startswith("//"):
        rest = rest[2:]
    if not rest:
        raise UserError(f"Store URL {url!r} names no database file; use sqlite:///path/to.db")
    return rest


def connect(path: str, durability: Durability = "fsync") -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, foreign keys on."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'NORMAL' if durability == 'flush' else 'FULL'}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA secure_delete=ON")  # deleted (purged) text is zeroed, not left in pages
    return conn


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database and empty it, so that text a purge removed survives in
    neither file (with ``secure_delete`` the database pages were zeroed)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# Migrations that rebuild a table or drop an index leave its old pages free in the file; VACUUM
# gives them back (once, after the last migration applied has committed; a VACUUM that fails
# leaves them to later writes).
_VACUUM_AFTER = {("sqlite", 2), ("sqlite", 3)}


def upgrade(conn: sqlite3.Connection, track: str) -> list[int]:
    """Apply the migrations of ``track`` not applied yet; returns the versions applied.

    Each migration and its bookkeeping row are one transaction, so a crash leaves the schema
    before or after it, never between. The bookkeeping row goes first: a process that opened
    the same database at the same moment and applied the migration meanwhile makes it fail at
    once, and the migration is skipped."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS tl_schema_migrations (track TEXT NOT NULL, "
        "version INTEGER NOT NULL, applied TEXT NOT NULL, PRIMARY KEY (track, version))"
    )

    def done(version: int) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM tl_schema_migrations WHERE track = ? AND version = ?",
                (track, version),
            ).fetchone()
            is not None
        )

    applied = []
    for version, _name, sql in migrations.scripts(track):
        if done(version):
            continue
        # executescript commits first; the script and its bookkeeping row go in one transaction
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE;\nINSERT INTO tl_schema_migrations VALUES ('{track}', "
                f"{int(version)}, '{now()}');\n{sql}\nCOMMIT;"
            )
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError) and done(version):
                continue  # applied by another process between our check and our transaction
            raise
        applied.append(version)
    if any((track, version) in _VACUUM_AFTER for version in applied):
        with contextlib.suppress(sqlite3.Error):
            conn.execute("VACUUM")
    return applied


class Delta:
    """What a batch of appended lines changes in a session's list row."""

    def __init__(self, header: SessionHeader, lines: Sequence[bytes]) -> None:
        buf = b"".join(line + b"\n" for line in lines)
        slots, _ = parse_lines(buf, 0, len(buf), LoadReport(), 0, {})
        summary = summarize_records(SessionHeader(id=header.id, version=1, timestamp=""), slots)
        self.name = summary.name
        self.modified = summary.modified
        self.message_count = summary.message_count
        self.first_message = summary.first_message


def envelope(line: bytes) -> tuple[str | None, str | None, str, str | None]:
    """``(id, parent_id, type, timestamp)`` of an encoded record (UserError if not a record)."""
    try:
        env = envelope_decoder.decode(line)
    except Exception as exc:
        raise UserError(f"Not a record: {exc}") from None
    return env.id, env.parent_id, env.type, env.timestamp


# How a row keeps its record (schema version 4, migrations/sqlite/0004_packed_records.sql):
# raw's first byte. Any other first byte ('{'): raw is the record's JSON as written.
_PACKED = 1  # deflate(the JSON after its envelope), the envelope rebuilt from the columns
_DEFLATED = 2  # deflate(the whole JSON): its envelope is not spelled as the columns rebuild it
_STRIPPED = 3  # the JSON after its envelope as it is: deflating it made it no shorter
_MARKS = frozenset((_PACKED, _DEFLATED, _STRIPPED))
# The preset dictionary of every deflated row: fragments of threadline's JSON, the commonest
# last (deflate reaches them by the shortest distances). Rows hold no reference to it but
# their first byte: it is never changed (another dictionary would take new first bytes).
_DICTIONARY = b"".join(
    (
        b'"stop_reason":"end_turn","stop_reason":"toolUse","stop_reason":"stop",',
        b'"usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,',
        b'"usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,"total":0},',
        b'"model":"claude-sonnet-4-5","model":"gpt-5","provider":"anthropic","provider":"openai",',
        b'"compaction":{"summary":"","first_kept_entry_id":null,"tokens_before":0}}',
        b'"branch_summary":{"from_id":"","summary":""}}',
        b'"model_change":{"provider":"","model_id":""}}',
        b'"thinking_level":{"thinking_level":"high"}}',
        b'"session_info":{"name":""}}',
        b'"label":{"target_id":"","label":""}}',
        b'"leaf":{"target_id":""}}',
        b'"provider_details":{"claude_code":{"isSidechain":false,"userType":"external",',
        b'"cwd":"/home/","sessionId":"","version":"","gitBranch":"main"}',
        b'"provider_details":{"openai_responses":{"type":"message","id":"',
        b'"provider_details":{"langchain":{"id":"',
        b'"custom":{"custom_type":"lg.w","data":{"in":["agent"]}}}',
        b'"custom":{"custom_type":"lg.s","data":{"b":{"messages":',
        b'"custom":{"custom_type":"","data":{"type":"',
        b'{"type":"thinking","thinking":{"content":"',
        b'{"type":"image","image":{"media_type":"image/png","data":"',
        b'{"type":"tool_use","tool_use":{"id":"call_","name":"","input":{"command":"',
        b'"message":{"role":"tool","content":[{"type":"tool_result","tool_result":'
        b'{"tool_use_id":"call_","content":"',
        b'"is_error":true}}],"is_error":false}}]}}',
        b'"message":{"role":"system","content":[{"type":"text","text":{"content":"',
        b'"message":{"role":"assistant","content":[{"type":"text","text":{"content":"',
        b'"message":{"role":"user","content":[{"type":"text","text":{"content":"',
        b' the \\n\\n"}}]}}',  # a text's newlines, as JSON escapes them
    )
)


def envelope_json(kind: str, eid: str | None, parent: str | None, stamp: str | None) -> bytes:
    """The start of a record's JSON as :func:`encode` writes it, up to the comma after its
    timestamp, rebuilt from the row's columns."""
    return b"".join(
        (
            b'{"type":',
            msgspec.json.encode(kind),
            b',"id":',
            msgspec.json.encode(eid),
            b',"parent_id":',
            msgspec.json.encode(parent),
            b',"timestamp":',
            msgspec.json.encode(stamp),
            b",",
        )
    )


def _deflate(data: bytes | memoryview) -> bytes:
    # a 4 KB window for a record that fits in it: the same bytes out, and a fifth of the time
    # (zlib's state for a 32 KB window is ~256 KB, allocated and freed per record)
    bits = -12 if len(data) <= 4096 else -15
    z = zlib.compressobj(6, zlib.DEFLATED, bits, 8, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
    return z.compress(data) + z.flush()


def pack(
    line: bytes, env: tuple[str | None, str | None, str, str | None]
) -> tuple[bytes, int | None]:
    """``(raw, json_bytes)`` of a row keeping ``line``, whose envelope (:func:`envelope`) the
    row's columns hold. A purged record's JSON is kept as it is: the lazy load finds it by
    :data:`PURGED_MARK` in raw."""
    if PURGED_MARK in line:
        return line, None
    eid, parent, kind, stamp = env
    start = envelope_json(kind, eid, parent, stamp)
    if line.startswith(start):
        rest = memoryview(line)[len(start) :]
        packed = _deflate(rest)
        if len(packed) < len(rest):
            return bytes((_PACKED,)) + packed, len(line)
        return bytes((_STRIPPED,)) + rest, len(line)
    packed = _deflate(line)
    if len(packed) + 1 < len(line):
        return bytes((_DEFLATED,)) + packed, len(line)
    return line, None


def unpack(raw: bytes, eid: str | None, parent: str | None, kind: str, stamp: str | None) -> bytes:
    """The record's JSON from a row (:func:`pack`). A packed row that does not inflate comes
    back as it is: a line the load reports as unreadable, the rest of the session loaded."""
    mark = raw[0] if raw else 0
    if mark not in _MARKS:
        return raw
    if mark == _STRIPPED:
        return envelope_json(kind, eid, parent, stamp) + raw[1:]
    try:
        z = zlib.decompressobj(-15, _DICTIONARY)
        data = z.decompress(raw[1:]) + z.flush()
    except zlib.error:
        return raw
    if not z.eof:
        return raw
    return envelope_json(kind, eid, parent, stamp) + data if mark == _PACKED else data


def record_values(line: bytes, packed: bool = True) -> tuple[Any, ...]:
    """The values of a tl_records row keeping ``line`` after its session_id and seq (the rest of
    INSERT_RECORD's columns), ``line`` packed (:func:`pack`) or as it is."""
    env = envelope(line)
    return (*env, *(pack(line, env) if packed else (line, None)))


def newer_schema(conn: sqlite3.Connection, path: str) -> StoreError | None:
    """The error to raise when the database was written by a newer threadline than this one
    (its schema version is one this code does not know: its rows may not read as they should)."""
    (found,) = conn.execute(
        "SELECT max(version) FROM tl_schema_migrations WHERE track = 'sqlite'"
    ).fetchone()
    known = migrations.latest("sqlite")
    if found is None or found <= known:
        return None
    return StoreError(
        f"The SQLite store {path} is at schema version {found}, written by a newer threadline "
        f"(this one reads versions up to {known}); upgrade threadline to open it"
    )


def pack_rows(path: str, *, vacuum: bool = True, batch: int = 500) -> tuple[int, int, int]:
    """:meth:`SqliteStore.pack_rows` of the database at ``path``."""
    store = SqliteStore(f"sqlite://{path}")
    try:
        return store.pack_rows(vacuum=vacuum, batch=batch)
    finally:
        store.close()


INSERT_RECORD = (
    "INSERT INTO tl_records (session_id, seq, id, parent_id, type, timestamp, raw, json_bytes) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# the columns unpack() takes after raw, in its order
UNPACK_COLUMNS = "id, parent_id, type, timestamp"


class SqliteLog:
    """One session's rows."""

    let_go = False  # the writer lock is kept until release()

    def __init__(self, store: SqliteStore, session_id: str) -> None:
        self.session_id = session_id
        self._store = store
        self._seen = 0  # highest seq read
        self._owner: str | None = None
        self._lock_fd: int | None = None

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._store.conn

    def load(self) -> Loaded:
        with self._store.lock:
            row = self._conn.execute(
                "SELECT header, generation, next_seq FROM tl_sessions WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            if row is None:
                raise not_found(self.session_id)
            # the path, not the session: a message's JSON is read when it is used (its lazy
            # slot reads it through a RowSource); the rest, and purged messages, are read now
            rows = self._conn.execute(
                "SELECT seq, id, parent_id, timestamp, coalesce(json_bytes, length(raw)), "
                "CASE WHEN ? AND type = 'message' AND id IS NOT NULL AND timestamp IS NOT NULL "
                "AND instr(raw, ?) = 0 THEN NULL ELSE raw END, type FROM tl_records "
                "WHERE session_id = ? ORDER BY seq",
                (row[2] - 1 >= LAZY_FROM, PURGED_MARK, self.session_id),
            ).fetchall()
        header = decode_header(row[0])
        report = LoadReport()
        sizes: dict[str, int] = {}
        unpacked = (  # raw is None for a message read lazily
            (seq, eid, parent, stamp, size, raw and unpack(raw, eid, parent, kind, stamp))
            for seq, eid, parent, stamp, size, raw, kind in rows
        )
        slots = load_rows(unpacked, functools.partial(self._fetch, row[1]), report, sizes, 2)
        self._seen = rows[-1][0] if rows else 0
        return Loaded(header=header, slots=slots, sizes=sizes, report=report)

    def _fetch(self, generation: int, first: int, last: int) -> list[bytes]:
        """The records ``first`` to ``last`` of the load made at ``generation`` (none if the
        session was rewritten since)."""
        with self._store.lock:
            rows = self._conn.execute(
                f"SELECT raw, {UNPACK_COLUMNS} FROM tl_records WHERE session_id = ? AND seq "
                "BETWEEN ? AND ? AND EXISTS (SELECT 1 FROM tl_sessions WHERE session_id = ? AND "
                "generation = ?) ORDER BY seq",
                (self.session_id, first, last, self.session_id, generation),
            ).fetchall()
        return [unpack(*r) for r in rows]

    @staticmethod
    def _parse(
        rows: list[Any], report: LoadReport, sizes: dict[str, int], first: int
    ) -> list[Slot]:
        """The slots of rows ``(seq, raw, *UNPACK_COLUMNS, ...)``."""
        buf = b"".join(unpack(*r[1:6]) + b"\n" for r in rows)
        slots, _ = parse_lines(buf, 0, len(buf), report, first, sizes)
        return slots

    def acquire(self) -> list[Slot]:
        if self._owner is not None:
            return []
        owner = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex}"
        # The lock that decides is a flock on a file beside the database: the kernel drops it
        # when its holder dies, whatever pid a restarted process gets (PID 1 in a container).
        # The tl_writers row names the holder and fences a writer whose lock was taken over.
        lfd = self._store.writer_lock(self.session_id)
        try:
            with self._store.lock, self._store.transaction() as conn:
                row = conn.execute(
                    "SELECT owner, host, pid FROM tl_writers WHERE session_id = ?",
                    (self.session_id,),
                ).fetchone()
                if lfd is None and row is not None and _alive(row[1], row[2]):
                    raise SessionLockedError(self.session_id, row[2])
                conn.execute(
                    "INSERT OR REPLACE INTO tl_writers VALUES (?, ?, ?, ?, ?)",
                    (self.session_id, owner, _HOST, os.getpid(), now()),
                )
                rows = conn.execute(
                    f"SELECT seq, raw, {UNPACK_COLUMNS} FROM tl_records WHERE session_id = ? "
                    "AND seq > ? ORDER BY seq",
                    (self.session_id, self._seen),
                ).fetchall()
        except BaseException:
            if lfd is not None:
                os.close(lfd)
            raise
        self._lock_fd = lfd
        self._owner = owner
        if rows:
            self._seen = rows[-1][0]
        return self._parse(rows, LoadReport(), {}, 0) if rows else []

    def _check_owner(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(
            "SELECT owner FROM tl_writers WHERE session_id = ?", (self.session_id,)
        ).fetchone()
        if self._owner is None or row is None or row[0] != self._owner:
            raise StoreError(f"Session '{self.session_id}' is not held for writing")

    def append(self, lines: Sequence[bytes], records: Sequence[AnyRecord] | None = None) -> None:
        if not lines:
            return
        values = [record_values(line, self._store.pack) for line in lines]  # before the lock
        with self._store.lock:
            try:
                with self._store.transaction() as conn:
                    self._check_owner(conn)
                    got = conn.execute(
                        "SELECT next_seq, header FROM tl_sessions WHERE session_id = ?",
                        (self.session_id,),
                    ).fetchone()
                    if got is None:
                        raise not_found(self.session_id)
                    seq = got[0]
                    conn.executemany(
                        INSERT_RECORD,
                        [(self.session_id, seq + i, *v) for i, v in enumerate(values)],
                    )
                    delta = Delta(decode_header(got[1]), lines)
                    conn.execute(
                        "UPDATE tl_sessions SET next_seq = ?, modified = max(modified, ?), "
                        "message_count = message_count + ?, name = coalesce(?, name), "
                        "first_message = coalesce(first_message, ?) WHERE session_id = ?",
                        (
                            seq + len(lines),
                            delta.modified,
                            delta.message_count,
                            delta.name,
                            delta.first_message,
                            self.session_id,
                        ),
                    )
            except sqlite3.Error as exc:
                raise StoreError(
                    f"Writing to session '{self.session_id}' failed ({exc}); nothing "
                    "was written. Check the database file and retry"
                ) from None
        self._seen = seq + len(lines) - 1

    def append_at_leaf(self, line: bytes, record: AnyRecord, parent: str | None) -> None:
        return None  # the writer takes the lock and keeps it: no shared append

    def read_newer(self) -> list[Slot]:
        return []  # append_at_leaf never leaves the session behind

    def raw_lines(self) -> Iterator[bytes]:
        with self._store.lock:
            rows = self._conn.execute(
                f"SELECT raw, {UNPACK_COLUMNS} FROM tl_records WHERE session_id = ? ORDER BY seq",
                (self.session_id,),
            ).fetchall()
        return iter([unpack(*r) for r in rows])

    def rewrite(self, header: bytes, lines: Iterable[bytes]) -> None:
        data = list(lines)
        packed = self._store.pack
        rows = [
            (self.session_id, i + 1, *record_values(line, packed)) for i, line in enumerate(data)
        ]
        parsed = decode_header(header)
        with self._store.lock, self._store.transaction() as conn:
            self._check_owner(conn)
            conn.execute("DELETE FROM tl_records WHERE session_id = ?", (self.session_id,))
            conn.executemany(INSERT_RECORD, rows)
            d = Delta(parsed, data)
            conn.execute(
                "UPDATE tl_sessions SET header = ?, next_seq = ?, generation = generation + 1, "
                "modified = max(created, ?), message_count = ?, name = ?, first_message = ? "
                "WHERE session_id = ?",
                (
                    header,
                    len(data) + 1,
                    d.modified,
                    d.message_count,
                    d.name,
                    d.first_message,
                    self.session_id,
                ),
            )
        with self._store.lock:
            checkpoint(self._store.conn)
        self._seen = len(data)

    def backup(self, suffix: str) -> str | None:
        return None  # the database's own backups cover it; purge must leave no copy behind

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # every append is durable on its own

    def release(self) -> None:
        if self._owner is None:
            return
        with self._store.lock, contextlib.suppress(sqlite3.Error):
            self._conn.execute(
                "DELETE FROM tl_writers WHERE session_id = ? AND owner = ?",
                (self.session_id, self._owner),
            )
        self._owner = None
        lfd, self._lock_fd = self._lock_fd, None
        if lfd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(lfd, 0)
            with contextlib.suppress(OSError):
                os.close(lfd)  # drops the flock

    def raw_header(self) -> bytes:
        with self._store.lock:
            row = self._conn.execute(
                "SELECT header FROM tl_sessions WHERE session_id = ?", (self.session_id,)
            ).fetchone()
        if row is None:
            raise not_found(self.session_id)
        return bytes(row[0])

    def companion_files(self) -> list[str]:
        return []

    def size(self) -> int:
        with self._store.lock:
            row = self._conn.execute(
                "SELECT coalesce(sum(coalesce(json_bytes, length(raw)) + 1), 0), "
                "(SELECT length(header) + 1 FROM tl_sessions WHERE session_id = ?) "
                "FROM tl_records WHERE session_id = ?",
                (self.session_id, self.session_id),
            ).fetchone()
        return int(row[0] or 0) + int(row[1] or 0)


def _alive(host: str, pid: int) -> bool:
    if host != _HOST:
        return True  # another machine's writer: we cannot tell, so it holds the session
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SqliteStore(BaseStore):
    """Sessions as rows of one SQLite database (``sqlite:///path.db``)."""

    def __init__(self, url: str, *, durability: Durability = "fsync", pack: bool = True) -> None:
        """``pack``: rows written keep their records packed (:func:`pack`, schema version 4);
        False keeps each record's JSON as it is (more bytes, no inflating when it is read).
        Either way every row reads back, whichever way it was written."""
        path = sqlite_path(url)
        if path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            path = str(Path(path).expanduser())
        self.path = path
        self.url = url
        self.durability: Durability = durability
        self.pack = pack
        self.lock = threading.RLock()
        try:
            self.conn = connect(path, durability)
            upgrade(self.conn, "sqlite")
            newer = newer_schema(self.conn, path)
        except sqlite3.Error as exc:
            raise StoreError(f"Cannot open SQLite store {path}: {exc}") from None
        if newer is not None:
            self.conn.close()
            raise newer

    def pack_rows(self, *, vacuum: bool = True, batch: int = 500) -> tuple[int, int, int]:
        """Pack the rows that keep their record's JSON as it is (rows written before schema
        version 4, or with ``pack=False``), in place, ``batch`` rows a transaction, so that the
        file needs no second copy; then ``VACUUM`` gives the pages freed back to the file system
        (it needs free disk for one copy of the file for a moment). Returns ``(rows packed,
        bytes of their raw before, after)``. Writers may go on meanwhile: a row changed since it
        was read (a purge rewrote the session) is left as it is."""
        packed = before = after = 0
        last = 0
        try:
            while True:
                with self.lock:
                    rows = self.conn.execute(
                        f"SELECT rowid, raw, {UNPACK_COLUMNS} FROM tl_records WHERE rowid > ? "
                        "AND json_bytes IS NULL ORDER BY rowid LIMIT ?",
                        (last, batch),
                    ).fetchall()
                if not rows:
                    break
                last = rows[-1][0]
                updates = []
                for rowid, raw, eid, parent, kind, stamp in rows:
                    line = bytes(raw)
                    if line[:1] != b"{":
                        continue
                    new, size = pack(line, (eid, parent, kind, stamp))
                    if size is not None:
                        updates.append((new, size, rowid, line))
                if not updates:
                    continue
                with self.lock, self.transaction() as conn:
                    for new, size, rowid, line in updates:
                        if conn.execute(
                            "UPDATE tl_records SET raw = ?, json_bytes = ? WHERE rowid = ? AND "
                            "json_bytes IS NULL AND raw = ?",
                            (new, size, rowid, line),
                        ).rowcount:
                            packed += 1
                            before += len(line)
                            after += len(new)
            with self.lock:
                checkpoint(self.conn)
                if vacuum and packed:
                    self.conn.execute("VACUUM")
        except sqlite3.Error as exc:
            raise StoreError(
                f"Packing the SQLite store {self.path} stopped ({exc}); the rows packed so far "
                "are kept and read back as before. Check the file and free disk space, then run "
                "it again"
            ) from None
        return packed, before, after

    def writer_lock(self, session_id: str) -> int | None:
        """Take the writer flock of a session (``<db>-writers/<id>.lock``); returns its
        descriptor, or None for an in-memory database (the tl_writers row decides there).
        SessionLockedError when a live writer holds it."""
        if self.path == ":memory:":
            return None
        folder = Path(f"{self.path}-writers")
        try:
            folder.mkdir(exist_ok=True)
            lfd = os.open(
                folder / f"{session_id}.lock",
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0),
                0o644,
            )
        except OSError as exc:
            raise StoreError(
                f"Cannot open the writer lock of session '{session_id}' in "
                f"{folder} ({exc.strerror}); check its permissions and free disk "
                "space, then retry"
            ) from None
        try:
            fcntl.flock(lfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid: int | None = int(os.pread(lfd, 32, 0).split()[0])
            except (ValueError, IndexError, OSError):
                pid = None
            os.close(lfd)
            raise SessionLockedError(session_id, pid) from None
        with contextlib.suppress(OSError):
            os.ftruncate(lfd, 0)
            os.pwrite(lfd, f"{os.getpid()}\n".encode(), 0)
        return lfd

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self.lock:
            return (
                self.conn.execute(
                    "SELECT 1 FROM tl_sessions WHERE session_id = ?", (session_id,)
                ).fetchone()
                is not None
            )

    def open_log(self, session_id: str) -> SqliteLog:
        return SqliteLog(self, check_session_id(session_id))

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> SqliteLog:
        """One transaction; ``lines`` is consumed in chunks (never held whole), each chunk
        inserted and added to the list columns as an append would."""
        try:
            with self.lock, self.transaction() as conn:
                conn.execute(
                    "INSERT INTO tl_sessions (session_id, header, created, modified, name, "
                    "message_count, first_message, parent_session, next_seq) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.id,
                        encode(header),
                        header.timestamp,
                        header.timestamp,
                        None,
                        0,
                        None,
                        header.parent_session,
                        1,
                    ),
                )
                seq = 0
                for chunk in chunked(lines, CREATE_CHUNK):
                    conn.executemany(
                        INSERT_RECORD,
                        [
                            (header.id, seq + i + 1, *record_values(line, self.pack))
                            for i, line in enumerate(chunk)
                        ],
                    )
                    seq += len(chunk)
                    d = Delta(header, chunk)
                    conn.execute(
                        "UPDATE tl_sessions SET next_seq = ?, modified = max(modified, ?), "
                        "message_count = message_count + ?, name = coalesce(?, name), "
                        "first_message = coalesce(first_message, ?) WHERE session_id = ?",
                        (seq + 1, d.modified, d.message_count, d.name, d.first_message, header.id),
                    )
        except sqlite3.IntegrityError:
            raise UserError(f"Session '{header.id}' already exists; choose another id") from None
        return self.open_log(header.id)

    def session_ids(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.conn.execute("SELECT session_id FROM tl_sessions")]

    def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self.lock, self.transaction() as conn:
            cur = conn.execute("DELETE FROM tl_sessions WHERE session_id = ?", (session_id,))
            if cur.rowcount == 0:
                raise not_found(session_id)
            conn.execute("DELETE FROM tl_writers WHERE session_id = ?", (session_id,))

    _LIST = (
        "SELECT session_id, name, created, modified, message_count, first_message, "
        "parent_session FROM tl_sessions"
    )

    def list(self) -> SessionListing:
        """Every session, most recently modified first, from the list columns alone (kept at
        each append, so no session is ever unreadable here: ``skipped`` stays empty)."""
        with self.lock:
            rows = self.conn.execute(self._LIST + " ORDER BY modified DESC").fetchall()
        return SessionListing(self._located([summary_row(r) for r in rows]))

    def catalog_location(self) -> CatalogLocation:
        return CatalogLocation(kind="sqlite", path=self.path)

    def summary(self, session_id: str) -> SessionSummary:
        with self.lock:
            row = self.conn.execute(self._LIST + " WHERE session_id = ?", (session_id,)).fetchone()
        if row is None:
            raise not_found(session_id)
        return summary_row(row)

    def changes_since(
        self, session_id: str, cursor: str, limit: int | None = None
    ) -> tuple[bool, builtins.list[Slot], str]:
        """Records appended since ``cursor`` (``"generation:seq"``) for the catalog: returns
        ``(reset, slots, new_cursor)``; ``reset`` means the session was rewritten and every
        record is returned (with ``limit``, the records up to about ``limit`` bytes)."""
        with self.lock:
            row = self.conn.execute(
                "SELECT generation FROM tl_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return True, [], ""
            gen, _, seq_s = cursor.partition(":")
            reset = gen != str(row[0])
            seq = 0 if reset else int(seq_s or 0)
            cur = self.conn.execute(
                f"SELECT seq, raw, {UNPACK_COLUMNS}, coalesce(json_bytes, length(raw)) "
                "FROM tl_records WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, seq),
            )
            if limit is None:
                rows = cur.fetchall()
            else:
                rows, size = [], 0
                for r in cur:
                    rows.append(r)
                    size += r[6]
                    if size >= limit:
                        break
                cur.close()
        last = rows[-1][0] if rows else seq
        return reset, SqliteLog._parse(rows, LoadReport(), {}, 0), f"{row[0]}:{last}"

    def close(self) -> None:
        super().close()
        with self.lock, contextlib.suppress(sqlite3.Error):
            self.conn.close()


def summary_row(r: Any) -> SessionSummary:
    """A session's list row (id, name, created, modified, message_count, first_message,
    parent_session: the database stores' column order) as a summary."""
    return SessionSummary(
        id=r[0],
        name=r[1],
        created=r[2],
        modified=r[3],
        message_count=r[4],
        first_message=r[5],
        parent_session=r[6],
    )
