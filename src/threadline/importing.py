"""Importing transcripts from other tools as threadline sessions.

Every importer in ``threadline.formats`` (``pi``, ``claude_code``, ``chatgpt_export``, ``codex``,
``google_adk``, ``chat_history``) turns a source file into one or more :class:`Draft` sessions:
records with the source's own ids, parents and timestamps. A draft encodes and checks each record
as it is added and spools the encoded line to a temporary file (kept in memory while small), so a
draft holds ids and counters, not decoded records: memory stays bounded however long the source.
Only when every draft is complete are they written, each session in one atomic step (temp file,
one sync, rename) fed from its spool, so a failed import leaves nothing behind.

Two kinds of trouble are told apart:

- a file that is not what it claims (a ChatGPT export without ``mapping``, a pi file without a
  session header, a record of the wrong shape) raises :class:`~threadline.errors.UserError`
  naming the file, the place (a line; a JSON path such as ``at $[0].mapping["n1"]`` in a
  whole-file document) and the problem; nothing is written. Importers call :func:`at` as they
  go, so that even an error no check foresaw names the place it arose;
- a line that is damaged inside an otherwise good file (the invalid JSON a crash or a bad merge
  leaves) is reported, kept as a ``custom`` entry of type ``import.corrupt_line`` (so nothing is
  lost), and the lines around it are imported as usual.

What an import reported is stored with the session, in its header's ``metadata["import"]``, and
:func:`report_of` reads it back.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import os
import re
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import msgspec

from threadline.errors import LimitError, ThreadlineError, UserError, malformed_input
from threadline.model.content import Message
from threadline.model.entries import (
    DECODE_ERRORS,
    Custom,
    CustomEntry,
    KnownRecord,
    Leaf,
    LeafRecord,
    RecordError,
    SessionHeader,
    decode_error_reason,
    decode_header,
    encode,
    new_id,
    now,
    utf8_error_offset,
)
from threadline.model.limits import check_record, encode_checked
from threadline.store.base import SESSION_ID_RE
from threadline.stores import Store

if TYPE_CHECKING:
    from threadline.session import Session

FORMATS: dict[str, str] = {
    "pi": "threadline.formats.pi",
    "claude_code": "threadline.formats.claude_code",
    "chatgpt_export": "threadline.formats.chatgpt_export",
    "codex": "threadline.formats.codex",
    "google_adk": "threadline.formats.google_adk",
    "chat_history": "threadline.formats.chat_history",
}
"""Importable formats by name, each a module with ``parse``, ``load`` and ``import_session``."""

CORRUPT_LINE = "import.corrupt_line"
MAX_REPORTED = 200  # warnings kept in a session's metadata; the count says how many there were

Source = str | bytes | os.PathLike[str] | Sequence[Any] | dict[str, Any]


class ImportReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What an import noticed: corrupt lines (kept as custom entries) and other warnings."""

    format: str
    source: str
    source_id: str | None = None
    #: SHA-256 of the imported file's bytes: a second import of the same file is detected
    sha256: str | None = None
    corrupt_lines: list[tuple[int, str]] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    warning_count: int = 0

    def warn(self, message: str) -> None:
        self.warning_count += 1
        if len(self.warnings) < MAX_REPORTED:
            self.warnings.append(message)

    def corrupt(self, line: int, problem: str) -> None:
        self.corrupt_lines.append((line, problem))

    @property
    def problems(self) -> int:
        """Corrupt lines plus warnings."""
        return len(self.corrupt_lines) + self.warning_count

    def lines(self) -> list[str]:
        """The report as human-readable lines (what the CLI prints)."""
        out = [
            f"{self.source}: line {n}: {why} (kept as a {CORRUPT_LINE} entry)"
            for n, why in self.corrupt_lines
        ]
        out.extend(f"{self.source}: {w}" for w in self.warnings)
        if self.warning_count > len(self.warnings):
            out.append(
                f"{self.source}: … and {self.warning_count - len(self.warnings)} more warnings"
            )
        return out


