"""The JSONL store: one ``<session_id>.jsonl`` file per session in a directory (DESIGN §2, §3).

Durability: an append is acknowledged once its whole line is written and, with
``durability="fsync"``, once ``os.fdatasync`` returned. With ``durability="group"`` concurrent
appends share syncs (see :meth:`JsonlLog.wait_durable`). Inside ``Session.batch()`` appends are
written at once and synced together when the block exits.
Short writes are looped; a failed write or sync truncates back to the last good offset and the
descriptor is dropped (fsync is never retried on it). One writer per session holds ``flock`` on
``<session_id>.lock``; readers take no lock and read up to the last newline.

Files are read with ``pread`` in chunks, never mapped: a writer in another process may truncate a
torn tail at any moment, and touching a mapped page past the new end of file kills the reader
with SIGBUS, where ``pread`` just returns fewer bytes. A loaded session keeps its index, not its
text: messages are read again when decoded (``pread`` on the descriptor opened at load, so a file
replaced since still reads as it was).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import msgspec

from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.model.entries import (
    AnyRecord,
    RecordError,
    SessionHeader,
    decode_header,
    encode,
)
from threadline.store import jsonl_index
from threadline.store.base import (
    BaseStore,
    CatalogLocation,
    Changes,
    Columns,
    Durability,
    Loaded,
    LoadReport,
    SessionListing,
    SessionSummary,
    Slot,
    check_session_id,
    not_found,
    parse_lines,
)

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 8 * 1024 * 1024
_HEAD = 64 * 1024
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# logs shorter than this are parsed at every load (it is as fast as reading an index); longer
# ones keep ``<id>.jsonl.idx`` beside them (see threadline.store.jsonl_index)
INDEX_MIN_BYTES = 256 * 1024

# Seam for tests that slow writes down and cap their size so records tear under SIGKILL.
_write = os.write


def _write_all(fd: int, data: bytes | bytearray, n: int | None = None) -> None:
    """Write all of ``data``; ``n``: what a first write of it (by the caller) wrote."""
    if n is None:
        if not data:
            return
        n = _write(fd, data)
    if n == len(data):  # the usual case: one call, no view
        return
    view = memoryview(data)
    while True:
        if n <= 0:
            raise OSError(errno.EIO, "write returned 0")
        view = view[n:]
        if not view:
            return
        n = _write(fd, view)


def _holder_pid(lfd: int) -> int | None:
    """The pid in a held lock file. The holder writes it just after taking the lock and clears it
    before letting go, so for a moment the file can be empty, or name a holder that died without
    clearing it: poll briefly for a live pid rather than name the wrong process."""
    pid: int | None = None
    for _ in range(100):
        try:
            pid = int(os.pread(lfd, 32, 0).split()[0])
        except (ValueError, IndexError, OSError):
            pid = None
        if pid is not None and _alive(pid):
            return pid
        time.sleep(0.001)
    return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tmp_tag() -> str:
    """Names a temp file after its writer (pid and thread), so threads never share one."""
    return f"{os.getpid()}-{threading.get_ident()}"


def temp_path(dest: Path) -> Path:
    """The hidden temp file to write ``dest`` through: named after its writer, so a store that
    opens after the writer was killed removes it, and a purge finds it among the session's
    files."""
    return dest.with_name(f".{dest.name}.{_tmp_tag()}.tmp")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSource:
    """Byte ranges of one open file, read with ``pread`` (``source[start:end]``); what lazy
    messages decode from. Owns the descriptor: it closes when the last reference goes."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def __getitem__(self, span: slice) -> bytes:
        start, stop = span.start, span.stop
        data = os.pread(self.fd, stop - start, start)
        if len(data) != stop - start:  # only a rewrite in place could do this; none does
            raise StoreError(
                f"{self.path} is shorter than when it was loaded; open the session again"
            )
        return data

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class JsonlLog:
    """One session file."""

    let_go = False  # the writer lock is kept until release()

    def __init__(self, directory: Path, session_id: str, durability: Durability) -> None:
        self.session_id = session_id
        self.path = directory / f"{session_id}.jsonl"
        self.lock_path = directory / f"{session_id}.lock"
        self.durability = durability
        self._source: FileSource | None = None
        self._end = 0  # offset after the last complete line we have indexed
        self._lines = 1
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._report: LoadReport | None = None
        self._sizes: dict[str, int] = {}
        # how the last load used the index: "used", "extended" (the log grew since), "rebuilt"
        # (it did not match the log), "built" (there was none), "none" (a small log)
        self.index_state = ""
        self._ino: int | None = None  # the file the offsets above refer to
        self._wlock = threading.Lock()  # one write (and its bookkeeping) at a time
        self._group = threading.Condition()  # group commit: appends waiting for a sync
        self._leading = False
        self._batch = 0  # depth of batch() blocks: their appends are synced on the way out
        self._batch_start = 0
        # group commit bookkeeping, in bytes ever appended by this log (never reused, unlike
        # file offsets after a truncation): written, durable, and covered by a failed sync
        self.written = 0
        self.synced = 0
        self.failed_upto = -1
        self._last_error = ""
        self._synced_offset = 0  # file offset a failed group sync truncates back to

    # -- reading -----------------------------------------------------------------------------

    def _open_ro(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
        except FileNotFoundError:
            raise UserError(f"Session '{self.session_id}' not found at {self.path}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(
                    f"{self.path} is a symbolic link; threadline does not follow "
                    "links to session files"
                ) from None
            raise StoreError(f"Cannot open {self.path}: {exc.strerror}") from None

    def load(self) -> Loaded:
        fd = self._open_ro()
        try:
            st = os.fstat(fd)
            size = st.st_size
            if size == 0:
                raise StoreError(
                    f"{self.path} is empty (no session header); remove it or restore "
                    "it from a backup"
                )
            head = os.pread(fd, min(size, _HEAD), 0)
            nl = head.find(b"\n")
            while nl < 0 and len(head) < size:  # a long header (metadata)
                head += os.pread(fd, min(size - len(head), _CHUNK), len(head))
                nl = head.find(b"\n")
        except BaseException:
            os.close(fd)
            raise
        source = FileSource(fd, self.path)  # owns fd from here on
        self._ino = st.st_ino
        if nl < 0:
            raise StoreError(f"{self.path} has no complete header line; restore it from a backup")
        header_line = head[:nl]
        try:
            header = decode_header(header_line)
        except RecordError as exc:
            raise StoreError(f"{self.path} line 1: {exc}") from None
        report = LoadReport()
        sizes: dict[str, int] = {}
        slots: list[Slot] = []
        spans: list[tuple[int, int]] = []  # where the decoded records are (for the index)
        columns: Columns | None = None
        end = nl + 1
        line_no = 2
        ipath = jsonl_index.index_path(self.path)
        indexed = jsonl_index.read(ipath)
        self.index_state = "built"
        if indexed is not None and end <= indexed.end <= size:
            if (indexed.head_crc, indexed.tail_crc) == jsonl_index.checksums(
                fd, head[:nl], indexed.end, end
            ):
                try:
                    spans, columns = jsonl_index.slots_of(indexed, source, sizes)
                except Exception:  # derived data that does not decode: parse the log instead
                    spans, columns = [], None
                    sizes.clear()
                    self.index_state = "rebuilt"
                else:
                    end, line_no = indexed.end, indexed.line_no
                    report.corrupt_lines.extend(indexed.corrupt)
                    self.index_state = "used" if end == size else "extended"
            else:
                self.index_state = "rebuilt"
        elif indexed is not None or ipath.exists():
            self.index_state = "rebuilt"
        covered = end
        # Read and index chunk by chunk: memory holds one chunk of text at a time, and lazy
        # messages read their bytes again from the source when decoded.
        chunk, chunk_at = head, 0
        del head
        while end < size:
            if end - chunk_at >= len(chunk) or chunk.find(b"\n", end - chunk_at) < 0:
                chunk = os.pread(fd, min(size - end, _CHUNK), end)
                chunk_at = end
                while chunk.rfind(b"\n") < 0 and chunk_at + len(chunk) < size:
                    more = os.pread(
                        fd, min(size - chunk_at - len(chunk), _CHUNK), chunk_at + len(chunk)
                    )
                    if not more:
                        break
                    chunk += more  # one line longer than a chunk (records go up to 32 MiB)
            lo = end - chunk_at
            hi = chunk.rfind(b"\n") + 1
            if hi <= lo:
                break  # a torn tail: no newline after end
            part, stop = parse_lines(chunk, lo, hi, report, line_no, sizes, source, chunk_at, spans)
            line_no += chunk.count(b"\n", lo, stop)
            slots.extend(part)
            if stop == lo:
                break
            end = chunk_at + stop
        if self.index_state != "used" and (end > covered or self.index_state != "extended"):
            if end >= INDEX_MIN_BYTES:
                crcs = jsonl_index.checksums(fd, header_line, end, nl + 1)
                if self.index_state == "extended" and indexed is not None and columns is not None:
                    body = jsonl_index.build(
                        indexed,
                        slots,
                        spans[len(columns.records) :],
                        report,
                        end,
                        line_no,
                        crcs,
                    )
                else:
                    body = jsonl_index.build(None, slots, spans, report, end, line_no, crcs)
                jsonl_index.write(ipath, body, _tmp_tag())
            else:
                if self.index_state != "built":
                    jsonl_index.remove(ipath)
                self.index_state = "none"
        report.torn_bytes = size - end
        self._source = source
        self._end = self._synced_offset = end
        self._report = report
        self._sizes = sizes
        indexed_slots = 0 if columns is None else columns.count
        self._lines = 2 + indexed_slots + len(slots) + len(report.corrupt_lines)
        return Loaded(header=header, slots=slots, sizes=sizes, report=report, columns=columns)

    def append_at_leaf(self, line: bytes, record: AnyRecord, parent: str | None) -> None:
        return None  # the writer takes the lock and keeps it: no shared append

    def read_newer(self) -> list[Slot]:
        return []  # append_at_leaf never leaves the session behind

    def raw_lines(self) -> Iterator[bytes]:
        fd = self._open_ro()
        try:
            with os.fdopen(os.dup(fd), "rb") as fh:
                fh.readline()
                for line in fh:
                    if line.endswith(b"\n"):
                        yield line[:-1]
        finally:
            os.close(fd)

    def raw_header(self) -> bytes:
        fd = self._open_ro()
        with os.fdopen(fd, "rb") as fh:
            return fh.readline().rstrip(b"\n")

    def companion_files(self) -> list[str]:
        path = self.path
        found = [p for p in path.parent.glob(f"{path.name}.*.bak") if p.is_file()]
        torn = path.with_name(f"{path.name}.torn")
        if torn.is_file():
            found.append(torn)
        found.extend(p for p in path.parent.glob(f".{path.name}.*.tmp") if p.is_file())
        # left by versions that wrote backups and torn tails through "<file>.tmp"
        found.extend(p for p in path.parent.glob(f"{path.name}.*.tmp") if p.is_file())
        return sorted(str(p) for p in found)

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    # -- writing -----------------------------------------------------------------------------

    def acquire(self) -> list[Slot]:
        if self._lock_fd is not None:
            return []
        self._take_lock()
        try:
            return self._catch_up()
        except BaseException:
            self.release()
            raise

    def _take_lock(self) -> None:
        while True:
            try:
                lfd = os.open(
                    self.lock_path, os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC, 0o644
                )
            except OSError as exc:  # a symlink planted as the lock file (ELOOP), permissions
                raise StoreError(
                    f"Cannot open the lock file {self.lock_path} ({exc.strerror}); "
                    "remove it if it is a symbolic link, then retry"
                ) from None
            try:
                fcntl.flock(lfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _holder_pid(lfd)
                os.close(lfd)
                raise SessionLockedError(self.session_id, pid) from None
            # The holder removes the lock file when it lets go (no .lock files stay behind), so
            # the file locked here may have been unlinked in between: only the lock on the file
            # that is still at lock_path counts; otherwise start over on the new one.
            try:
                same = os.stat(self.lock_path, follow_symlinks=False).st_ino == os.fstat(lfd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(lfd)
        try:
            os.ftruncate(lfd, 0)
            os.pwrite(lfd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # disk full: the lock must not outlive this failed attempt
            os.close(lfd)  # closing the descriptor drops the flock
            raise StoreError(
                f"Cannot record the writer of session '{self.session_id}' in "
                f"{self.lock_path} ({exc.strerror}); free disk space, then "
                "retry"
            ) from None
        self._lock_fd = lfd

    def lock_only(self) -> None:
        """Take the writer lock without reading the file (delete uses it); SessionLockedError
        when a live writer holds it."""
        if self._lock_fd is None:
            self._take_lock()

    def _open_rw(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | _O_NOFOLLOW | _O_CLOEXEC)
        return self._fd

    def _catch_up(self) -> list[Slot]:
        """Read what other writers appended since the load; move a torn tail aside."""
        fd = self._open_rw()
        st = os.fstat(fd)
        if self._ino is not None and st.st_ino != self._ino:
            # another writer replaced the file (purge, migration) since the load: our offsets
            # point into the old file, and reading on from them would give stale parents
            raise StoreError(
                f"Session '{self.session_id}' was rewritten by another writer since it was "
                "opened; open it again, then retry"
            )
        size = st.st_size
        if size <= self._end:
            return []
        tail = os.pread(fd, size - self._end, self._end)
        report = self._report or LoadReport()
        slots, end = parse_lines(
            tail, 0, len(tail), report, self._lines, self._sizes, self._source, self._end
        )
        self._lines += len(slots)
        if end < len(tail):
            torn = tail[end:]
            tfd = os.open(
                f"{self.path}.torn",
                os.O_WRONLY | os.O_CREAT | os.O_APPEND | _O_NOFOLLOW | _O_CLOEXEC,
                0o644,
            )
            try:
                _write_all(tfd, torn + b"\n")
                os.fsync(tfd)
            finally:
                os.close(tfd)
            os.ftruncate(fd, self._end + end)
            os.fsync(fd)
            report.torn_bytes = len(torn)
        self._end += end
        self._synced_offset = self._end  # others' lines: a failed sync never cuts below them
        return slots

    def append(self, lines: Sequence[bytes], records: Sequence[AnyRecord] | None = None) -> None:
        if self._lock_fd is None:
            raise StoreError(f"Session '{self.session_id}' is not held for writing")
        data = lines[0] + b"\n" if len(lines) == 1 else b"\n".join(lines) + b"\n"
        size = len(data)
        # "flush" and appends inside batch() write only; "fsync" syncs here, "group" waits
        durability = "flush" if self._batch else self.durability
        with self._wlock:
            fd = self._fd
            if fd is None:
                fd = self._open_rw()
            start = self._end
            try:
                n = _write(fd, data)
                if n != size:  # a short write: the rest
                    _write_all(fd, data, n)
                if durability == "fsync":
                    os.fdatasync(fd)
            except OSError as exc:
                self._fail(fd, start)
                raise self._write_error(exc) from None
            self._end = start + size
            self._lines += len(lines)
            self.written = end = self.written + size
            if durability == "fsync":
                self._synced_offset = start + size
        if durability == "group":
            self.wait_durable(end)

    def wait_durable(self, end: int) -> None:
        """Group commit (``durability="group"``): return once a sync covered ``end``.

        The first waiter becomes the leader and syncs; appends written while its sync runs
        wait for the next one, which covers all of them: N threads appending to one session
        pay about two syncs, not N. Appends to different sessions sync their own files in
        parallel, and the filesystem's journal shares the commit between them where it can
        (ext4, xfs: one journal commit for the concurrent fdatasync calls). A failed sync
        fails every append it covered, truncates the log back to its last synced offset and
        drops the descriptor, as a failed ``fsync`` append does.
        """
        with self._group:
            while self.synced < end:
                if self.failed_upto >= end:
                    raise self.sync_error(end)
                if self._leading:
                    self._group.wait()
                    continue
                self._leading = True
                upto = self.written
                self._group.release()
                try:
                    ok = self.sync_to(upto)
                finally:
                    self._group.acquire()
                    self._leading = False
                if ok:
                    self.synced = max(self.synced, upto)
                else:
                    self.failed_upto = max(self.failed_upto, upto)
                self._group.notify_all()

    def _fail(self, fd: int, start: int) -> None:
        """Truncate back to ``start`` and drop the descriptor (never retry fsync on it)."""
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        with contextlib.suppress(OSError):
            os.close(fd)
        if self._fd == fd:
            self._fd = None
        self._end = start

    def _write_error(self, exc: OSError) -> StoreError:
        return StoreError(
            f"Writing to session '{self.session_id}' failed ({exc.strerror or exc}); nothing "
            "was written. Check free disk space and permissions, then retry"
        )

    def sync_to(self, upto: int) -> bool:
        """One sync for everything written up to ``upto`` (the group commit leader's).
        On failure the log is truncated back to its last synced offset."""
        with self._wlock:
            fd = self._fd
            if upto <= self.synced:
                return True
            if fd is None:  # dropped by a failed write or sync: what it held was cut away
                return False
            offset = self._end
            try:
                os.fdatasync(fd)
            except OSError as exc:
                self._last_error = exc.strerror or str(exc)
                self._fail(fd, self._synced_offset)
                return False
            self._synced_offset = offset
            return True

    def sync_error(self, end: int) -> StoreError:
        return StoreError(
            f"Writing to session '{self.session_id}' failed ({self._last_error or 'sync failed'})"
            "; nothing was written. Check free disk space and permissions, then retry"
        )

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Appends inside are written at once and made durable with one sync when the
        outermost block exits (acknowledged then). A failed sync truncates the whole batch
        away and raises StoreError."""
        if self._batch == 0:
            self._batch_start = self._end
        self._batch += 1
        try:
            yield
        finally:
            self._batch -= 1
            if self._batch == 0 and self.durability != "flush" and self._end > self._batch_start:
                with self._wlock:
                    fd = self._fd
                    try:
                        if fd is None:
                            raise OSError(errno.EIO, "the descriptor was dropped")
                        os.fdatasync(fd)
                    except OSError as exc:
                        if fd is not None:
                            self._fail(fd, self._batch_start)
                        raise StoreError(
                            f"Syncing a batch of session '{self.session_id}' failed "
                            f"({exc.strerror or exc}); none of the batch's entries were kept. "
                            "Check free disk space and permissions, open the session again "
                            "and retry"
                        ) from None
                    self.synced = self.written
                    self._synced_offset = self._end

    def sync(self) -> None:
        if self._fd is not None:
            os.fdatasync(self._fd)

    def rewrite(self, header: bytes, lines: Iterable[bytes]) -> None:
        if self._lock_fd is None:
            raise StoreError(f"Session '{self.session_id}' is not held for writing")
        tmp = temp_path(self.path)
        try:
            write_file_atomic(tmp, self.path, header, lines, exclusive=False)
        except OSError as exc:
            raise StoreError(
                f"Rewriting session '{self.session_id}' failed "
                f"({exc.strerror or exc}); the old file is unchanged. Free disk "
                "space, then retry"
            ) from None
        jsonl_index.remove(jsonl_index.index_path(self.path))  # it indexes the old file
        self._source = None  # it reads the replaced file: what follows is read from the new one
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        fd = self._open_rw()
        st = os.fstat(fd)
        self._end = self._synced_offset = st.st_size
        self._ino = st.st_ino

    def backup(self, suffix: str) -> str | None:
        dest = self.path.with_name(f"{self.path.name}.{suffix}.bak")
        fd = self._open_ro()
        try:
            with os.fdopen(os.dup(fd), "rb") as src:
                data = src.read()
        finally:
            os.close(fd)
        try:
            write_file_atomic(temp_path(dest), dest, None, [data], raw=True, exclusive=False)
        except OSError as exc:
            raise StoreError(
                f"Cannot write the backup {dest} ({exc.strerror or exc}); free "
                "disk space, then retry"
            ) from None
        return str(dest)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)  # the next loser must not name us as holder
            # unlinked while still held: a writer that opened it meanwhile sees it is gone
            # (acquire compares inodes) and takes a fresh one
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None


def write_file_atomic(
    tmp: Path,
    dest: Path,
    header: bytes | None,
    lines: Iterable[bytes],
    *,
    exclusive: bool,
    raw: bool = False,
) -> None:
    """Write to ``tmp``, fsync, then rename (or link, when ``exclusive``) to ``dest`` and fsync
    the directory. With ``exclusive`` an existing ``dest`` raises FileExistsError."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW | _O_CLOEXEC, 0o644)
    try:
        buf = bytearray() if header is None else bytearray(header + b"\n")
        for line in lines:  # written in blocks of about 1 MB, not a write per line
            buf += line
            if not raw:
                buf += b"\n"
            if len(buf) >= 1 << 20:
                _write_all(fd, buf)
                buf.clear()
        _write_all(fd, buf)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    try:
        if exclusive:
            os.link(tmp, dest)
            os.unlink(tmp)
        else:
            os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(dest.parent)


class _CacheRow(msgspec.Struct):
    inode: int
    size: int
    offset: int
    summary: SessionSummary
    # a torn tail repaired and followed by appends can bring a file back to its cached size
    mtime_ns: int = 0


class JsonlStore(BaseStore):
    """Sessions as ``<id>.jsonl`` files in one directory."""

    def __init__(
        self, directory: str | os.PathLike[str], *, durability: Durability = "fsync"
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.durability: Durability = durability
        self.url = str(self.directory)
        self._cache_path = self.directory / ".list-cache.json"
        self._clean_temp_files()

    def _path(self, session_id: str) -> Path:
        return self.directory / f"{check_session_id(session_id)}.jsonl"

    def exists(self, session_id: str) -> bool:
        return self._path(session_id).is_file()

    def open_log(self, session_id: str) -> JsonlLog:
        return JsonlLog(self.directory, check_session_id(session_id), self.durability)

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> JsonlLog:
        dest = self._path(header.id)
        tmp = temp_path(dest)
        try:
            write_file_atomic(tmp, dest, encode(header), lines, exclusive=True)
        except FileExistsError:
            raise UserError(f"Session '{header.id}' already exists; choose another id") from None
        except OSError as exc:
            raise StoreError(
                f"Cannot create session '{header.id}' in {self.directory} "
                f"({exc.strerror or exc}); nothing was written. Check free disk "
                "space and permissions, then retry"
            ) from None
        return self.open_log(header.id)

    def _clean_temp_files(self) -> None:
        """Remove the temp files of creates, imports and rewrites whose process died (killed
        before its rename); a live process's temp file is left alone."""
        for tmp in self.directory.glob(".*.tmp"):
            tag = tmp.name[:-4].rsplit(".", 1)[-1]
            try:
                pid = int(tag.split("-", 1)[0])
            except ValueError:
                continue
            if pid != os.getpid() and not _alive(pid):
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def session_ids(self) -> list[str]:
        return [p.name[:-6] for p in self.directory.glob("*.jsonl") if not p.name.startswith(".")]

    def delete(self, session_id: str) -> None:
        """Delete a session's file and its companions. Refused while another writer holds the
        session (it would go on acknowledging appends into a deleted file)."""
        path = self._path(session_id)
        if not path.exists():
            raise not_found(session_id)
        log = self.open_log(session_id)
        log.lock_only()
        try:
            for p in self.directory.glob(f"{session_id}.jsonl*"):
                p.unlink()
            with contextlib.suppress(FileNotFoundError):
                log.lock_path.unlink()
            fsync_dir(self.directory)
        except OSError as exc:
            raise StoreError(
                f"Cannot delete session '{session_id}' ({exc.strerror}); check "
                f"the permissions of {self.directory}, then retry"
            ) from None
        finally:
            log.release()

    def list(self) -> SessionListing:
        """Every session, newest first. A cache beside the files remembers how far each file was
        read, so listing costs what was appended since the last listing, not the sessions'
        length."""
        cache = self._read_cache()
        fresh: dict[str, _CacheRow] = {}
        rows = []
        skipped = []
        for sid in self.session_ids():
            try:
                row = self._scan(sid, cache.get(sid))
            except (StoreError, UserError, OSError, RecordError) as exc:  # reported, not listed
                skipped.append((sid, str(exc)))
                continue
            fresh[sid] = row
            rows.append(row.summary)
        if fresh != cache:
            self._write_cache(fresh)
        rows.sort(key=lambda r: r.modified, reverse=True)
        return SessionListing(self._located(rows), skipped)

    def location(self, session_id: str) -> str:
        return str(self._path(session_id).resolve())

    def changes_since(self, session_id: str, cursor: str, limit: int | None = None) -> Changes:
        """Reads only the bytes appended since the cursor (``"inode:offset"``), at most about
        ``limit`` of them (whole lines); a rewrite (purge, migration) changes the inode and
        resets."""
        path = self._path(session_id)
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
        try:
            st = os.fstat(fd)
            inode, _, off = cursor.partition(":")
            reset = inode != str(st.st_ino) or int(off or 0) > st.st_size
            if not reset and int(off) == st.st_size:
                return False, [], cursor
            start = 0 if reset else int(off)
            want = st.st_size - start
            data = os.pread(fd, want if limit is None else min(want, limit), start)
            # a part ends after its last whole line; a line longer than the limit is read whole
            while len(data) < want and b"\n" not in data:
                data += os.pread(
                    fd, min(want - len(data), max(len(data), 1 << 16)), start + len(data)
                )
            if len(data) < want:
                data = data[: data.rfind(b"\n") + 1]
        finally:
            os.close(fd)
        if reset:
            nl = data.find(b"\n")
            if nl < 0:
                return True, [], f"{st.st_ino}:0"
            body_start = nl + 1
        else:
            body_start = 0
        slots, end = parse_lines(data, body_start, len(data), LoadReport(), 0, {})
        return reset, slots, f"{st.st_ino}:{start + end}"

    def catalog_location(self) -> CatalogLocation:
        path = self.directory / ".catalog.sqlite"
        return CatalogLocation(kind="sqlite", path=str(path), exists=path.exists())

    def forget_listing(self, session_id: str) -> None:
        """The listing cache holds each session's first message: a purge drops the row."""
        rows = self._read_cache()
        if session_id in rows:
            del rows[session_id]
            self._write_cache(rows)

    def summary(self, session_id: str) -> SessionSummary:
        try:
            return self._scan(session_id, self._read_cache().get(session_id)).summary
        except FileNotFoundError:
            raise not_found(session_id) from None

    def _scan(self, sid: str, cached: _CacheRow | None) -> _CacheRow:
        path = self._path(sid)
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if (
                cached is not None
                and cached.inode == st.st_ino
                and cached.size == st.st_size
                and cached.mtime_ns == st.st_mtime_ns
            ):
                return cached
            if cached is not None and cached.inode == st.st_ino and cached.offset <= st.st_size:
                start, summary = cached.offset, cached.summary
                data = os.pread(fd, st.st_size - start, start)
            else:
                data = os.pread(fd, st.st_size, 0)
                nl = data.find(b"\n")
                if nl < 0:
                    raise StoreError(
                        f"{path} has no complete header line; restore it from a backup"
                    )
                header = decode_header(data[:nl])
                summary = SessionSummary(
                    id=header.id,
                    name=None,
                    created=header.timestamp,
                    modified=header.timestamp,
                    message_count=0,
                    first_message=None,
                    parent_session=header.parent_session,
                )
                data = data[nl + 1 :]
                start = nl + 1
        finally:
            os.close(fd)
        report = LoadReport()
        slots, end = parse_lines(data, 0, len(data), report, 0, {})
        summary = _extend_summary(summary, slots, len(report.corrupt_lines))
        return _CacheRow(
            inode=st.st_ino,
            size=st.st_size,
            offset=start + end,
            summary=summary,
            mtime_ns=st.st_mtime_ns,
        )

    def _read_cache(self) -> dict[str, _CacheRow]:
        try:
            return msgspec.json.decode(self._cache_path.read_bytes(), type=dict[str, _CacheRow])
        except (OSError, msgspec.DecodeError):
            return {}

    def _write_cache(self, rows: dict[str, _CacheRow]) -> None:
        tmp = self._cache_path.with_name(f".list-cache.{_tmp_tag()}.tmp")
        try:
            tmp.write_bytes(msgspec.json.encode(rows))
            os.replace(tmp, self._cache_path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _problem(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def _extend_summary(summary: SessionSummary, slots: list[Slot], corrupt: int = 0) -> SessionSummary:
    from threadline.store.base import summarize_records

    header = SessionHeader(
        id=summary.id, version=1, timestamp=summary.modified, parent_session=summary.parent_session
    )
    tail = summarize_records(header, slots)
    damaged = summary.damaged
    if corrupt:
        before = int(damaged.split()[0]) if damaged and damaged[0].isdigit() else 0
        n = before + corrupt
        damaged = (
            f"{n} unreadable line{'s' if n != 1 else ''} skipped; run "
            f"'threadline show {summary.id}' to see which"
        )
    return SessionSummary(
        id=summary.id,
        name=tail.name or summary.name,
        created=summary.created,
        modified=max(summary.modified, tail.modified),
        message_count=summary.message_count + tail.message_count,
        first_message=summary.first_message or tail.first_message,
        parent_session=summary.parent_session,
        damaged=damaged,
    )
