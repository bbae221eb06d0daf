"""The session header and the record union, shaped exactly like the JSONL file (DESIGN §2).

A record is ``{"type", "id", "parent_id", "timestamp", <payload under the key named by type>}``.
*Tree entries* are nodes of the conversation tree; *meta records* (leaf, bookmark, op_state,
message_tags, purge) are threadline's own bookkeeping: their ``parent_id`` is null and they never
move the leaf.

:func:`decode_record` accepts the nested form, the flattened form (payload fields beside the
envelope) and purged entries; records of unknown type come back as :class:`UnknownRecord` holding
their raw line, so they survive a rewrite.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias

import msgspec

from threadline.model.content import Message

FORMAT_VERSION = 1


_random_pool: list[str] = []
# the version (4) and variant (10xx) bits, set on a whole pool's bytes at once
_VERSION = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))
_POOL = 256
# where each of an id's 32 hex digits goes among its 36 characters (8-4-4-4-12)
_HEX_AT = [*range(0, 8), *range(9, 13), *range(14, 18), *range(19, 23), *range(24, 36)]


def new_id() -> str:
    """A random UUIDv4 string. Randomness is drawn from os.urandom 256 ids at a time, and the
    ids are formatted a pool at a time (appends are hot; uuid.uuid4() costs more than the rest
    of an append's bookkeeping): each of the 32 hex digit positions is copied into the 256 ids
    by one strided slice assignment, and one split cuts them apart, so no bytecode runs per
    character or per group."""
    if not _random_pool:
        raw = bytearray(os.urandom(16 * _POOL))
        raw[6::16] = raw[6::16].translate(_VERSION)
        raw[8::16] = raw[8::16].translate(_VARIANT)
        digits = raw.hex().encode()  # 32 per id
        out = bytearray(b"-" * (37 * _POOL))  # 36 characters and a newline per id
        out[36::37] = b"\n" * _POOL
        for k, at in enumerate(_HEX_AT):
            out[at::37] = digits[k::32]
        _random_pool.extend(out.decode().split())
    return _random_pool.pop()


# A forked child must not hand out the ids its parent still holds.
os.register_at_fork(after_in_child=_random_pool.clear)
# (ms, its stamp) and (second, its text): each replaced whole, so threads never see a half
_last_stamp: tuple[int, str] = (-1, "")
_last_second: tuple[int, str] = (-1, "")
_MILLIS = [f".{i:03d}Z" for i in range(1000)]


def now() -> str:
    """RFC 3339 UTC timestamp with millisecond precision, e.g. ``2024-01-01T12:00:00.000Z``."""
    global _last_stamp, _last_second
    ms = time.time_ns() // 1_000_000
    last = _last_stamp
    if ms == last[0]:
        return last[1]
    sec, frac = divmod(ms, 1000)
    second = _last_second
    if sec != second[0]:  # the date and time to the second: formatted once a second
        second = _last_second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    stamp = second[1] + _MILLIS[frac]
    _last_stamp = (ms, stamp)
    return stamp


class SessionHeader(
    msgspec.Struct, tag="session", tag_field="type", omit_defaults=True, kw_only=True
):
    id: str
    version: int  # required, so omit_defaults never drops it
    timestamp: str
    parent_session: str | None = None
    cwd: str | None = None
    metadata: dict[str, Any] | None = None


# -- payloads -------------------------------------------------------------------------------


class _P(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    pass


class ModelChange(_P):
    provider: str
    model_id: str


class ThinkingLevel(_P):
    thinking_level: str


class Label(_P):
    target_id: str
    label: str | None = None


class SessionInfo(_P):
    name: str


class Compaction(_P):
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int = 0
    details: Any = None


class BranchSummary(_P):
    summary: str
    from_id: str | None
    details: Any = None


class Custom(_P):
    custom_type: str
    data: Any = None


class ContextOp(_P):
    kind: str
    start_id: str | None = None
    end_id: str | None = None
    order: list[str] | None = None
    after_id: str | None = None
    summary: str | None = None
    messages: list[Message] | None = None
    tags: list[str] | None = None


class Leaf(_P):
    target_id: str | None


class Bookmark(_P):
    name: str
    target_id: str | None
    position: int
    hash: str | None
    removed: bool = False
    renamed_from: str | None = None  # set on the record a rename writes under the new name


class OpState(_P):
    op_id: str
    active: bool
    reverted: bool = False
    expanded: bool = False  # a revise/snip showing its originals between its markers


class MessageTags(_P):
    target_ids: list[str]
    add: list[str] = msgspec.field(default_factory=list)
    remove: list[str] = msgspec.field(default_factory=list)


class Purge(_P):
    entry_ids: list[str]


# -- records --------------------------------------------------------------------------------


class _Record(msgspec.Struct, tag_field="type", gc=False):
    id: str
    parent_id: str | None
    timestamp: str

    tree: ClassVar[bool] = True
    payload_key: ClassVar[str] = ""

    @property
    def type(self) -> str:
        return self.payload_key

    @property
    def payload(self) -> Any:
        return getattr(self, self.payload_key)


class MessageEntry(_Record, tag="message"):
    message: Message
    payload_key: ClassVar[str] = "message"


class ModelChangeEntry(_Record, tag="model_change"):
    model_change: ModelChange
    payload_key: ClassVar[str] = "model_change"


class ThinkingLevelEntry(_Record, tag="thinking_level"):
    thinking_level: ThinkingLevel
    payload_key: ClassVar[str] = "thinking_level"


class LabelEntry(_Record, tag="label"):
    label: Label
    payload_key: ClassVar[str] = "label"


class SessionInfoEntry(_Record, tag="session_info"):
    session_info: SessionInfo
    payload_key: ClassVar[str] = "session_info"


class CompactionEntry(_Record, tag="compaction"):
    compaction: Compaction
    payload_key: ClassVar[str] = "compaction"


class BranchSummaryEntry(_Record, tag="branch_summary"):
    branch_summary: BranchSummary
    payload_key: ClassVar[str] = "branch_summary"


class CustomEntry(_Record, tag="custom"):
    custom: Custom
    payload_key: ClassVar[str] = "custom"


class ContextOpEntry(_Record, tag="context_op"):
    context_op: ContextOp
    payload_key: ClassVar[str] = "context_op"


class LeafRecord(_Record, tag="leaf"):
    leaf: Leaf
    tree: ClassVar[bool] = False
    payload_key: ClassVar[str] = "leaf"


class BookmarkRecord(_Record, tag="bookmark"):
    bookmark: Bookmark
    tree: ClassVar[bool] = False
    payload_key: ClassVar[str] = "bookmark"


class OpStateRecord(_Record, tag="op_state"):
    op_state: OpState
    tree: ClassVar[bool] = False
    payload_key: ClassVar[str] = "op_state"


class MessageTagsRecord(_Record, tag="message_tags"):
    message_tags: MessageTags
    tree: ClassVar[bool] = False
    payload_key: ClassVar[str] = "message_tags"


class PurgeRecord(_Record, tag="purge"):
    purge: Purge
    tree: ClassVar[bool] = False
    payload_key: ClassVar[str] = "purge"


Entry: TypeAlias = (
    MessageEntry
    | ModelChangeEntry
    | ThinkingLevelEntry
    | LabelEntry
    | SessionInfoEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | ContextOpEntry
)
MetaRecord: TypeAlias = (
    LeafRecord | BookmarkRecord | OpStateRecord | MessageTagsRecord | PurgeRecord
)
KnownRecord: TypeAlias = Entry | MetaRecord

ENTRY_CLASSES: dict[str, type[_Record]] = {
    c.payload_key: c
    for c in (
        MessageEntry,
        ModelChangeEntry,
        ThinkingLevelEntry,
        LabelEntry,
        SessionInfoEntry,
        CompactionEntry,
        BranchSummaryEntry,
        CustomEntry,
        ContextOpEntry,
    )
}
META_CLASSES: dict[str, type[_Record]] = {
    c.payload_key: c
    for c in (LeafRecord, BookmarkRecord, OpStateRecord, MessageTagsRecord, PurgeRecord)
}
RECORD_CLASSES = {**ENTRY_CLASSES, **META_CLASSES}
TREE_TYPES = frozenset(ENTRY_CLASSES)
META_TYPES = frozenset(META_CLASSES)


class PurgedEntry(msgspec.Struct, kw_only=True):
    """A tree entry whose payload was purged: ``{"type": kind, ..., kind: {"purged": true}}``."""

    kind: str
    id: str
    parent_id: str | None
    timestamp: str
    tree: ClassVar[bool] = True

    @property
    def type(self) -> str:
        return self.kind

    @property
    def payload(self) -> dict[str, bool]:
        return {"purged": True}


class UnknownRecord(msgspec.Struct, kw_only=True):
    """A record of a type this version does not know; kept byte for byte."""

    kind: str
    id: str | None
    parent_id: str | None
    timestamp: str | None
    raw: bytes
    tree: ClassVar[bool] = True

    @property
    def type(self) -> str:
        return self.kind

    @property
    def payload(self) -> Any:
        return None


AnyRecord: TypeAlias = KnownRecord | PurgedEntry | UnknownRecord

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[KnownRecord] = msgspec.json.Decoder(KnownRecord)
_header_decoder = msgspec.json.Decoder(SessionHeader)
_raw_decoder = msgspec.json.Decoder()


class RecordError(ValueError):
    """A line that is not a valid record (the reason is the message)."""


# a record's line (no newline): the encoder's own method, no Python frame on the append path
encode: Callable[[KnownRecord | SessionHeader], bytes] = _encoder.encode


def encode_record(record: AnyRecord) -> bytes:
    """The record's line without the trailing newline."""
    if isinstance(record, UnknownRecord):
        return record.raw
    if isinstance(record, PurgedEntry):
        return _encoder.encode(
            {
                "type": record.kind,
                "id": record.id,
                "parent_id": record.parent_id,
                "timestamp": record.timestamp,
                record.kind: {"purged": True},
            }
        )
    return _encoder.encode(record)


# What decoding a damaged line can raise besides msgspec.DecodeError (a ValueError): invalid
# UTF-8 inside a field (UnicodeDecodeError, also a ValueError), nesting deeper than the
# decoder's stack (RecursionError).
DECODE_ERRORS = (ValueError, RecursionError)


def decode_error_reason(exc: BaseException, data: bytes | memoryview | None = None) -> str:
    """One line naming what is wrong with a line that failed to decode (``data``: the line,
    to place invalid UTF-8 in it rather than in the string that held it)."""
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {utf8_error_offset(data, exc)}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if "JSON" in text else f"invalid JSON: {text}"


def utf8_error_offset(data: bytes | memoryview | None, exc: UnicodeDecodeError) -> int:
    """Where the first invalid UTF-8 byte of ``data`` is (msgspec reports the offset inside
    the string it was decoding)."""
    if data is not None:
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as whole:
            return whole.start
    return exc.start


def decode_header(line: bytes | memoryview) -> SessionHeader:
    try:
        return _header_decoder.decode(line)
    except DECODE_ERRORS as exc:
        try:  # a header written without "version" is version 1
            obj = _raw_decoder.decode(line)
            if isinstance(obj, dict) and obj.get("type") == "session" and "version" not in obj:
                return msgspec.convert({**obj, "version": FORMAT_VERSION}, SessionHeader)
        except DECODE_ERRORS:
            pass
        raise RecordError(f"not a session header: {decode_error_reason(exc, line)}") from None


def decode_record(line: bytes | memoryview) -> AnyRecord:
    """Decode one line; raises :class:`RecordError` when it is not a usable record."""
    try:
        return _decoder.decode(line)
    except DECODE_ERRORS:
        pass
    return _decode_slow(bytes(line))


def _decode_slow(line: bytes) -> AnyRecord:
    try:
        obj = _raw_decoder.decode(line)
    except DECODE_ERRORS as exc:
        raise RecordError(decode_error_reason(exc, line)) from None
    if not isinstance(obj, dict):
        raise RecordError("a record must be a JSON object")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise RecordError('a record needs a string "type"')
    rid, parent, ts = obj.get("id"), obj.get("parent_id"), obj.get("timestamp")
    cls = RECORD_CLASSES.get(kind)
    if cls is None:
        if kind == "session":
            raise RecordError("a second session header")
        return UnknownRecord(
            kind=kind,
            id=rid if isinstance(rid, str) else None,
            parent_id=parent if isinstance(parent, str) else None,
            timestamp=ts if isinstance(ts, str) else None,
            raw=line,
        )
    if not isinstance(rid, str) or not rid:
        raise RecordError(f'a {kind} record needs a string "id"')
    if not isinstance(ts, str):
        ts = ""
    if parent is not None and not isinstance(parent, str):
        raise RecordError('"parent_id" must be a string or null')
    payload = obj.get(kind)
    if payload == {"purged": True}:
        return PurgedEntry(kind=kind, id=rid, parent_id=parent, timestamp=ts)
    if not isinstance(payload, dict):
        # flattened form: payload fields beside the envelope
        payload = {
            k: v for k, v in obj.items() if k not in ("type", "id", "parent_id", "timestamp")
        }
    try:
        rec: Any = msgspec.convert(
            {"type": kind, "id": rid, "parent_id": parent, "timestamp": ts, kind: payload}, cls
        )
        return rec  # type: ignore[no-any-return]
    except DECODE_ERRORS as exc:
        if kind == "message" and not isinstance(exc, RecursionError):
            lenient = _lenient_message(rid, parent, ts, payload)
            if lenient is not None:
                return lenient
        raise RecordError(f"invalid {kind} record: {decode_error_reason(exc)}") from None


def _lenient_message(
    rid: str, parent: str | None, ts: str, payload: dict[str, Any]
) -> MessageEntry | None:
    """A message holding blocks of a type this version does not know (say ``audio`` from a
    newer writer): the known blocks are kept, each unknown one becomes a text placeholder with
    the block itself under ``provider_details["unknown_block"]``. The file keeps the original
    line; only the view uses the placeholder."""
    from threadline.model.content import Block, Text, TextBlock

    content = payload.get("content")
    if not isinstance(content, list):
        return None
    blocks: list[Any] = []
    for raw in content:
        try:
            blocks.append(msgspec.convert(raw, Block))
        except DECODE_ERRORS:
            kind = raw.get("type") if isinstance(raw, dict) else type(raw).__name__
            blocks.append(
                TextBlock(
                    text=Text(
                        content=f"[{kind} block: not supported by this version of threadline]"
                    ),
                    provider_details={"unknown_block": raw},
                )
            )
    try:
        msg = msgspec.convert({**payload, "content": []}, Message)
    except DECODE_ERRORS:
        return None
    msg.content = blocks
    return MessageEntry(id=rid, parent_id=parent, timestamp=ts, message=msg)


class Envelope(msgspec.Struct):
    """The envelope fields only; decoding into it skips the payload."""

    type: str
    id: str | None = None
    parent_id: str | None = None
    timestamp: str | None = None


envelope_decoder = msgspec.json.Decoder(Envelope)