class Draft:
    """A session being built, not yet written: header fields, the ids taken so far and the
    encoded records in file order, spooled to a temporary file as they are added.

    An importer that changes records after adding them (Claude Code re-parents parallel tool
    results) passes ``hold=True``: its records are kept as they are and encoded by
    :meth:`finish`.
    """

    #: a draft's encoded records stay in memory up to this size, then move to a temporary file
    SPOOL_IN_MEMORY = 8 << 20

    def __init__(
        self,
        report: ImportReport,
        *,
        source_id: str | None = None,
        cwd: str | None = None,
        metadata: dict[str, Any] | None = None,
        created: str | None = None,
        hold: bool = False,
    ) -> None:
        self.report = report
        self.source_id = source_id
        self.cwd = cwd
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.created = created
        self.leaf: str | None = None  # set when the leaf is not the last tree record
        self._ids: set[str] = set()
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed by close()
            max_size=self.SPOOL_IN_MEMORY, prefix="threadline-import-"
        )
        # a draft dropped by a failed import closes its spool (and removes its file) when freed
        self.close = weakref.finalize(self, self._spool.close)
        self._last_tree: str | None = None
        self._held: list[KnownRecord] | None = [] if hold else None
        self.entries = 0  # records added
        self.messages = 0
        #: where in the source each record came from ("line 12", "at $[0].mapping…"), so
        #: that a record refused when it is written names its place in the file
        self.origin: dict[str, str] = {}

    def unique_id(self, wanted: str | None, line: int | None = None) -> str:
        """``wanted`` if it is a new id, else a fresh one (a duplicate is reported)."""
        if wanted and wanted not in self._ids:
            self._ids.add(wanted)
            return wanted
        fresh = new_id()
        if wanted:
            where = f"line {line}: " if line is not None else ""
            self.report.warn(f"{where}duplicate id {wanted!r} renamed to {fresh!r}")
        self._ids.add(fresh)
        return fresh

    def has(self, entry_id: str | None) -> bool:
        return entry_id is not None and entry_id in self._ids

    def add(self, record: KnownRecord) -> str:
        """Append a prepared record (its id must come from :meth:`unique_id`): it is encoded,
        checked against the ingest limits and spooled; the record itself is not kept (unless
        the draft holds its records, see :class:`Draft`). A record refused names the place in
        the source the importer had reached (:func:`at`)."""
        position = _AT.get()
        if self._held is not None:
            self._held.append(record)
            if position:
                self.origin[record.id] = position
        else:
            self._spool_record(record, position)
        self.entries += 1
        if record.tree:
            self._last_tree = record.id
        if record.type == "message":
            self.messages += 1
        return record.id

    def _spool_record(self, record: KnownRecord, position: str = "") -> None:
        try:
            line = encode_checked(encode, record)
            check_record(record.payload, line, 1 if record.parent_id is None else 0)
        except UserError as exc:
            where = f"{position}: " if position else ""
            raise type(exc)(f"{self.report.source}: {where}entry {record.id!r}: {exc}") from None
        self._spool.write(line)
        self._spool.write(NL)

    def finish(self) -> None:
        """Encode and check held records (nothing to do for a streaming draft)."""
        held, self._held = self._held, None
        for record in held or ():
            self._spool_record(record, self.origin.get(record.id, ""))
        self.origin.clear()

    def lines(self) -> Iterator[bytes]:
        """The encoded records in order (read back from the spool), then a leaf record when
        the leaf is not the last tree record."""
        self.finish()
        spool = self._spool
        spool.flush()
        spool.seek(0)
        for line in spool:
            yield line[:-1]
        spool.seek(0, os.SEEK_END)
        if self.leaf is not None and self._last_tree != self.leaf:
            yield encode(
                LeafRecord(
                    id=new_id(), parent_id=None, timestamp=now(), leaf=Leaf(target_id=self.leaf)
                )
            )

    def add_corrupt_line(
        self, line: int, raw: bytes, problem: str, parent: str | None, timestamp: str
    ) -> str:
        """Report a damaged line and keep its text as a ``custom`` entry under ``parent``."""
        self.report.corrupt(line, problem)
        at(line)
        eid = self.unique_id(f"corrupt-line-{line}")
        return self.add(
            CustomEntry(
                id=eid,
                parent_id=parent,
                timestamp=timestamp,
                custom=Custom(
                    custom_type=CORRUPT_LINE,
                    data={"line": line, "problem": problem, "text": raw.decode("utf-8", "replace")},
                ),
            )
        )


