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
    check_encoded(line)
    if (
        b"u0000" in line
        or line.count(b"null") > envelope_nulls
        or line.count(b"{") + line.count(b"[") >= MAX_DEPTH
    ):
        check_value(payload, depth=2)


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
