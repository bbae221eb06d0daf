"""The index beside a JSONL log (``<id>.jsonl.idx``, issue 19): an open through it gives exactly
what a full parse of the log gives, and an index that does not match the log (stale, torn,
foreign, corrupt, left by a killed process) is rebuilt or extended, never trusted and never an
error."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline.store import jsonl as jsonl_module
from threadline.store import jsonl_index


@pytest.fixture(autouse=True)
def index_every_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "INDEX_MIN_BYTES", 0)


def snapshot(s: tl.Session) -> dict[str, Any]:
    """Everything a load determines, in comparable form."""
    st_ = s.state
    # first, while an open through the index has built no parents dict (the tree walks the
    # columns' rows): the context, the path, the entries in file order
    ctx = s.context()
    view = ctx.view.ids()
    items = [msgspec.json.encode(v) for v in ctx.view]  # read through the view's runs
    path = st_.path_ids()
    ids = s.entry_ids()
    nested = nested_order(s.tree())  # before anything merges the timestamp columns
    log: Any = st_.log
    return {
        "ids": ids,
        "path": path,
        "leaf": s.leaf_id,
        "parents": dict(st_.tree.parent),
        "timestamps": dict(st_.tree.ts),
        "children": {e: st_.tree.children(e) for e in [None, *st_.tree.parent]},
        "nested tree": nested,
        "labels": s.labels(),
        "name": s.name,
        "report": msgspec.structs.asdict(s.load_report),
        "context": [msgspec.json.encode(m) for m in ctx.messages],
        "view": view,
        "view items": items,
        "sizes": {e: st_.size(e) for e in [*st_.sizes, *s.entry_ids()]},
        "entries": [msgspec.json.encode(e) for e in s.entries()],
        "purged": sorted(st_.purged),
        "lines": log._lines,
        "end": log._end,
    }


def nested_order(roots: list[Any]) -> list[tuple[str, int, str | None]]:
    """The nested tree() in depth-first order: (entry id, depth, label)."""
    out: list[tuple[str, int, str | None]] = []
    stack = [(n, 0) for n in reversed(roots)]
    while stack:
        node, depth = stack.pop()
        out.append((node.entry.id, depth, node.label))
        stack.extend((c, depth + 1) for c in reversed(node.children))
    return out


def test_tree_orders_siblings_by_time_without_merging_every_timestamp(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    ids = [s.append_message("user", f"m{i}") for i in range(50)]
    # three children of ids[10] written out of time order, then the branch moved back
    late = s.append(
        {
            "type": "message",
            "parent_id": ids[10],
            "timestamp": "2030-01-01T00:00:03Z",
            "message": {"role": "user", "content": [{"type": "text", "text": {"content": "c"}}]},
        }
    )
    early = s.append(
        {
            "type": "message",
            "parent_id": ids[10],
            "timestamp": "2000-01-01T00:00:01Z",
            "message": {"role": "user", "content": [{"type": "text", "text": {"content": "a"}}]},
        }
    )
    s.branch(ids[-1])
    s.close()
    store.open(s.id).close()  # writes the index
    again = store.open(s.id)
    assert again.state.log.index_state == "used"  # type: ignore[attr-defined]
    order = nested_order(again.tree())
    kids = [e for e, d, _ in order if d == 11]
    assert kids == [early, ids[11], late]
    assert again.state.tree._stamps  # the columns were not merged into ts
    assert order == nested_order(store.open(s.id).tree())
    store.close()


def test_tree_from_the_columns_equals_the_tree_from_the_parents_dict(tmp_path: Path) -> None:
    # tree() links an indexed session's messages by their rows (a run between two breaks is a
    # chain); the same session with its parents dict built links them by id
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    ids = [s.append_message("user", f"m{i}") for i in range(12)]
    s.append_model_change("p", "a")  # a record after ids[11], under it
    s.branch(ids[11])
    after = s.append(  # under the row before the record, and older than it: sorted first
        {
            "type": "message",
            "parent_id": ids[11],
            "timestamp": "2000-01-01T00:00:00Z",
            "message": {"role": "user", "content": [{"type": "text", "text": {"content": "a"}}]},
        }
    )
    s.branch(ids[3])
    side = [s.append_message("assistant", f"side {i}") for i in range(4)]  # a break, a chain
    summary = s.branch_with_summary(ids[5], "the side branch")
    under_summary = s.append_message("user", "under the summary")  # a parent by name
    s.set_label(ids[3], "fork")
    s.set_label(after, "after")
    s.set_label(summary, "summary")
    s.close()
    store.open("s").close()  # writes the index
    lazy = store.open("s")
    assert lazy.state.log.index_state == "used"  # type: ignore[attr-defined]
    assert lazy.state.tree.columns is not None
    got = nested_order(lazy.tree())
    assert lazy.state.tree.lazy  # tree() built no parents dict
    lazy.close()
    built = store.open("s")
    assert built.state.tree.parent  # the dict of every entry: tree() links by id
    assert built.state.tree.columns is None
    assert got == nested_order(built.tree())
    depth = {e: d for e, d, _ in got}
    order = [e for e, _, _ in got]
    assert order.index(after) == order.index(ids[11]) + 1  # before the record, its sibling
    assert [depth[e] for e in side] == [4, 5, 6, 7]
    assert depth[after] == depth[ids[11]] + 1
    assert depth[under_summary] == depth[summary] + 1 == depth[ids[5]] + 2
    assert {e: label for e, _, label in got if label} == {
        ids[3]: "fork",
        after: "after",
        summary: "summary",
    }
    built.close()


def open_state(store: tl.Store, sid: str) -> tuple[dict[str, Any], str]:
    s = store.open(sid, read_only=True)
    try:
        log: Any = s.state.log
        return snapshot(s), log.index_state
    finally:
        s.close()


def full_parse(store: tl.Store, sid: str, directory: Path) -> dict[str, Any]:
    """The reference: the same log opened with no index at all (and none written)."""
    idx = directory / f"{sid}.jsonl.idx"
    saved = idx.read_bytes() if idx.exists() else None
    idx.unlink(missing_ok=True)
    old = jsonl_module.INDEX_MIN_BYTES
    jsonl_module.INDEX_MIN_BYTES = 1 << 62
    try:
        snap, state = open_state(store, sid)
    finally:
        jsonl_module.INDEX_MIN_BYTES = old
    assert state == "none"
    assert not idx.exists()
    if saved is not None:
        idx.write_bytes(saved)
    return snap


def sample(store: tl.Store) -> tl.Session:
    s = store.create(session_id="s")
    first = s.append_message("user", "hello")
    s.append_message("assistant", "hi there")
    s.set_label(first, "start")
    s.append_model_change("anthropic", "claude")
    mid = s.append_message("user", "a question")
    s.append_message("assistant", "an answer")
    s.branch(mid)
    s.branch_with_summary(mid, "what the other branch did")
    s.append_message("user", "on the new branch")
    s.append_session_info("named")
    s.append_compaction("the summary so far", mid, 1000)
    s.append_message("assistant", "after the compaction")
    return s


def test_first_open_builds_the_index_next_opens_use_it_and_see_the_same(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    idx = tmp_path / "s.jsonl.idx"
    idx.unlink(missing_ok=True)  # (creating the session loaded it: that wrote one)
    first, state = open_state(store, "s")
    assert state == "built" and idx.exists()
    second, state = open_state(store, "s")
    assert state == "used"
    assert first == second == full_parse(store, "s", tmp_path)
    body = jsonl_index.read(idx)
    assert body is not None
    assert body.end == (tmp_path / "s.jsonl").stat().st_size
    assert len(body.kinds) == len(first["ids"]) + 1  # every entry and the leaf-less records


def test_open_context_and_appends_through_the_index_build_no_parents_dict(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = sample(store)
    for i in range(30):  # a long run, a branch off its middle, then back on the main line
        s.append_message("user", f"m{i}")
    side = s.entry_ids()[-15]
    s.branch(side)
    s.append_message("user", "on the side")
    s.close()
    reference = full_parse(store, "s", tmp_path)
    open_state(store, "s")  # builds the index
    again = store.open("s")
    assert again.state.log.index_state == "used"  # type: ignore[attr-defined]
    tree = again.state.tree
    ctx = again.context()
    assert (ctx.view.ids(), again.state.path_ids()) == (reference["view"], reference["path"])
    assert again.entry_ids() == reference["ids"]
    assert [msgspec.json.encode(m) for m in ctx.messages] == reference["context"]
    new = again.append_message("assistant", "appended after a lazy open")
    assert again.context().view.ids() == [*reference["view"], new]
    assert again.state.path_ids() == [*reference["path"], new]
    assert tree.lazy  # nothing above needed the dict of every entry's parent
    assert dict(tree.parent) == {**reference["parents"], new: reference["leaf"]}
    assert not tree.lazy
    assert again.context().view.ids() == [*reference["view"], new]
    again.close()


def test_the_index_holds_no_message_text(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    for i in range(20):
        s.append_message("user", f"zebra-{i} secret words")
    s.close()
    open_state(store, "s")
    data = (tmp_path / "s.jsonl.idx").read_bytes()
    assert b"zebra" not in data and b"secret" not in data


def test_open_through_the_index_reads_only_the_header_the_index_and_the_meta_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    for i in range(300):
        s.append_message("user" if i % 2 == 0 else "assistant", f"message {i} " * 200)
        if i % 100 == 0:
            s.set_label(s.leaf_id or "", f"label {i}")
    s.close()
    open_state(store, "s")  # builds the index
    size = (tmp_path / "s.jsonl").stat().st_size
    read = 0
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        nonlocal read
        data = real(fd, n, offset)
        read += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting)
    again = store.open("s", read_only=True)
    log: Any = again.state.log
    assert log.index_state == "used"
    # the first 64 KiB (the header), the 4 KiB the tail checksum covers, three labels
    assert read < 72 * 1024 < size // 10
    assert [m.text for m in again.context().messages][:2] == [
        "message 0 " * 200,
        "message 1 " * 200,
    ]
    again.close()


def test_appends_by_another_writer_extend_the_index(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")
    writer = tl.open_store(tmp_path, durability="flush").open("s")
    for i in range(5):
        writer.append_message("user", f"later {i}")
    writer.set_label(writer.leaf_id or "", "late label")
    writer.close()
    snap, state = open_state(store, "s")
    assert state == "extended"
    assert snap == full_parse(store, "s", tmp_path)
    assert b"later 4" in snap["context"][-1]
    body = jsonl_index.read(tmp_path / "s.jsonl.idx")
    assert body is not None and body.end == (tmp_path / "s.jsonl").stat().st_size
    assert open_state(store, "s")[1] == "used"


def test_a_line_repeating_an_indexed_message_id_after_the_index_is_a_duplicate(
    tmp_path: Path,
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")  # the index covers the whole log
    path = tmp_path / "s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    first_id = msgspec.json.decode(lines[1])["id"]
    path.write_bytes(b"".join([*lines, lines[1].replace(b"hello", b"again")]))
    snap, state = open_state(store, "s")
    assert state == "extended"
    assert snap == full_parse(store, "s", tmp_path)
    assert snap["report"]["duplicate_ids"] == [first_id]
    s = store.open("s", read_only=True)
    kept = msgspec.json.encode(s.entry(first_id))
    assert b'"hello"' in kept and b"again" not in kept  # the first line is kept
    s.close()


@pytest.mark.parametrize("lazy", [True, False])
def test_an_append_whose_new_id_is_already_in_the_session_changes_nothing_in_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: bool
) -> None:
    # the append's membership test and insert are one call (TreeIndex.add_new): an id already
    # in the columns or added since is refused there, on the columns and on the parents dict
    from threadline import state as state_module

    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")  # writes the index
    s = store.open("s")
    tree = s.state.tree
    if not lazy:
        assert tree.parent  # builds the dict of every entry
    assert tree.lazy is lazy
    indexed = s.entry_ids()[0]
    added = s.append_message("user", "added after the open")
    before = dict(tree.parent) if not lazy else None
    for dup in (indexed, added):
        monkeypatch.setattr(state_module, "new_id", lambda dup=dup: dup)
        assert s.append_message("user", "a repeat") == dup
    assert s.load_report.duplicate_ids == [indexed, added]
    assert tree.lazy is lazy
    assert s.leaf_id == added
    assert [e for e in s.entry_ids() if e in (indexed, added)] == [indexed, added]
    if before is not None:
        assert dict(tree.parent) == before
    s.close()


def test_timestamps_of_any_text_come_back_from_the_index(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    root = s.append_message("user", "root")
    s.close()
    path = tmp_path / "s.jsonl"
    stamps = ["2024-01-01T00:00:00Z", "", "2023-12-31T23:30:00+01:00", "zürich ☃"]
    with path.open("ab") as fh:
        for i, stamp in enumerate(stamps):  # siblings: their order depends on the timestamps
            fh.write(
                msgspec.json.encode(
                    {
                        "type": "message",
                        "id": f"m{i}",
                        "parent_id": root,
                        "timestamp": stamp,
                        "message": {"role": "user", "content": [{"type": "text", "text": "x"}]},
                    }
                )
                + b"\n"
            )
    assert open_state(store, "s")[1] == "extended"  # (creating the session wrote one)
    snap, state = open_state(store, "s")
    assert state == "used"
    assert snap == full_parse(store, "s", tmp_path)
    assert [snap["timestamps"][f"m{i}"] for i in range(4)] == stamps
    assert snap["children"][root] == ["m2", "m0", "m1", "m3"]


def test_a_truncated_log_rebuilds_the_index(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")
    path = tmp_path / "s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-3]))
    snap, state = open_state(store, "s")
    assert state == "rebuilt"
    assert snap == full_parse(store, "s", tmp_path)
    assert len(snap["ids"]) == len(lines) - 1 - 3 - 1  # header, three lines, the label line


def test_a_log_changed_in_place_at_the_same_size_rebuilds_the_index(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")
    path = tmp_path / "s.jsonl"
    data = path.read_bytes()
    changed = data.replace(b"after the compaction", b"AFTER THE COMPACTION")
    assert len(changed) == len(data) and changed != data
    path.write_bytes(changed)
    snap, state = open_state(store, "s")
    assert state == "rebuilt"
    assert b"AFTER THE COMPACTION" in snap["context"][-1]
    assert snap == full_parse(store, "s", tmp_path)


def test_a_purge_drops_the_index_and_the_next_open_rebuilds_it_without_the_text(
    tmp_path: Path,
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    keep = s.append_message("user", "keep this")
    doomed = s.append_message("assistant", "purge-me-zebra")
    s.append_message("user", "after")
    s.close()
    open_state(store, "s")
    s = store.open("s")
    s.purge([doomed], dry_run=False)
    s.close()
    snap, state = open_state(store, "s")
    # the rewrite removed the old file's index; the reload after the purge wrote a new one
    assert state == "used"
    assert snap == full_parse(store, "s", tmp_path)
    assert doomed in snap["purged"] and keep in snap["ids"]
    for p in tmp_path.iterdir():
        if p.is_file():
            assert b"purge-me-zebra" not in p.read_bytes(), p


def test_a_torn_tail_is_left_out_of_the_index_and_repaired_by_the_next_writer(
    tmp_path: Path,
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")
    path = tmp_path / "s.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn","parent_id":null,"timestamp":"2024-0')
    snap, state = open_state(store, "s")
    assert state == "extended"  # grew, but by no complete line: nothing to add
    assert snap["report"]["torn_bytes"] > 0
    assert snap == full_parse(store, "s", tmp_path)
    w = store.open("s")
    w.append_message("user", "after the repair")  # moves the torn tail aside, then appends
    w.close()
    snap, state = open_state(store, "s")
    assert state == "extended"
    assert snap == full_parse(store, "s", tmp_path)
    assert snap["report"]["torn_bytes"] == 0


def _reencode(body: jsonl_index.IndexBody) -> bytes:
    data = msgspec.msgpack.encode(body)
    return jsonl_index.MAGIC + zlib.crc32(data).to_bytes(4, "little") + data


def _damage(kind: str, data: bytes, body: jsonl_index.IndexBody) -> bytes:
    if kind == "garbage":
        return bytes(random.Random(1).randrange(256) for _ in range(len(data)))
    if kind == "empty":
        return b""
    if kind == "torn":
        return data[: len(data) // 2]
    if kind == "zeros":
        return bytes(len(data))
    if kind == "flipped":
        i = len(data) // 2
        return data[:i] + bytes([data[i] ^ 0x55]) + data[i + 1 :]
    if kind == "version":
        return _reencode(msgspec.structs.replace(body, version=99))
    if kind == "short-arrays":
        return _reencode(msgspec.structs.replace(body, starts=body.starts[:-8]))
    if kind == "records-moved":  # checksummed, but its record offsets are wrong
        return _reencode(msgspec.structs.replace(body, starts=bytes(len(body.starts))))
    if kind == "other-log":
        return _reencode(msgspec.structs.replace(body, tail_crc=body.tail_crc ^ 1))
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "empty",
        "torn",
        "zeros",
        "flipped",
        "version",
        "short-arrays",
        "records-moved",
        "other-log",
    ],
)
def test_a_damaged_index_is_rebuilt_never_an_error(tmp_path: Path, kind: str) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    reference = full_parse(store, "s", tmp_path)
    open_state(store, "s")
    idx = tmp_path / "s.jsonl.idx"
    data = idx.read_bytes()
    body = jsonl_index.read(idx)
    assert body is not None
    idx.write_bytes(_damage(kind, data, body))
    snap, state = open_state(store, "s")
    assert state == "rebuilt"
    assert snap == reference
    assert open_state(store, "s") == (reference, "used")  # written again, whole


def test_delete_removes_the_index(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    open_state(store, "s")
    assert (tmp_path / "s.jsonl.idx").exists()
    store.delete("s")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == []


def test_small_logs_keep_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "INDEX_MIN_BYTES", 256 * 1024)
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    (tmp_path / "s.jsonl.idx").write_bytes(b"stale")
    snap, state = open_state(store, "s")
    assert state == "none"
    assert not (tmp_path / "s.jsonl.idx").exists()  # a stale one is removed, not kept
    assert snap == full_parse(store, "s", tmp_path)


_KILLER = textwrap.dedent(
    """
    import sys
    import threadline as tl
    from threadline.store import jsonl as jsonl_module

    jsonl_module.INDEX_MIN_BYTES = 0
    store = tl.open_store(sys.argv[1], durability="flush")
    print("ready", flush=True)
    while True:  # rebuild the index over and over until killed
        (store.directory / "s.jsonl.idx").unlink(missing_ok=True)
        store.open("s", read_only=True).close()
    """
)


def test_kill_9_while_the_index_is_written_leaves_a_log_that_opens_the_same(
    tmp_path: Path,
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    for i in range(400):
        s.append_message("user", f"message {i} " * 30)
    s.close()
    reference = full_parse(store, "s", tmp_path)
    rng = random.Random(19)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    states = set()
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLER, str(tmp_path)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        fresh = tl.open_store(tmp_path, durability="flush")  # cleans a dead writer's temp file
        assert not list(tmp_path.glob(".*.tmp"))
        snap, state = open_state(fresh, "s")
        states.add(state)
        assert snap == reference
    assert "used" in states or "built" in states


# -- every open through an index equals a full parse, over random sessions ------------------


def _text(most: int, least: int = 0) -> st.SearchStrategy[str]:
    return st.text(
        st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
        min_size=least,
        max_size=most,
    )


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.sampled_from(["user", "assistant"]), _text(30)),
        st.tuples(st.just("branch"), st.integers(0, 1000)),
        st.tuples(st.just("label"), st.integers(0, 1000), _text(8)),
        st.tuples(st.just("summary"), st.integers(0, 1000), _text(20)),
        st.tuples(st.just("model"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("name"), _text(10, 1)),
        st.tuples(st.just("purge"), st.integers(0, 1000)),
    ),
    min_size=1,
    max_size=25,
)
_damage_ops = st.lists(
    st.sampled_from(["corrupt", "blank", "duplicate", "orphan", "leaf-unknown"]), max_size=4
)


def _write_session(directory: Path, ops: list[Any]) -> tl.Store:
    store = tl.open_store(directory, durability="flush")
    s = store.create(session_id="s")
    ids: list[str] = []
    for op in ops:
        kind = op[0]
        if kind == "message":
            ids.append(s.append_message(op[1], op[2] or "x"))
        elif kind == "branch" and ids:
            s.branch(ids[op[1] % len(ids)])
        elif kind == "label" and ids:
            s.set_label(ids[op[1] % len(ids)], op[2] or None)
        elif kind == "summary" and ids:
            ids.append(s.branch_with_summary(ids[op[1] % len(ids)], op[2]))
        elif kind == "model":
            s.append_model_change("p", op[1])
        elif kind == "name":
            s.append_session_info(op[1])
        elif kind == "purge" and ids:
            s.purge([ids[op[1] % len(ids)]], dry_run=False)
    s.close()
    return store


def _damage_log(path: Path, damage: list[str]) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    for kind in damage:
        if kind == "corrupt":
            lines.append(b'{"type":"message","id":\n')
        elif kind == "blank":
            lines.append(b"\n")
        elif kind == "duplicate" and len(lines) > 1:
            lines.append(lines[1])
        elif kind == "orphan":
            lines.append(
                b'{"type":"message","id":"orph","parent_id":"nowhere",'
                b'"timestamp":"2024-01-01T00:00:00Z","message":{"role":"user",'
                b'"content":[{"type":"text","text":"o"}]}}\n'
            )
        elif kind == "leaf-unknown":
            lines.append(
                b'{"type":"leaf","timestamp":"2024-01-01T00:00:00Z",'
                b'"leaf":{"target_id":"missing"}}\n'
            )
    path.write_bytes(b"".join(lines))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(before=_ops, damage=_damage_ops, after=_ops, split=st.booleans())
def test_open_through_the_index_equals_a_full_parse(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[Any],
    damage: list[str],
    after: list[Any],
    split: bool,
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    store = _write_session(directory, before)
    path = directory / "s.jsonl"
    if split:  # index part of the log, then damage and grow it: the index is extended
        open_state(store, "s")
        _damage_log(path, damage)
        s = store.open("s")
        for op in after:
            if op[0] == "message":
                s.append_message(op[1], op[2] or "y")
        s.close()
    else:
        _damage_log(path, damage)
    reference = full_parse(store, "s", directory)
    first, _ = open_state(store, "s")  # built, extended or rebuilt, depending on the case
    assert first == reference
    second, state = open_state(store, "s")
    assert state == "used"
    assert second == reference


def test_an_index_planted_as_a_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    sample(store).close()
    reference = full_parse(store, "s", tmp_path)
    open_state(store, "s")
    real = tmp_path / "elsewhere.bin"
    real.write_bytes((tmp_path / "s.jsonl.idx").read_bytes())
    (tmp_path / "s.jsonl.idx").unlink()
    (tmp_path / "s.jsonl.idx").symlink_to(real)
    before = real.read_bytes()
    snap, state = open_state(store, "s")
    assert (snap, state) == (reference, "rebuilt")
    assert real.read_bytes() == before  # the link was replaced, its target left alone
    assert not (tmp_path / "s.jsonl.idx").is_symlink()