class Importer(Protocol):
    """What every importer module provides (see ``threadline.formats.pi`` for one)."""

    def parse(self, source: Source, *, name: str | None = None) -> list[Draft]: ...


# -- reading sources ----------------------------------------------------------------------------


def source_name(source: Source, name: str | None = None) -> str:
    if name is not None:
        return name
    if isinstance(source, (str, os.PathLike)) and not _looks_like_content(source):
        return str(source)
    return "<data>"


def _looks_like_content(source: str | os.PathLike[str]) -> bool:
    return isinstance(source, str) and (source.lstrip()[:1] in ("{", "[") or "\n" in source)


@contextlib.contextmanager
def source_errors(name: str) -> Iterator[None]:
    """A source file's OS errors (opening or reading it) as UserErrors that say what to do."""
    try:
        yield
    except FileNotFoundError:
        raise UserError(f"{name}: no such file; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{name} is a directory; pass the transcript file inside it") from None
    except OSError as exc:
        raise UserError(f"{name}: cannot read it ({exc.strerror})") from None


def read_bytes(source: Source, name: str) -> bytes:
    """The whole source as bytes: a path is read, text is encoded, bytes pass through."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, str) and _looks_like_content(source):
        return source.encode("utf-8")
    if isinstance(source, (str, os.PathLike)):
        with source_errors(name):
            return Path(source).read_bytes()
    raise UserError(f"{name}: expected a path, text or bytes, got {type(source).__name__}")


def iter_lines(source: Source, name: str) -> Iterator[tuple[int, bytes]]:
    """Numbered non-blank lines (split on ``\\n`` only), streamed when ``source`` is a path.
    Each line becomes the importer's place (:func:`at`) as it is handed out."""
    _AT.set("")
    if isinstance(source, (str, os.PathLike)) and not _looks_like_content(source):
        with source_errors(name), open(source, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    at(n)
                    yield n, line[:-1] if line.endswith(b"\n") else line
        return
    data = read_bytes(source, name)
    for n, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            at(n)
            yield n, line


_decode = msgspec.json.decode
NL = b"\n"


def decode_line(line: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, problem)`` for one JSON line."""
    try:
        return _decode(line), None
    except msgspec.DecodeError as exc:
        return None, f"invalid JSON ({exc})"
    except DECODE_ERRORS as exc:  # invalid UTF-8 inside a string, nesting too deep
        return None, decode_error_reason(exc, line)


def read_json(source: Source, name: str) -> Any:
    """A whole-file JSON document (already-parsed values pass through)."""
    _AT.set("")
    if isinstance(source, (dict, list)):
        return source
    data = read_bytes(source, name)
    try:
        return _decode(data)
    except msgspec.DecodeError as exc:
        raise bad(name, *_json_problem(data, exc)) from None
    except DECODE_ERRORS as exc:  # invalid UTF-8 inside a string, nesting too deep
        if isinstance(exc, UnicodeDecodeError):
            at_byte = utf8_error_offset(data, exc)
            line, column = line_column(data, at_byte)
            raise bad(name, line, f"invalid UTF-8 at byte {column - 1}") from None
        deepest = _deepest(data)
        if deepest is None:
            raise bad(name, "the whole document", decode_error_reason(exc)) from None
        line, column = line_column(data, deepest)
        raise bad(name, f"line {line}, column {column}", decode_error_reason(exc)) from None


def line_column(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in bytes) of a byte offset of ``data``."""
    offset = max(0, min(offset, len(data)))
    return data.count(NL, 0, offset) + 1, offset - (data.rfind(NL, 0, offset) + 1) + 1


def _json_problem(data: bytes, exc: Exception) -> tuple[str, str]:
    """(place, problem) for a document msgspec refused: its ``(byte N)`` becomes a line and
    column; a document cut short is placed at its end; a number out of range at the number."""
    msg = str(exc)
    found = re.search(r"\((?:byte|char) (\d+)\)$", msg)
    if found:
        line, column = line_column(data, int(found.group(1)))
        return f"line {line}, column {column}", f"invalid JSON ({msg[: found.start()].strip()})"
    if "truncated" in msg:
        line, column = line_column(data, len(data))
        return (
            f"line {line}, column {column} (the end)",
            "the JSON stops before it is complete (the file is cut short)",
        )
    if "out of range" in msg:
        for number in _NUMBER.finditer(data):
            if _out_of_range(number.group()):
                line, column = line_column(data, number.start())
                return f"line {line}, column {column}", "number out of range"
    return "the whole document", f"invalid JSON ({msg})"


_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def _out_of_range(token: bytes) -> bool:
    try:
        value = float(token)
    except ValueError:
        return False
    if value in (float("inf"), float("-inf")):
        return True
    is_int = not any(c in token for c in b".eE")
    return is_int and not -(2**63) <= int(token) < 2**64


def _deepest(data: bytes, limit: int = 1000) -> int | None:
    """The byte offset where ``data``'s nesting first passes ``limit`` levels (strings skipped)."""
    depth = 0
    in_string = escaped = False
    for i, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return i
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return None


# -- where an importer is -----------------------------------------------------------------------

_AT: ContextVar[str] = ContextVar("threadline_import_at", default="")


def at(position: int | str) -> None:
    """Record where the importer is in its source: a line number, or a place in a JSON
    document (:func:`json_at`). An error that escapes the importer names it."""
    _AT.set(f"line {position}" if isinstance(position, int) else position)


def json_at(*keys: int | str) -> str:
    """A place in a JSON document, as ``at $[0].mapping["node-1"].message``."""
    out = ["at $"]
    for key in keys:
        if isinstance(key, int):
            out.append(f"[{key}]")
        elif key.isidentifier():
            out.append(f".{key}")
        else:
            out.append(f"[{msgspec.json.encode(key[:60]).decode()}]")
    return "".join(out)


class SourceError(UserError):
    """A source file is not what it claims; the message names the file and the place."""


def bad(name: str, line: int | str | None, problem: str) -> UserError:
    """The error for a file that is not what it claims, at ``line`` (a number, or a place
    such as :func:`json_at` gives; ``None``: where the importer is now)."""
    if line is None:
        line = _AT.get() or None
    where = f"line {line}" if isinstance(line, int) else line
    return SourceError(f"{name}: {where}: {problem}" if where else f"{name}: {problem}")


def _located(exc: ThreadlineError, name: str) -> ThreadlineError:
    """``exc`` naming the file and the place the importer had reached when it was raised."""
    if isinstance(exc, SourceError) or exc.hint is not None:
        return exc
    if type(exc) not in (UserError, LimitError):
        return exc
    message = str(exc)
    if message.startswith(f"{name}: "):
        message = message[len(name) + 2 :]
    where = _AT.get()
    if where and message.startswith(f"{where}: "):  # a record refused as it was added
        where = ""
    return type(exc)(f"{name}: {where}: {message}" if where else f"{name}: {message}")


# -- writing ------------------------------------------------------------------------------------


def _choose_id(store: Any, draft: Draft, wanted: str | None, taken: set[str]) -> str:
    if wanted is not None:
        if not SESSION_ID_RE.match(wanted):
            raise UserError(f"Invalid session id {wanted!r}: use 1-64 letters, digits, '_' or '-'")
        if store.exists(wanted) or wanted in taken:
            raise UserError(f"Session '{wanted}' already exists; choose another --session-id")
        return wanted
    src = draft.source_id
    if src and SESSION_ID_RE.match(src) and src not in taken and not store.exists(src):
        return src
    return new_id()


def create(
    store: Store, drafts: Sequence[Draft], session_ids: Sequence[str | None] | None = None
) -> list[str]:
    """Write drafts as new sessions, each in one atomic step fed from its spool; all or nothing.
    Returns the new sessions' ids without opening them (a large import stays bounded).

    Every record was encoded and checked against the ingest limits as it was added to its draft,
    so nothing is created unless every draft is complete; if creating one fails, the sessions
    created before it are deleted again.
    """
    for draft in drafts:
        draft.finish()
    wanted = list(session_ids) if session_ids is not None else [None] * len(drafts)
    taken: set[str] = set()
    headers = []
    for draft, want in zip(drafts, wanted, strict=True):
        sid = _choose_id(store, draft, want, taken)
        taken.add(sid)
        meta = dict(draft.metadata)
        meta["import"] = msgspec.to_builtins(draft.report)
        # a damaged cwd or start time costs that field, not the conversation
        created = draft.created if isinstance(draft.created, str) and draft.created else now()
        cwd = draft.cwd if isinstance(draft.cwd, str) else None
        headers.append(SessionHeader(id=sid, version=1, timestamp=created, cwd=cwd, metadata=meta))
    done: list[str] = []
    try:
        for header, draft in zip(headers, drafts, strict=True):
            with _gc_paused():
                store.backend.create_log(header, draft.lines())
            done.append(header.id)
    except BaseException:
        for sid in done:
            with contextlib.suppress(Exception):
                store.delete(sid)
        raise
    for draft in drafts:
        draft.close()
    return done


def write(
    store: Store, drafts: Sequence[Draft], session_ids: Sequence[str | None] | None = None
) -> list[Session]:
    """:func:`create`, then open the new sessions (all or nothing, as there)."""
    from threadline.session import Session

    sessions: list[Session] = []
    ids = create(store, drafts, session_ids)
    try:
        for sid in ids:
            log = store.backend.open_log(sid)
            with _gc_paused():
                sessions.append(Session(store.backend, log, log.load()))
    except BaseException:
        for s in sessions:
            s.close()
        for sid in ids:
            with contextlib.suppress(Exception):
                store.delete(sid)
        raise
    return sessions


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    # Building 100k small records: the cyclic collector would cost several times the work.
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def report_of(session: Session) -> ImportReport | None:
    """The report stored with an imported session (``None`` for sessions not imported)."""
    meta = session.header.metadata or {}
    raw = meta.get("import")
    return msgspec.convert(raw, ImportReport) if isinstance(raw, dict) else None


def messages_of(draft: Draft) -> list[Message]:
    """The messages of a draft's current branch, as ``Session.context()`` builds them."""
    from threadline.store.memory import MemoryStore

    (session,) = write(Store(MemoryStore()), [draft], [None])
    return list(session.context().messages)


# -- the entry points ---------------------------------------------------------------------------


def module(fmt: str) -> Any:
    """The importer module for a format name."""
    path = FORMATS.get(fmt)
    if path is None:
        raise UserError(f"Unknown import format {fmt!r}; use one of: {', '.join(FORMATS)} or auto")
    return importlib.import_module(path)


def prepare(fmt: str, path: Source, *, name: str | None = None) -> list[Draft]:
    """Read and check one source file (``fmt`` may be ``"auto"``) without writing anything."""
    label = source_name(path, name)
    if fmt == "auto":
        fmt = detect(path)
    importer = module(fmt)
    token = _AT.set("")
    with _gc_paused():
        try:
            drafts: list[Draft] = importer.parse(path, name=label)
        except ThreadlineError as exc:
            raise _located(exc, label) from None
        except (
            TypeError,
            AttributeError,
            ValueError,
            KeyError,
            IndexError,
            OverflowError,
            RecursionError,
        ) as exc:
            # the importers check what they rely on; this is the net for shapes nobody
            # thought of, so that a damaged file is a UserError naming it, never a traceback
            where = _AT.get()
            raise malformed_input(
                f"{label}: {where} ({fmt})" if where else f"{label} ({fmt})", exc
            ) from None
        finally:
            _AT.reset(token)
    if not drafts:
        raise UserError(f"{label}: no conversation found in it; nothing was imported")
    digest = content_sha256(path, label)
    for d in drafts:
        d.report.sha256 = digest
        with _gc_paused():
            d.finish()
    return drafts


def content_sha256(source: Source, name: str | None = None) -> str:
    """SHA-256 of a source's bytes (what :func:`imported_from` matches on); a path is hashed in
    chunks, never read whole."""
    label = source_name(source, name)
    if isinstance(source, (str, os.PathLike)) and not _looks_like_content(source):
        h = hashlib.sha256()
        with source_errors(label), open(source, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    return hashlib.sha256(read_bytes(source, label)).hexdigest()


def imported_from(store: Any, digest: str) -> list[str]:
    """Ids of the sessions of ``store`` imported from a file whose bytes hash to ``digest``.
    Reads every session's header only (the import report lives there)."""
    found = []
    for row in store.list():
        try:
            header = decode_header(store.backend.open_log(row.id).raw_header())
        except (ThreadlineError, RecordError, OSError):
            continue
        raw = (header.metadata or {}).get("import")
        if isinstance(raw, dict) and raw.get("sha256") == digest:
            found.append(row.id)
    return sorted(found)


def import_path(
    store: Any, fmt: str, path: Source, *, session_id: str | None = None, name: str | None = None
) -> list[Session]:
    """Import one source file as one or more sessions (``fmt`` may be ``"auto"``).

    Returns the created sessions; :func:`report_of` gives each one's import report.
    """
    return import_paths(store, fmt, [path], session_id=session_id, names=[name])


def import_paths(
    store: Any,
    fmt: str,
    paths: Sequence[Source],
    *,
    session_id: str | None = None,
    names: Sequence[str | None] | None = None,
) -> list[Session]:
    """Import several files at once, all or nothing: every file is read and checked before the
    first session is written, and a failed write removes the sessions written before it."""
    drafts: list[Draft] = []
    for k, path in enumerate(paths):
        drafts.extend(prepare(fmt, path, name=names[k] if names else None))
    if session_id is not None and len(drafts) > 1:
        raise UserError(
            f"{len(drafts)} conversations were found; a session id names one "
            "session, so leave it out"
        )
    return write(store, drafts, [session_id] * len(drafts) if session_id else None)


def detect(path: Source) -> str:
    """The import format of a file, from its content (not its name)."""
    name = source_name(path)
    head = _head(path, name)
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        data = read_bytes(path, name)
        doc = _try_json(data)
        if isinstance(doc, list):
            if doc and all(isinstance(x, dict) and "mapping" in x for x in doc[:5]):
                return "chatgpt_export"
            return "chat_history"
    if stripped.startswith(b"{"):
        first_line = stripped.split(b"\n", 1)[0]
        obj, err = decode_line(first_line)
        if err is None and isinstance(obj, dict):
            kind = obj.get("type")
            if kind == "session" and "id" in obj:
                return "pi"
            if (
                kind in ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
                or ("record_type" in obj)
                or ("payload" in obj and "timestamp" in obj)
            ):
                return "codex"
            if (
                "uuid" in obj
                or kind in ("summary", "file-history-snapshot", "queue-operation")
                or "sessionId" in obj
                or "leafUuid" in obj
            ):
                return "claude_code"
        doc = _try_json(read_bytes(path, name))
        if isinstance(doc, dict):
            if "mapping" in doc:
                return "chatgpt_export"
            if (
                "events" in doc
                or "eval_cases" in doc
                or "eval_set_id" in doc
                or "conversation" in doc
            ):
                return "google_adk"
            if "content" in doc and isinstance(doc.get("content"), list):
                return "chat_history"
        if err is None and isinstance(obj, dict) and ("uuid" in obj or "parentUuid" in obj):
            return "claude_code"
    raise UserError(
        f"{name}: cannot tell which format this is; name it instead of 'auto' "
        f"(one of: {', '.join(FORMATS)})"
    )


def _head(path: Source, name: str, size: int = 1 << 20) -> bytes:
    """The first line, however long, and up to ``size`` bytes after it: a JSONL file is told
    by its first line without reading a 100 MB session."""
    if isinstance(path, (str, os.PathLike)) and not _looks_like_content(path):
        with source_errors(name), open(path, "rb") as fh:
            first = fh.readline()
            while first and not first.strip():  # leading blank lines
                first = fh.readline()
            return first + fh.read(size)
    return read_bytes(path, name)[:size]


def _try_json(data: bytes) -> Any:
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return None
