"""Ingest limits and safe session ids (DESIGN §3), on every backend.

Each refused write must raise a UserError that says what is wrong and leave the stored session
exactly as it was: for the JSONL store every file in the directory is compared byte for byte.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline.errors import LimitError, UserError
from threadline.model.content import (
    Message,
    Text,
    TextBlock,
    ToolResult,
    ToolResultBlock,
    Usage,
    text,
    tool_result,
    tool_use,
)
from threadline.model.entries import CustomEntry, MessageEntry, encode
from threadline.model.limits import (
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    check_record,
    check_value,
    plain_message,
)
from threadline.store.jsonl import JsonlStore

TS = "2024-01-01T00:00:00.000Z"


def snapshot(store: tl.Store, sid: str) -> Any:
    """Everything stored for the session: every file of a JSONL store, else the record lines."""
    if not isinstance(store.backend, JsonlStore):
        return list(store.open(sid).state.log.raw_lines())
    root = Path(store.url)
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def stored_lines(store: tl.Store, sid: str) -> list[bytes]:
    return list(store.open(sid).state.log.raw_lines())


def json_depth(line: bytes) -> int:
    """Nesting depth of a JSON document, the outer object being level 1."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(json.loads(line), 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def nest(levels: int) -> dict[str, Any]:
    """``levels`` nested objects: nest(1) == {}, nest(2) == {"k": {}}."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


@pytest.fixture
def session(store: tl.Store) -> tl.Session:
    """A session with one entry, already holding the writer lock."""
    s = store.create()
    s.append_message("user", "before")
    return s


def refused(store: tl.Store, s: tl.Session, write: Callable[[], Any], match: str) -> None:
    """``write`` raises a LimitError matching ``match`` and changes nothing, stored or loaded."""
    before = snapshot(store, s.id)
    entries, leaf = [e.id for e in s.entries()], s.leaf_id
    with pytest.raises(LimitError, match=match):
        write()
    assert snapshot(store, s.id) == before
    assert [e.id for e in s.entries()] == entries
    assert s.leaf_id == leaf
    # the session still works afterwards
    after = s.append_message("user", "after")
    assert s.entry(after).parent_id == leaf


# -- size --------------------------------------------------------------------------------------


def test_a_record_of_exactly_32_mib_is_accepted_and_one_byte_more_is_refused(
    store: tl.Store, session: tl.Session
) -> None:
    probe = session.append_message("user", "x")
    overhead = next(m.size for m in session.metadata() if m.id == probe) - 1
    fits = "y" * (MAX_RECORD_BYTES - overhead)
    big = session.append_message("user", fits)
    assert next(m.size for m in session.metadata() if m.id == big) == MAX_RECORD_BYTES
    assert len(stored_lines(store, session.id)[-1]) == MAX_RECORD_BYTES
    refused(
        store,
        session,
        lambda: session.append_message("user", fits + "y"),
        r"over the limit of 33,554,432 \(32 MiB\)",
    )


def test_an_oversized_record_in_a_batch_refuses_the_whole_batch(
    store: tl.Store, session: tl.Session
) -> None:
    leaf = session.leaf_id
    good = MessageEntry(
        id="good",
        parent_id=leaf,
        timestamp=TS,
        message=Message(role="user", content=[text("fine")]),
    )
    huge = MessageEntry(
        id="huge",
        parent_id="good",
        timestamp=TS,
        message=Message(role="user", content=[text("z" * MAX_RECORD_BYTES)]),
    )
    refused(store, session, lambda: session.append_records([good, huge]), "32 MiB")
    assert not session.has_entry("good")


# -- nesting depth -------------------------------------------------------------------------------


def test_custom_data_nesting_64_levels_is_accepted_and_65_refused(
    store: tl.Store, session: tl.Session
) -> None:
    # record (1) > custom payload (2) > data: 62 more levels reach exactly 64
    ok = session.append_custom("deep", nest(MAX_DEPTH - 2))
    assert json_depth(stored_lines(store, session.id)[-1]) == 64
    assert session.entry(ok).payload.data == nest(62)
    refused(
        store,
        session,
        lambda: session.append_custom("deep", nest(MAX_DEPTH - 1)),
        "nests deeper than 64 levels",
    )


def test_tool_input_nesting_is_counted_from_the_record(
    store: tl.Store, session: tl.Session
) -> None:
    # record > message > content list > block > tool_use > input: input starts at level 6
    session.append_message("assistant", [tool_use("t1", "f", nest(MAX_DEPTH - 5))])
    assert json_depth(stored_lines(store, session.id)[-1]) == 64
    refused(
        store,
        session,
        lambda: session.append_message("assistant", [tool_use("t2", "f", nest(60))]),
        "nests deeper than 64 levels",
    )


def test_deep_lists_count_like_objects(store: tl.Store, session: tl.Session) -> None:
    value: list[Any] = []
    for _ in range(62):
        value = [value]
    refused(store, session, lambda: session.append_custom("deep", [value]), "deeper than 64")


# -- text: lone surrogates, NUL --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["text", "custom value", "custom key", "label", "name"])
def test_a_lone_surrogate_is_refused(store: tl.Store, session: tl.Session, where: str) -> None:
    bad = "ok \ud800 not ok"
    target = session.leaf_id
    assert target is not None
    write = {
        "text": lambda: session.append_message("user", bad),
        "custom value": lambda: session.append_custom("c", {"v": [bad]}),
        "custom key": lambda: session.append_custom("c", {bad: 1}),
        "label": lambda: session.set_label(target, bad),
        "name": lambda: session.append_session_info(bad),
    }[where]
    refused(store, session, write, "lone surrogate")


@pytest.mark.parametrize("where", ["text", "custom value", "custom key", "tool input", "label"])
def test_a_nul_character_is_refused(store: tl.Store, session: tl.Session, where: str) -> None:
    bad = "a\x00b"
    target = session.leaf_id
    assert target is not None
    write = {
        "text": lambda: session.append_message("user", bad),
        "custom value": lambda: session.append_custom("c", {"v": bad}),
        "custom key": lambda: session.append_custom("c", {bad: 1}),
        "tool input": lambda: session.append_message("assistant", [tool_use("t", "f", {"x": bad})]),
        "label": lambda: session.set_label(target, bad),
    }[where]
    refused(store, session, write, r"NUL character \(\\u0000\)")


def test_an_escaped_backslash_u0000_text_is_not_a_nul(store: tl.Store, session: tl.Session) -> None:
    eid = session.append_message("user", "literally \\u0000 typed")
    assert session.entry(eid).message.text == "literally \\u0000 typed"


# -- numbers: NaN, Infinity ----------------------------------------------------------------------


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(store: tl.Store, session: tl.Session, number: float) -> None:
    refused(
        store,
        session,
        lambda: session.append_custom("n", {"x": [1, number]}),
        "JSON has no NaN or Infinity",
    )
    refused(
        store,
        session,
        lambda: session.append_message("assistant", [tool_use("t", "f", {"x": number})]),
        "JSON has no NaN or Infinity",
    )


def test_null_values_are_not_mistaken_for_nan(store: tl.Store, session: tl.Session) -> None:
    eid = session.append_custom("n", {"x": None, "y": [None, 1.5]})
    assert session.entry(eid).payload.data == {"x": None, "y": [None, 1.5]}


def test_limits_apply_to_prepared_records_and_create(store: tl.Store, session: tl.Session) -> None:
    bad = CustomEntry(
        id="c1",
        parent_id=session.leaf_id,
        timestamp=TS,
        custom=tl.model.entries.Custom(custom_type="x", data={"v": math.nan}),
    )
    refused(store, session, lambda: session.append_records([bad]), "NaN")
    before = {r.id for r in store.list()}
    with pytest.raises(LimitError, match="NUL"):
        store.create(
            records=[
                MessageEntry(
                    id="m",
                    parent_id=None,
                    timestamp=TS,
                    message=Message(role="user", content=[text("\x00")]),
                )
            ]
        )
    with pytest.raises(LimitError, match="NaN"):
        store.create(metadata={"x": math.nan})
    assert {r.id for r in store.list()} == before


# -- session ids -------------------------------------------------------------------------------

BAD_IDS = [
    "../escape",
    "..",
    "a/b",
    "/etc/passwd",
    "",
    "x" * 65,
    "a.b",
    "a b",
    "é",
    "a\x00b",
    "a\nb",
    "~root",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_an_invalid_or_path_traversing_session_id_is_refused_everywhere(
    store: tl.Store, tmp_path: Path, bad: str
) -> None:
    keep = store.create()
    keep.append_message("user", "keep")
    keep.close()
    before = snapshot(store, keep.id)
    outside = sorted(p.name for p in tmp_path.iterdir())
    message = f"Invalid session id {bad!r}: use 1-64 letters, digits, '_' or '-'"
    for call in (
        lambda: store.create(session_id=bad),
        lambda: store.open(bad),
        lambda: store.fork(bad),
        lambda: store.delete(bad),
        lambda: store.exists(bad),
    ):
        with pytest.raises(UserError) as info:
            call()
        assert str(info.value) == message
    assert snapshot(store, keep.id) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside
    assert [r.id for r in store.list()] == [keep.id]


def test_the_longest_valid_session_id_is_accepted(store: tl.Store) -> None:
    sid = "A-z_9" + "x" * 59
    s = store.create(session_id=sid)
    s.append_message("user", "ok")
    s.close()
    assert store.open(sid).id == sid


# -- the appended message checked from its fields (model/limits.plain_message) -------------------


@pytest.mark.parametrize("where", ["model", "stop_reason", "tool_use_id", "tool result"])
def test_a_nul_in_any_string_of_a_plain_message_is_refused(
    store: tl.Store, session: tl.Session, where: str
) -> None:
    bad = "a\x00b"
    parts: dict[str, Any] = {"role": "assistant", "content": [text("fine")]}
    if where == "tool_use_id":
        parts["content"] = [tool_result(bad, "fine")]
    elif where == "tool result":
        parts["content"] = [text("fine"), tool_result("t1", bad)]
    else:
        parts[where] = bad
    refused(
        store,
        session,
        lambda: session.append_message(Message(**parts)),
        r"NUL character \(\\u0000\)",
    )


@pytest.mark.parametrize("number", [math.nan, math.inf])
def test_a_float_in_a_messages_usage_is_refused(
    store: tl.Store, session: tl.Session, number: float
) -> None:
    # msgspec does not check a Struct's field types when it is built: the usage holds a float
    msg = Message(role="assistant", content=[text("x")], usage=Usage(input=number))  # type: ignore[arg-type]
    refused(store, session, lambda: session.append_message(msg), "JSON has no NaN or Infinity")


def test_what_a_plain_message_may_hold_is_pinned() -> None:
    # plain_message reads these fields by name: a new field must be added to it (or make it
    # answer False), else the field would go unchecked
    assert Message.__struct_fields__ == (
        "role",
        "content",
        "model",
        "usage",
        "stop_reason",
        "provider_details",
    )
    assert Usage.__struct_fields__ == ("input", "output", "cache_read", "cache_write", "total")
    assert TextBlock.__struct_fields__ == ("text", "provider_details")
    assert Text.__struct_fields__ == ("content",)
    assert ToolResultBlock.__struct_fields__ == ("tool_result", "provider_details")
    assert ToolResult.__struct_fields__ == ("tool_use_id", "content", "is_error")


_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8) | st.sampled_from(
    ["a\x00", "null", "u0000", "{[", "\\u0000"]
)
_numbers = st.integers(-5, 5) | st.booleans() | st.floats(allow_nan=True)
_blocks = st.one_of(
    st.builds(text, _texts),
    st.builds(tool_result, _texts, _texts | st.lists(st.builds(text, _texts), max_size=2)),
    st.builds(tool_use, _texts, _texts, st.dictionaries(_texts, _numbers, max_size=2)),
    st.builds(
        TextBlock,
        text=st.builds(Text, content=_texts),
        provider_details=st.none() | st.dictionaries(_texts, _numbers, max_size=2),
    ),
)
_messages = st.builds(
    Message,
    role=_texts,
    content=st.lists(_blocks, max_size=3),
    model=st.none() | _texts,
    usage=st.none() | st.builds(Usage, input=_numbers, total=_numbers),
    stop_reason=st.none() | _texts,
    provider_details=st.none() | st.dictionaries(_texts, _numbers, max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(msg=_messages, root=st.booleans())
def test_the_check_from_a_messages_fields_refuses_exactly_what_the_full_walk_refuses(
    msg: Message, root: bool
) -> None:
    rec = MessageEntry(id="m", parent_id=None if root else "p", timestamp=TS, message=msg)
    line = encode(rec)
    try:
        check_value(msg, depth=2)
    except LimitError as exc:
        expected: str | None = str(exc)
    else:
        expected = None
    if plain_message(msg):
        assert expected is None
    try:
        check_record(msg, line, 1 if root else 0)
    except LimitError as exc:
        assert str(exc) == expected
    else:
        assert expected is None
