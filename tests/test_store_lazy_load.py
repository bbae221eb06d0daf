"""A database store loads the path, not the session (issue 19): opening a session reads every
record's envelope but leaves readable messages' JSON on the server until they are used; a
context reads its messages in a few queries, and a session rewritten since the load says so
instead of answering with another record's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import make_store
from threadline.errors import StoreError
from threadline.store import postgres as store_postgres
from threadline.store import sqlite as store_sqlite
from threadline.store.base import LAZY_FROM, LazyMessage, RowSource

LAZY_BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(autouse=True)
def lazy_from_the_first_record(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions below ``LAZY_FROM`` records load whole; these tests' small ones load lazily."""
    if "whole" not in request.node.name:
        for module in (store_sqlite, store_postgres):
            monkeypatch.setattr(module, "LAZY_FROM", 0)


def lazy_sources(session: tl.Session) -> set[int]:
    return {id(slot._buf) for slot in session.state.slots.values() if isinstance(slot, LazyMessage)}


def count_fetches(source: RowSource, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (first, last) sequence numbers of every query ``source`` makes from now on."""
    calls: list[tuple[int, int]] = []
    fetch = source.fetch

    def counting(first: int, last: int) -> Any:
        calls.append((first, last))
        return fetch(first, last)

    monkeypatch.setattr(source, "fetch", counting)
    return calls


def fill(store: tl.Store, n: int) -> tuple[str, list[str]]:
    s = store.create()
    ids = [
        s.append_message("user" if i % 2 else "assistant", f"message {i} " * 20) for i in range(n)
    ]
    s.set_label(ids[5], "five")
    s.append_model_change("anthropic", "claude")
    ids.append(s.append_message("user", "after the model change"))
    s.close()
    return s.id, ids


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_open_reads_no_message_and_the_context_reads_them_in_a_few_queries(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 300)
    expected = [m.text for m in store.open(sid).context().messages]
    again = store.open(sid)
    slots = again.state.slots
    lazies = [slots[e] for e in ids]
    assert all(isinstance(x, LazyMessage) for x in lazies)
    (source,) = {x._buf for x in lazies}  # type: ignore[union-attr]
    assert isinstance(source, RowSource)
    calls = count_fetches(source, monkeypatch)
    assert [m.text for m in again.context().messages] == expected
    assert len(expected) == 301 and expected[-1] == "after the model change"
    # 301 messages, one query: their rows lie within one span of the virtual file
    assert len(calls) == 1
    # the label and the model change were read at open (only messages are lazy)
    assert again.labels()[ids[5]] == "five"
    store.close()


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_each_lazy_message_reads_exactly_its_own_record(kind: str, tmp_path: Path) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 40)
    full = store.open(sid)
    raws = {e: full.state.slots[e].raw() for e in ids}  # type: ignore[union-attr]
    full.close()
    again = store.open(sid)
    for e in reversed(ids):  # one by one, out of order: each slice maps to its own row
        slot = again.state.slots[e]
        assert isinstance(slot, LazyMessage)
        assert slot.raw() == raws[e]
        assert slot.size == len(raws[e])
    store.close()


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_a_session_rewritten_since_the_load_is_refused_not_misread(
    kind: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 30)
    reader = store.open(sid, read_only=True)
    writer = store.open(sid)
    writer.purge([ids[0]], dry_run=False)  # rewrites every row of the session
    writer.close()
    slot = reader.state.slots[ids[10]]
    assert isinstance(slot, LazyMessage)
    with pytest.raises(StoreError, match="open it again"):
        slot.decode()
    fresh = store.open(sid)
    assert fresh.entry(ids[10]).message.text == "message 10 " * 20  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_a_purged_message_is_known_at_open_without_its_purge_record(
    kind: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 10)
    s = store.open(sid)
    s.purge([ids[3]], dry_run=False)
    s.close()
    again = store.open(sid)
    assert ids[3] in again.state.purged
    assert not isinstance(again.state.slots[ids[3]], LazyMessage)
    assert isinstance(again.state.slots[ids[4]], LazyMessage)
    store.close()


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_a_session_below_lazy_from_loads_whole_in_one_query(kind: str, tmp_path: Path) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 30)
    assert LAZY_FROM > 30
    again = store.open(sid)
    buffers = {type(again.state.slots[e]._buf) for e in ids}  # type: ignore[union-attr]
    assert buffers == {bytes}  # every message's JSON came with the load
    assert again.entry(ids[7]).message.text == "message 7 " * 20  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("kind", LAZY_BACKENDS)
def test_entries_read_one_by_one_near_each_other_cost_one_query(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(kind, tmp_path)
    sid, ids = fill(store, 100)
    again = store.open(sid)
    source = again.state.slots[ids[50]]._buf  # type: ignore[union-attr]
    assert isinstance(source, RowSource)
    calls = count_fetches(source, monkeypatch)
    # walked back from the leaf one entry at a time, as a branch read does
    texts = [again.entry(e).message.text for e in reversed(ids[40:60])]  # type: ignore[union-attr]
    assert texts == [f"message {i} " * 20 for i in reversed(range(40, 60))]
    assert len(calls) == 1  # ~12 KB of rows: one window around the first read holds them all
    store.close()
