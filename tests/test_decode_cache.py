"""A walk over the whole session (``tree()``, ``entries()``) does not keep every message decoded;
reading the context does (an agent reads it every turn). Issue 19."""

from __future__ import annotations

from pathlib import Path

import pytest

import threadline as tl
import threadline.state as state_module
from threadline.store.base import LazyMessage


def test_tree_goes_through_a_bounded_cache_and_the_context_keeps_what_it_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_module, "DECODED_CACHE", 10)
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    ids = [s.append_message("user", f"m{i}") for i in range(50)]
    s.close()
    again = store.open(s.id)
    (root,) = again.tree()
    node, texts = root, []
    while True:
        texts.append(node.entry.message.text)
        if not node.children:
            break
        (node,) = node.children
    assert texts == [f"m{i}" for i in range(50)]
    slots = again.state.slots
    assert list(again.state.decoded) == ids[-10:]  # the last ten, the rest dropped
    assert all(isinstance(slots[e], LazyMessage) for e in ids)
    assert [m.text for m in again.context().messages] == texts
    assert not any(isinstance(slots[e], LazyMessage) for e in ids)  # kept for the next turn


def test_tree_decodes_no_message_until_its_entry_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    ids = [s.append_message("user", f"m{i}") for i in range(20)]
    s.set_label(ids[3], "here")
    s.close()
    decoded: list[str] = []
    real = LazyMessage.decode

    def counting(self: LazyMessage) -> tl.model.entries.AnyRecord:
        decoded.append(self.id)
        return real(self)

    monkeypatch.setattr(LazyMessage, "decode", counting)
    again = store.open(s.id)
    (root,) = again.tree()
    assert decoded == []  # linked from ids and parents only
    chain = [root]
    while chain[-1].children:
        chain.append(chain[-1].children[0])
    assert [n.label for n in chain[:5]] == [None, None, None, "here", None]
    assert decoded == []
    assert chain[5].entry.message.text == "m5"
    assert decoded == [ids[5]]
    assert chain[5].entry is chain[5].entry  # decoded once
    assert decoded == [ids[5]]
    again.close()
    assert chain[6].entry.message.text == "m6"  # still readable after the session closed
    assert again.tree() == store.open(s.id).tree()  # equality compares entries, labels, children


def test_a_context_materializes_a_chunk_in_a_few_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.store.jsonl import FileSource

    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    for i in range(3000):
        s.append_message("user" if i % 2 == 0 else "assistant", f"message {i}")
    s.close()
    reads: list[int] = []
    real = FileSource.__getitem__

    def counting(self: FileSource, span: slice) -> bytes:
        reads.append(span.stop - span.start)
        return real(self, span)

    monkeypatch.setattr(FileSource, "__getitem__", counting)
    again = store.open(s.id)
    texts = [m.text for m in again.context().messages]
    assert texts == [f"message {i}" for i in range(3000)]
    assert len(reads) == 2  # one read per 2,048-message chunk, not one per message


def test_a_line_that_does_not_decode_in_a_run_is_reported_alone(tmp_path: Path) -> None:
    from threadline.store.base import decode_run

    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    ids = [s.append_message("user", f"m{i}") for i in range(4)]
    s.close()
    again = store.open(s.id)
    lazies = [again.state.slots[e] for e in ids]
    assert all(isinstance(x, LazyMessage) for x in lazies)
    broken = LazyMessage(ids[2], ids[1], "t", b'{"type":"message","id":', 0, 23)
    out = decode_run([lazies[0], lazies[1], broken, lazies[3]])
    assert [None if r is None else r.message.text for r in out] == ["m0", "m1", None, "m3"]


def test_loaded_and_decoded_records_are_not_tracked_by_the_cyclic_gc(tmp_path: Path) -> None:
    import gc

    store = tl.open_store(tmp_path, durability="flush")
    s = store.create()
    eid = s.append_message("user", [tl.text("hi"), tl.tool_use("c1", "ls", {"path": "/"})])
    s.close()
    again = store.open(s.id)
    slot = again.state.slots[eid]
    assert isinstance(slot, LazyMessage) and not gc.is_tracked(slot)
    rec = again.entry(eid)
    assert not gc.is_tracked(rec) and not gc.is_tracked(rec.message)
    assert not gc.is_tracked(rec.message.content[0])
