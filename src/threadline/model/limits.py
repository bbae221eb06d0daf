"""Ingest limits, the same on every backend (DESIGN §3).

One record is at most 32 MiB encoded, nests at most 64 levels counted from the record's outer
object, holds valid UTF-8 without lone surrogates, no NaN or Infinity and no NUL character.
msgspec would write NaN as ``null`` silently, so floats are checked explicitly.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from threadline.errors import LimitError
from threadline.model.content import Message, Text, TextBlock, ToolResult, ToolResultBlock, Usage

MAX_RECORD_BYTES = 32 * 1024 * 1024
MAX_DEPTH = 64


def check_value(value: Any, depth: int = 1) -> None:
    """Walk a record (Structs, dicts, lists, scalars) and raise LimitError on a violation.

    ``depth`` is the nesting level of ``value`` itself: the record's outer object is level 1.
    """
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                raise LimitError("Text contains a NUL character (\\u0000); remove it and retry")
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise LimitError(
                        "Text is not valid UTF-8 (it holds a lone surrogate); "
                        "decode the source with errors='replace' and retry"
                    ) from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise LimitError(
                    f"Number {v!r} is not allowed (JSON has no NaN or Infinity); "
                    "replace it with null or a string"
                )
        elif isinstance(v, (list, tuple)):
            if d > MAX_DEPTH:
                raise _too_deep()
            stack.extend((x, d + 1) for x in v)
        elif isinstance(v, dict):
            if d > MAX_DEPTH:
                raise _too_deep()
            for k, x in v.items():
                if isinstance(k, str):
                    stack.append((k, d + 1))
                stack.append((x, d + 1))
        elif isinstance(v, msgspec.Struct):
            if d > MAX_DEPTH:
                raise _too_deep()
            for f in v.__struct_fields__:
                x = getattr(v, f)
                if x is not None and not isinstance(x, (bool, int)):
                    stack.append((x, d + 1))
        elif isinstance(v, bytes):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                raise LimitError("Bytes are not valid UTF-8; decode them first") from None


def check_record(payload: Any, line: bytes, envelope_nulls: int) -> None:
    """All ingest limits for one encoded record whose envelope holds ``envelope_nulls`` nulls.

    The encoded bytes answer most records at C speed: no ``u0000`` means no NUL, no ``null``
    beyond the envelope's means no NaN/Infinity (msgspec writes those as null), and fewer than
    64 brackets cannot nest 64 deep. Anything else takes the exact walk.
    """
    if len(line) > MAX_RECORD_BYTES:
        check_encoded(line)
    if payload.__class__ is Message and plain_message(payload):
        return
    find = line.find  # find, not ``in``: ``bytes in bytes`` first tries the operand as an int
    if (
        find(b"u0000") >= 0
        or (find(b"null") >= 0 and (not envelope_nulls or line.count(b"null") > envelope_nulls))
        or _brackets(line) >= MAX_DEPTH
    ):
        check_value(payload, depth=2)


def _brackets(line: bytes) -> int:
    """``line.count(b"{") + line.count(b"[")``, through ``replace``: deleting one byte walks
    the line with memchr, where ``count`` of one byte steps through it byte by byte."""
    n = len(line)
    return 2 * n - len(line.replace(b"{", b"")) - len(line.replace(b"[", b""))


def plain_message(msg: Message) -> bool:
    """True when ``msg`` is made of parts that cannot break a limit but the size: text and
    tool-result blocks holding strings without NUL (the encoder has already refused lone
    surrogates), integer usage, no provider details (any dict could hold a float or nest), so
    nothing in it is a float and it nests 5 levels deep at most. False sends the record through
    the general check. An append's message is usually one of these: it is answered from its few
    fields instead of scanning its encoded line three times."""
    if msg.provider_details is not None:
        return False
    s: Any = msg.role  # (a role of None is no limit's concern, but it is not plain either)
    if s.__class__ is not str or "\x00" in s:
        return False
    s = msg.model
    if s is not None and (s.__class__ is not str or "\x00" in s):
        return False
    s = msg.stop_reason
    if s is not None and (s.__class__ is not str or "\x00" in s):
        return False
    usage = msg.usage
    if usage is not None and (
        usage.__class__ is not Usage
        or usage.input.__class__ is not int
        or usage.output.__class__ is not int
        or usage.cache_read.__class__ is not int
        or usage.cache_write.__class__ is not int
        or usage.total.__class__ is not int
    ):
        return False
    content: Any = msg.content  # its blocks' classes are tested here
    if content.__class__ is not list:
        return False
    for block in content:
        kind = block.__class__
        if kind is TextBlock:
            body = block.text
            if block.provider_details is not None or body.__class__ is not Text:
                return False
            s = body.content
        elif kind is ToolResultBlock:
            result = block.tool_result
            if (
                block.provider_details is not None
                or result.__class__ is not ToolResult
                or result.is_error.__class__ is not bool
            ):
                return False
            s = result.tool_use_id
            if s.__class__ is not str or "\x00" in s:
                return False
            s = result.content  # a list of blocks takes the general check
        else:
            return False
        if s.__class__ is not str or "\x00" in s:
            return False
    return True


def encode_checked(encode: Any, value: Any) -> bytes:
    """``encode(value)``, turning a lone surrogate into a LimitError."""
    try:
        return encode(value)  # type: ignore[no-any-return]
    except UnicodeEncodeError:
        raise LimitError(
            "Text is not valid UTF-8 (it holds a lone surrogate); "
            "decode the source with errors='replace' and retry"
        ) from None


def check_encoded(line: bytes) -> None:
    if len(line) > MAX_RECORD_BYTES:
        raise LimitError(
            f"Record is {len(line):,} bytes encoded, over the limit of {MAX_RECORD_BYTES:,} "
            "(32 MiB); store large data outside the session and keep a reference"
        )


def _too_deep() -> LimitError:
    return LimitError(
        f"Record nests deeper than {MAX_DEPTH} levels; flatten the data before storing it"
    )
