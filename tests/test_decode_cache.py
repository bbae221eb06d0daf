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
