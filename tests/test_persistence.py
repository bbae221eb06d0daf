"""What the JSONL files hold and how hand-written or damaged files load (DESIGN §2-§4).

The backend-neutral contract is in test_conformance.py; these tests write session files by hand,
so they are about the JSONL store only.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline.model.content import image, text, thinking, tool_result, tool_use
from threadline.model.entries import (
    BranchSummary,
    Compaction,
    Custom,
    Label,
    ModelChange,
    SessionInfo,
    ThinkingLevel,
)

TS = "2024-01-01T12:00:00Z"
HEADER = {"type": "session", "id": "s1", "version": 1, "timestamp": TS}


def write_session(
    store: tl.Store,
    lines: list[Any],
    sid: str = "s1",
    header: dict[str, Any] | None = None,
    tail: bytes = b"",
) -> Path:
    """A session file from JSON objects (or raw strings/bytes, written as they are)."""
    path = Path(store.url) / f"{sid}.jsonl"
    out = [json.dumps({**(header or HEADER), "id": sid}, separators=(",", ":")).encode()]
    for line in lines:
        if isinstance(line, bytes):
            out.append(line)
        elif isinstance(line, str):
            out.append(line.encode())
        else:
            out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode())
    path.write_bytes(b"\n".join(out) + b"\n" + tail)
    return path


def m(eid: str, parent: str | None, body: str, role: str = "user", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": eid,
        "parent_id": parent,
        "timestamp": TS,
        "message": {"role": role, "content": [{"type": "text", "text": {"content": body}}]},
        **extra,
    }


def leaf(eid: str, target: str | None) -> dict[str, Any]:
    return {
        "type": "leaf",
        "id": eid,
        "parent_id": None,
        "timestamp": TS,
        "leaf": {"target_id": target},
    }


def seen(s: tl.Session) -> list[tuple[str, str]]:
    return [(x.role, x.text) for x in s.context().messages]


# -- the file format as written ------------------------------------------------------------------


def test_written_lines_have_exactly_the_design_shape(jsonl_store: tl.Store) -> None:
    s = jsonl_store.create(cwd="/w")
    u = s.append_message("user", "Hello")
    s.branch(u)
    raw = (Path(jsonl_store.url) / f"{s.id}.jsonl").read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw
    header, msg_line, leaf_line = (json.loads(x) for x in raw.split(b"\n")[:-1])
    assert header == {
        "type": "session",
        "id": s.id,
        "version": 1,
        "timestamp": s.header.timestamp,
        "cwd": "/w",
    }
    assert msg_line == {
        "type": "message",
        "id": u,
        "parent_id": None,
        "timestamp": s.entry(u).timestamp,
        "message": {"role": "user", "content": [{"type": "text", "text": {"content": "Hello"}}]},
    }
    assert leaf_line["type"] == "leaf"
    assert leaf_line["parent_id"] is None
    assert leaf_line["leaf"] == {"target_id": u}
    assert list(leaf_line) == ["type", "id", "parent_id", "timestamp", "leaf"]


def test_generated_ids_are_distinct_uuid4_strings_and_timestamps_rfc3339_milliseconds(
    jsonl_store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    from threadline.model import entries

    s = jsonl_store.create()
    ids = [s.append_message("user", f"m{i}") for i in range(600)]  # more than two id pools
    assert len(set(ids)) == 600
    for eid in ids:
        u = uuid.UUID(eid)
        assert str(u) == eid and u.version == 4 and u.variant == uuid.RFC_4122
    # the second's text is formatted once and reused for the milliseconds within it
    clock = iter([1_700_000_000_123_456_789, 1_700_000_000_999_000_000, 1_700_000_001_004_000_000])
    monkeypatch.setattr(entries.time, "time_ns", lambda: next(clock))
    stamps = [s.entry(s.append_message("user", "t")).timestamp for _ in range(3)]
    assert stamps == [
        "2023-11-14T22:13:20.123Z",
        "2023-11-14T22:13:20.999Z",
        "2023-11-14T22:13:21.004Z",
    ]


def test_line_separators_inside_text_round_trip(jsonl_store: tl.Store) -> None:
    body = "a\u2028b\u2029c\x85d\re\nf\x0bg\x0ch"
    s = jsonl_store.create()
    u = s.append_message("user", body)
    a = s.append_message("assistant", "after")
    s.close()
    raw = (Path(jsonl_store.url) / f"{s.id}.jsonl").read_bytes()
    assert raw.count(b"\n") == 3  # header + two records: no raw newline inside a line
    again = jsonl_store.open(s.id)
    assert again.load_report.clean
    assert again.entry(u).message.text == body
    assert again.path_ids() == [u, a]


# -- loading the examples of DESIGN §2 -----------------------------------------------------------


def test_the_design_example_lines_load(jsonl_store: tl.Store) -> None:
    write_session(
        jsonl_store,
        [
            '{"type":"message","id":"m1","parent_id":null,"timestamp":"2024-01-01T12:00:00Z",'
            '"message":{"role":"user","content":[{"type":"text","text":{"content":"Hello"}}]}}',
        ],
        header={
            "type": "session",
            "id": "s1",
            "version": 1,
            "timestamp": TS,
            "parent_session": "s0",
            "cwd": "/home/x",
            "metadata": {"k": "v"},
        },
    )
    s = jsonl_store.open("s1")
    assert s.load_report.clean
    assert s.header == tl.store.base.SessionHeader(
        id="s1", version=1, timestamp=TS, parent_session="s0", cwd="/home/x", metadata={"k": "v"}
    )
    assert seen(s) == [("user", "Hello")]
    assert s.leaf_id == "m1"


def test_every_entry_type_loads_in_nested_and_flattened_form(jsonl_store: tl.Store) -> None:
    def env(kind: str, eid: str, parent: str | None) -> dict[str, Any]:
        return {"type": kind, "id": eid, "parent_id": parent, "timestamp": TS}

    blocks = [
        {"type": "text", "text": {"content": "look"}, "provider_details": {"cache": "x"}},
        {
            "type": "image",
            "image": {"source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        },
        {"type": "thinking", "thinking": {"content": "hmm", "signature": "sig"}},
        {"type": "tool_use", "tool_use": {"id": "t1", "name": "ls", "input": {"p": "/"}}},
    ]
    write_session(
        jsonl_store,
        [
            {
                **env("model_change", "mc", None),
                "model_change": {"provider": "openai", "model_id": "gpt-4o"},
            },
            {**env("thinking_level", "tl", "mc"), "thinking_level": "medium"},  # flattened
            {
                **env("message", "m1", "tl"),
                "message": {
                    "role": "assistant",
                    "content": blocks,
                    "model": "gpt-4o",
                    "stop_reason": "tool_use",
                    "usage": {"input": 5, "output": 7},
                },
            },
            {
                **env("message", "m2", "m1"),
                "message": {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_result": {
                                "tool_use_id": "t1",
                                "content": [{"type": "text", "text": {"content": "bin"}}],
                            },
                        }
                    ],
                },
            },
            {**env("label", "lb", "m2"), "target_id": "m1", "label": "flat label"},  # flattened
            {**env("session_info", "si", "lb"), "session_info": {"name": "named"}},
            {**env("custom", "cu", "si"), "custom_type": "ext", "data": [1, {"a": None}]},
            {
                **env("compaction", "co", "cu"),
                "compaction": {
                    "summary": "S",
                    "first_kept_entry_id": "m2",
                    "tokens_before": 9,
                    "details": {"files": ["a.py"]},
                },
            },
            {**env("branch_summary", "bs", "co"), "summary": "B", "from_id": "m1"},  # flattened
            {"type": "leaf", "id": "lf", "parent_id": None, "timestamp": TS, "target_id": "bs"},
        ],
    )
    s = jsonl_store.open("s1")
    assert s.load_report.clean
    assert [e.id for e in s.entries()] == ["mc", "tl", "m1", "m2", "lb", "si", "cu", "co", "bs"]
    assert s.entry("mc").payload == ModelChange(provider="openai", model_id="gpt-4o")
    assert s.entry("tl").payload == ThinkingLevel(thinking_level="medium")
    assert s.entry("lb").payload == Label(target_id="m1", label="flat label")
    assert s.entry("si").payload == SessionInfo(name="named")
    assert s.entry("cu").payload == Custom(custom_type="ext", data=[1, {"a": None}])
    assert s.entry("co").payload == Compaction(
        summary="S", first_kept_entry_id="m2", tokens_before=9, details={"files": ["a.py"]}
    )
    assert s.entry("bs").payload == BranchSummary(summary="B", from_id="m1")
    m1 = s.entry("m1").message
    assert m1.content == [
        text("look", cache="x"),
        image("iVBO"),
        thinking("hmm", "sig"),
        tool_use("t1", "ls", {"p": "/"}),
    ]
    assert msgspec.to_builtins(m1.content) == blocks
    assert s.entry("m2").message.content == [tool_result("t1", [text("bin")])]
    assert s.leaf_id == "bs"
    assert s.name == "named"
    assert s.labels() == {"m1": "flat label"}
    ctx = s.context()
    assert [v.id for v in ctx.view] == ["co", "m2", "bs"]
    assert ctx.model == ModelChange(provider="openai", model_id="gpt-4o")
    assert ctx.thinking_level == "medium"


def test_a_header_without_version_is_version_1(jsonl_store: tl.Store) -> None:
    write_session(
        jsonl_store, [m("m1", None, "hi")], header={"type": "session", "id": "s1", "timestamp": TS}
    )
    s = jsonl_store.open("s1")
    assert s.header.version == 1
    assert seen(s) == [("user", "hi")]


# -- the leaf on load ----------------------------------------------------------------------------


def test_the_latest_leaf_record_sets_the_leaf_when_no_entry_follows_it(
    jsonl_store: tl.Store,
) -> None:
    write_session(
        jsonl_store, [m("a", None, "a"), m("b", "a", "b"), leaf("l1", "b"), leaf("l2", "a")]
    )
    assert jsonl_store.open("s1").leaf_id == "a"


def test_an_entry_appended_after_a_leaf_record_is_the_leaf(jsonl_store: tl.Store) -> None:
    write_session(
        jsonl_store, [m("a", None, "a"), m("b", "a", "b"), leaf("l1", "a"), m("c", "a", "c")]
    )
    s = jsonl_store.open("s1")
    assert s.leaf_id == "c"
    assert s.path_ids() == ["a", "c"]


def test_a_null_leaf_record_means_before_the_first_entry(jsonl_store: tl.Store) -> None:
    write_session(jsonl_store, [m("a", None, "a"), leaf("l1", None)])
    s = jsonl_store.open("s1")
    assert s.leaf_id is None
    assert seen(s) == []


def test_a_leaf_record_with_an_unknown_target_is_ignored_and_reported(
    jsonl_store: tl.Store,
) -> None:
    write_session(
        jsonl_store, [m("a", None, "a"), m("b", "a", "b"), leaf("l1", "a"), leaf("l2", "ghost")]
    )
    s = jsonl_store.open("s1")
    assert s.leaf_id == "a"
    assert s.load_report.unknown_leaf == ["ghost"]


def test_navigation_survives_a_reopen(jsonl_store: tl.Store) -> None:
    s = jsonl_store.create()
    u1 = s.append_message("user", "u1")
    s.append_message("assistant", "a1")
    s.branch(u1)
    s.close()
    assert jsonl_store.open(s.id).leaf_id == u1
    s2 = jsonl_store.open(s.id)
    s2.reset_leaf()
    s2.close()
    assert jsonl_store.open(s.id).leaf_id is None


# -- damaged files ---------------------------------------------------------------------------------


def test_duplicate_ids_keep_the_first_and_are_reported(jsonl_store: tl.Store) -> None:
    write_session(
        jsonl_store,
        [m("a", None, "first a"), m("b", "a", "b"), m("a", "b", "second a"), m("c", "b", "c")],
    )
    s = jsonl_store.open("s1")
    assert s.load_report.duplicate_ids == ["a"]
    assert [e.id for e in s.entries()] == ["a", "b", "c"]
    assert s.entry("a").message.text == "first a"
    assert s.entry("a").parent_id is None
    assert seen(s) == [("user", "first a"), ("user", "b"), ("user", "c")]


def test_corrupt_middle_lines_are_skipped_and_reported_without_losing_the_rest(
    jsonl_store: tl.Store,
) -> None:
    write_session(
        jsonl_store,
        [
            m("a", None, "a"),  # line 2
            '{"type":"message","id":"broken","parent_id":"a","timest',  # line 3: torn JSON
            "not json at all",  # line 4
            '{"type":"label","id":"bad","parent_id":"a","timestamp":"'
            + TS
            + '","label":{"nolabel":1}}',  # line 5: wrong shape
            m("b", "a", "b"),  # line 6
            "[1,2]",  # line 7: not an object
            m("c", "b", "c"),  # line 8
        ],
    )
    s = jsonl_store.open("s1")
    assert [n for n, _reason in s.load_report.corrupt_lines] == [3, 4, 5, 7]
    assert all(reason for _n, reason in s.load_report.corrupt_lines)
    assert [e.id for e in s.entries()] == ["a", "b", "c"]
    assert seen(s) == [("user", "a"), ("user", "b"), ("user", "c")]
    # the writer appends after the damage; everything stays readable
    d = s.append_message("user", "d")
    s.close()
    again = jsonl_store.open("s1")
    assert [e.id for e in again.entries()] == ["a", "b", "c", d]
    assert [n for n, _ in again.load_report.corrupt_lines] == [3, 4, 5, 7]


def test_a_torn_last_line_is_not_read_and_moves_to_torn_before_the_first_append(
    jsonl_store: tl.Store,
) -> None:
    tail = b'{"type":"message","id":"half","parent_id":"a","timestamp":"2024-01'
    path = write_session(jsonl_store, [m("a", None, "a")], tail=tail)
    ro = jsonl_store.open("s1", read_only=True)
    assert ro.load_report.torn_bytes == len(tail)
    assert [e.id for e in ro.entries()] == ["a"]
    assert path.read_bytes().endswith(tail)  # readers never repair
    s = jsonl_store.open("s1")
    b = s.append_message("user", "b")
    s.close()
    assert (path.parent / "s1.jsonl.torn").read_bytes() == tail + b"\n"
    assert path.read_bytes().endswith(b"\n")
    again = jsonl_store.open("s1")
    assert again.load_report.clean
    assert again.path_ids() == ["a", b]


def test_orphans_and_cycles_in_a_hand_written_file_are_reported(jsonl_store: tl.Store) -> None:
    write_session(
        jsonl_store,
        [
            m("x", "y", "x"),
            m("y", "x", "y"),  # a two-cycle
            m("o", "nowhere", "orphan"),
            m("z", "z", "self"),  # its own parent
            m("k", "y", "kid"),
        ],
    )
    s = jsonl_store.open("s1")
    assert s.load_report.orphans == ["o"]
    assert s.load_report.cycles == ["x", "z"]
    assert [(f.entry.id, f.parent_id, f.depth) for f in s.tree(flat=True)] == [
        ("x", None, 0),
        ("y", "x", 1),
        ("k", "y", 2),
        ("o", None, 0),
        ("z", None, 0),
    ]
    assert s.path_ids() == ["x", "y", "k"]
    # appending continues under the leaf
    n = s.append_message("user", "new")
    assert s.path_ids() == ["x", "y", "k", n]


def test_the_nested_tree_orders_siblings_by_time_then_file_order_with_parents_written_late(
    jsonl_store: tl.Store,
) -> None:
    def at(eid: str, parent: str | None, stamp: str) -> dict[str, Any]:
        return m(eid, parent, eid, timestamp=stamp)

    write_session(
        jsonl_store,
        [
            at("r1", None, "2024-01-01T12:00:00Z"),
            at("c", "p", "2024-01-01T12:00:02Z"),  # written before its parent
            at("p", "r1", "2024-01-01T12:00:01Z"),
            at("d", "p", "2024-01-01T12:00:03Z"),
            at("e", "p", "2024-01-01T13:00:02+01:00"),  # the same instant as c, later in file
            at("q", "r1", "2024-01-01T12:00:00.5Z"),  # earlier than p, later in the file
            at("r0", None, "2024-01-01T11:00:00Z"),
        ],
    )
    s = jsonl_store.open("s1")

    def shape(nodes: list[tl.TreeNode]) -> list[Any]:
        return [(n.entry.id, shape(n.children)) for n in nodes]

    assert shape(s.tree()) == [  # type: ignore[arg-type]
        ("r0", []),
        ("r1", [("q", []), ("p", [("c", []), ("e", []), ("d", [])])]),
    ]
    assert [f.entry.id for f in s.tree(flat=True)] == ["r0", "r1", "q", "p", "c", "e", "d"]


@settings(max_examples=150, deadline=None)
@given(
    parents=st.lists(st.integers(-2, 40), min_size=1, max_size=40),
    stamps=st.lists(st.integers(0, 3), min_size=40, max_size=40),
    shuffle=st.none() | st.randoms(use_true_random=False),
)
def test_the_nested_tree_has_the_flat_trees_order_whatever_the_file_order(
    parents: list[int], stamps: list[int], shuffle: Any
) -> None:
    # entry i: a root (-1), a child of the entry before it (-2, the usual chain) or of any
    # earlier one; few distinct times, so siblings tie; shuffled, children come before parents
    records = []
    for i, p in enumerate(parents):
        parent = None if i == 0 or p == -1 else f"e{i - 1}" if p == -2 else f"e{p % i}"
        stamp = f"2024-01-01T12:00:0{stamps[i]}Z"
        records.append(m(f"e{i}", parent, f"e{i}", timestamp=stamp))
    if shuffle is not None:
        shuffle.shuffle(records)
    with tempfile.TemporaryDirectory() as tmp:
        store = tl.open_store(tmp)
        write_session(store, records)
        s = store.open("s1")
        nested: list[tuple[str, list[str], int]] = []
        stack = [(n, 0) for n in reversed(s.tree())]  # type: ignore[arg-type]
        while stack:
            node, depth = stack.pop()
            nested.append((node.entry.id, [c.entry.id for c in node.children], depth))
            stack.extend((c, depth + 1) for c in reversed(node.children))
        flat = [(f.entry.id, f.children, f.depth) for f in s.tree(flat=True)]  # type: ignore[union-attr]
        assert nested == flat
        assert len(flat) == len(parents)


# -- unknown record types and fields ------------------------------------------------------------


UNKNOWN_TYPE = (
    '{"type":"future_thing","id":"f1","parent_id":"a","timestamp":"'
    + TS
    + '","future_thing":{"x":[1,2,3]}}'
)
UNKNOWN_META = '{"type":"future_meta","v":2}'
UNKNOWN_FIELDS = json.dumps(
    m("b", "a", "b", extra_top={"keep": True})
    | {
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": {"content": "b"}}],
            "future_field": 7,
        }
    },
    separators=(",", ":"),
)


def test_unknown_record_types_and_fields_survive_a_fork(jsonl_store: tl.Store) -> None:
    write_session(jsonl_store, [m("a", None, "a"), UNKNOWN_TYPE, UNKNOWN_META, UNKNOWN_FIELDS])
    s = jsonl_store.open("s1")
    assert s.load_report.corrupt_lines == []
    assert s.entry("b").message.text == "b"
    f = jsonl_store.fork("s1")
    lines = (Path(jsonl_store.url) / f"{f.id}.jsonl").read_bytes().split(b"\n")
    assert lines[1:] == [
        json.dumps(m("a", None, "a"), separators=(",", ":")).encode(),
        UNKNOWN_TYPE.encode(),
        UNKNOWN_META.encode(),
        UNKNOWN_FIELDS.encode(),
        b"",
    ]
    assert [e.id for e in f.entries() if e.type == "message"] == ["a", "b"]


def test_unknown_lines_stay_byte_for_byte_when_a_writer_appends(jsonl_store: tl.Store) -> None:
    path = write_session(
        jsonl_store, [m("a", None, "a"), UNKNOWN_TYPE, UNKNOWN_META, UNKNOWN_FIELDS]
    )
    before = path.read_bytes()
    s = jsonl_store.open("s1")
    c = s.append_message("user", "c")
    s.close()
    after = path.read_bytes()
    assert after.startswith(before)
    again = jsonl_store.open("s1")
    assert again.entry(c).parent_id == "b"
    assert [e.id for e in again.entries() if e.type == "message"] == ["a", "b", c]


def test_a_session_file_that_is_a_symlink_is_refused(jsonl_store: tl.Store) -> None:
    real = write_session(jsonl_store, [m("a", None, "a")], sid="real")
    (Path(jsonl_store.url) / "link.jsonl").symlink_to(real)
    with pytest.raises(tl.UserError, match="symbolic link"):
        jsonl_store.open("link")


def test_a_record_of_unknown_type_never_moves_the_leaf(jsonl_store: tl.Store) -> None:
    # a newer writer's meta record (no parent) after the conversation must not empty the context
    write_session(
        jsonl_store,
        [
            m("a", None, "a"),
            m("b", "a", "b"),
            {
                "type": "future_meta",
                "id": "fm",
                "parent_id": None,
                "timestamp": TS,
                "future_meta": {"x": 1},
            },
            {
                "type": "future_entry",
                "id": "fe",
                "parent_id": "b",
                "timestamp": TS,
                "future_entry": {"y": 2},
            },
        ],
    )
    s = jsonl_store.open("s1")
    assert s.leaf_id == "b"
    assert seen(s) == [("user", "a"), ("user", "b")]
    c = s.append_message("user", "c")
    assert s.entry(c).parent_id == "b"


def test_unknown_lines_survive_a_rewrite(jsonl_store: tl.Store) -> None:
    # purge is the one operation that rewrites a session file in place (DESIGN §3)
    path = write_session(
        jsonl_store,
        [m("a", None, "a"), UNKNOWN_TYPE, UNKNOWN_META, UNKNOWN_FIELDS, m("c", "b", "secret")],
    )
    s = jsonl_store.open("s1")
    s.purge(["c"], dry_run=False)
    s.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[2:5] == [UNKNOWN_TYPE.encode(), UNKNOWN_META.encode(), UNKNOWN_FIELDS.encode()]
    assert b"secret" not in path.read_bytes()
    again = jsonl_store.open("s1")
    assert [e.id for e in again.entries() if e.type == "message"] == ["a", "b", "c"]
    assert again.entry("b").message.text == "b"


def test_unreadable_session_files_are_skipped_by_list_and_continue_recent(
    jsonl_store: tl.Store,
) -> None:
    good = jsonl_store.create()
    good.append_message("user", "the good one")
    good.close()
    root = Path(jsonl_store.url)
    (root / "empty.jsonl").write_bytes(b"")
    (root / "noheader.jsonl").write_bytes(b'{"type":"session","id":"noheader"')
    (root / "garbage.jsonl").write_bytes(b"\x00\xff not json\n")
    assert [r.id for r in jsonl_store.list()] == [good.id]
    assert jsonl_store.continue_recent().id == good.id
    for sid in ("empty", "noheader", "garbage"):
        with pytest.raises(tl.StoreError, match=f"{sid}.jsonl"):
            jsonl_store.open(sid)


def test_torn_tails_of_successive_crashes_accumulate_in_torn(jsonl_store: tl.Store) -> None:
    path = write_session(jsonl_store, [m("a", None, "a")], tail=b'{"first tear')
    with jsonl_store.open("s1") as s:
        b = s.append_message("user", "b")
    with open(path, "ab") as fh:
        fh.write(b'{"second":')
    with jsonl_store.open("s1") as s:
        c = s.append_message("user", "c")
    assert (path.parent / "s1.jsonl.torn").read_bytes() == b'{"first tear\n{"second":\n'
    again = jsonl_store.open("s1")
    assert again.load_report.clean
    assert again.path_ids() == ["a", b, c]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
GARBAGE = (
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" "))
    | st.text(max_size=40).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass"))
    | JSON.map(lambda v: json.dumps(v).encode())
    | st.builds(
        lambda kind, payload, flat: json.dumps(
            {
                "type": kind,
                "id": "garbage",
                "parent_id": None,
                "timestamp": TS,
                **(payload if flat and isinstance(payload, dict) else {kind: payload}),
            }
        ).encode(),
        st.sampled_from(
            ["message", "label", "compaction", "leaf", "bookmark", "purge", "context_op", "session"]
        ),
        JSON,
        st.booleans(),
    )
)


@settings(max_examples=150, deadline=None)
@given(garbage=st.lists(st.tuples(st.integers(0, 3), GARBAGE), max_size=6))
def test_garbage_lines_between_records_never_lose_the_valid_ones(
    garbage: list[tuple[int, bytes]],
) -> None:
    valid = [
        m("a", None, "a"),
        m("b", "a", "b", role="assistant"),
        m("c", "b", "c"),
        m("d", "c", "d", role="assistant"),
    ]
    lines: list[Any] = []
    for i, record in enumerate(valid):
        lines.extend(g for at, g in garbage if at == i and i > 0)  # garbage between records
        lines.append(record)
    with tempfile.TemporaryDirectory() as tmp:
        store = tl.open_store(tmp)
        write_session(store, lines)
        s = store.open("s1")
        assert [(e.id, e.message.text) for e in s.path("d")] == [
            ("a", "a"),
            ("b", "b"),
            ("c", "c"),
            ("d", "d"),
        ]
        assert s.leaf_id == "d"
        assert [x.text for x in s.context().messages] == ["a", "b", "c", "d"]
        s.append_message("user", "e")
        s.close()
        assert [e.id for e in store.open("s1").path()][:4] == ["a", "b", "c", "d"]


def test_every_entry_encodes_with_to_builtins_exactly_as_its_line_in_the_file(
    jsonl_store: tl.Store,
) -> None:
    s = jsonl_store.create()
    u = s.append_message("user", [text("hi"), image("iVBO")])
    s.append_model_change("openai", "gpt-4o")
    s.append_thinking_level("high")
    s.append_message(
        "assistant",
        [thinking("hmm", "sig"), tool_use("t1", "ls", {"p": "/"})],
        usage={"input": 1, "output": 2},
        stop_reason="tool_use",
    )
    s.append_message("tool", [tool_result("t1", [text("bin")], is_error=True)])
    s.set_label(u, "start")
    s.append_session_info("name")
    s.append_custom("ext", {"k": [1, None]})
    s.append_compaction("sum", u, 5)
    s.branch_with_summary(u, "gave up")
    s.close()
    lines = (Path(jsonl_store.url) / f"{s.id}.jsonl").read_bytes().split(b"\n")[1:-1]
    by_id = {json.loads(x)["id"]: json.loads(x) for x in lines}
    again = jsonl_store.open(s.id)
    assert len(again.entries()) == 10
    for e in again.entries():
        assert msgspec.to_builtins(e) == by_id[e.id]


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(
    jsonl_store: tl.Store, tmp_path: Path
) -> None:
    path = write_session(jsonl_store, [m("a", None, "a")])
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (path.parent / "s1.lock").symlink_to(victim)
    before = path.read_bytes()
    s = jsonl_store.open("s1")
    with pytest.raises(tl.StoreError, match=r"Cannot open the lock file .*s1\.lock .*symbolic"):
        s.append_message("user", "b")
    assert victim.read_bytes() == b"precious"
    assert path.read_bytes() == before


def test_list_sees_appends_that_bring_a_repaired_file_back_to_its_listed_size(
    tmp_path: Path,
) -> None:
    import threadline as tl

    store = tl.open_store(tmp_path / "s")
    with store.create(session_id="grow") as s:
        s.append_message("user", "first")
    path = tmp_path / "s" / "grow.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"zz","junk":"' + b"j" * 3000)  # a torn tail
    assert [r.message_count for r in store.list()] == [1]
    size = path.stat().st_size
    s = store.open("grow")
    s.append_message("user", "x")  # repairs the tail (moved to .torn), then appends
    before = path.stat().st_size
    s.append_custom("pad", "")
    fixed = path.stat().st_size - before  # a pad record's size without data
    s.append_custom("pad", "p" * (size - path.stat().st_size - fixed))
    s.close()
    assert path.stat().st_size == size  # same inode, same size as when it was listed
    assert [r.message_count for r in store.list()] == [2]


def test_a_block_of_an_unknown_type_becomes_a_placeholder_and_the_rest_of_the_message_stays(
    tmp_path: Path,
) -> None:
    import threadline as tl

    store = tl.open_store(tmp_path / "s")
    with store.create(session_id="newer") as s:
        s.append_message("user", "before")
    line = (
        b'{"type":"message","id":"m2","parent_id":null,"timestamp":"2030-01-01T00:00:00.000Z",'
        b'"message":{"role":"user","content":[{"type":"text","text":{"content":"listen"}},'
        b'{"type":"audio","audio":{"format":"wav","data":"UklGRg=="}}]}}\n'
    )
    path = tmp_path / "s" / "newer.jsonl"
    with open(path, "ab") as fh:
        fh.write(line)
    s = store.open("newer")
    msg = s.entry("m2").message  # type: ignore[union-attr]
    assert msg.text == "listen\n[audio block: not supported by this version of threadline]"
    assert msg.content[1].provider_details == {
        "unknown_block": {"type": "audio", "audio": {"format": "wav", "data": "UklGRg=="}}
    }
    assert s.load_report.clean
    forked = store.fork("newer")
    assert line in (tmp_path / "s" / f"{forked.id}.jsonl").read_bytes()  # kept byte for byte


def test_generated_ids_are_distinct_canonical_version_4_uuids() -> None:
    import uuid

    from threadline.model.entries import new_id

    ids = [new_id() for _ in range(3 * 256 + 7)]  # across pools of 256
    assert len(set(ids)) == len(ids)
    for x in ids:
        u = uuid.UUID(x)
        assert (str(u), u.version, u.variant) == (x, 4, uuid.RFC_4122)
