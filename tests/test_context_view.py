"""``ViewIds``, the ids of a context's view held as the path's runs (issue 19): every way the
view is read (by position, slice, iteration, search, as a list) gives exactly what the same ids
in one flat list give, and a context opened through the index holds runs, not a list of ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import threadline as tl
from threadline.context import ViewIds
from threadline.store import jsonl as jsonl_module

# a piece: (ids, lo, hi) over a tuple of fresh ids; empty pieces are allowed (and dropped)
_piece = st.integers(0, 12).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n))
)


def _build(spec: list[tuple[int, int, int]], tail_len: int) -> tuple[ViewIds, list[str]]:
    pieces: list[tuple[tuple[str, ...], int, int]] = []
    flat: list[str] = []
    for k, (n, a, b) in enumerate(spec):
        seq = tuple(f"p{k}-{i}" for i in range(n))
        lo, hi = min(a, b), max(a, b)
        pieces.append((seq, lo, hi))
        flat += seq[lo:hi]
    tail = [f"t{i}" for i in range(tail_len)]
    return ViewIds(pieces, list(tail)), [*flat, *tail]


@given(
    spec=st.lists(_piece, max_size=6),
    tail_len=st.integers(0, 5),
    start=st.none() | st.integers(-30, 30),
    stop=st.none() | st.integers(-30, 30),
    step=st.none() | st.sampled_from([1, 2, 3, -1, -2]),
)
def test_view_ids_read_like_the_flat_list(
    spec: list[tuple[int, int, int]],
    tail_len: int,
    start: int | None,
    stop: int | None,
    step: int | None,
) -> None:
    ids, flat = _build(spec, tail_len)
    n = len(flat)
    assert len(ids) == n
    assert list(ids) == flat
    assert ids.tolist() == flat
    assert [ids[i] for i in range(-n, n)] == flat + flat
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            ids[bad]
    assert ids[start:stop:step] == flat[start:stop:step]
    for k in range(n + 1):
        assert ids.tolist(k) == flat[:k]
        assert ids.between(k, n) == flat[k:]
    for x in [*flat, "absent"]:
        assert (x in ids) == (x in flat)
        lo, hi = start or 0, stop
        if x in flat[lo:hi]:
            assert ids.index(x, lo, hi) == flat.index(x, lo, n if hi is None else hi)
        else:
            with pytest.raises(ValueError):
                ids.index(x, lo, hi)


def test_appends_extend_the_tail_and_a_view_read_before_keeps_its_length() -> None:
    ids, flat = _build([(5, 1, 4), (3, 0, 3)], 0)
    ids.append("new")
    assert ids.tail == ["new"]
    assert ids.tolist() == [*flat, "new"]
    assert ids.tolist(len(flat)) == flat


def test_a_context_opened_through_the_index_holds_runs_not_a_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_module, "INDEX_MIN_BYTES", 0)
    store = tl.open_store(tmp_path, durability="flush")
    s = store.create(session_id="s")
    ids = [s.append_message("user" if i % 2 else "assistant", f"m{i}") for i in range(40)]
    s.branch(ids[19])  # a side branch off the middle, then back to the main line's end
    side = s.append_message("user", "on the side")
    s.branch(ids[-1])
    s.append_compaction("the first ten", ids[10], 1000)
    after = s.append_message("user", "after the compaction")
    s.close()
    eager: dict[str, Any] = {}
    with monkeypatch.context() as m:  # the reference: a full parse, no index
        m.setattr(jsonl_module, "INDEX_MIN_BYTES", 1 << 62)
        (tmp_path / "s.jsonl.idx").unlink()
        plain = store.open("s", read_only=True)
        ctx = plain.context()
        eager = {
            "ids": ctx.view.ids(),
            "items": [msgspec.json.encode(v) for v in ctx.view],
            "messages": [msgspec.json.encode(m) for m in ctx.messages],
        }
        plain.close()
    store.open("s", read_only=True).close()  # writes the index
    again = store.open("s")
    assert again.state.log.index_state == "used"  # type: ignore[attr-defined]
    ctx = again.context()
    held: Any = ctx.view._ids  # type: ignore[attr-defined]
    cols = again.state.tree._cols
    assert cols is not None
    compaction = eager["ids"][0]
    # the compaction's summary, then the path from the first kept entry on: two runs of the
    # columns' ids by reference, and nothing copied into a list
    assert held.pieces == [([compaction], 0, 1), (cols.ids, 10, 40), (cols.ids, 41, 42)]
    assert held.tail == []
    assert ctx.view.ids() == eager["ids"] == [compaction, *ids[10:], after]
    assert [msgspec.json.encode(v) for v in ctx.view] == eager["items"]
    assert [msgspec.json.encode(m) for m in ctx.messages] == eager["messages"]
    assert [v.id for v in ctx.view[3:9:2]] == eager["ids"][3:9:2]
    assert msgspec.json.encode(ctx.messages[-1]) == eager["messages"][-1]
    new = again.append_message("assistant", "appended")
    assert held.tail == [new]  # the cached view grew in place; the context read before did not
    assert len(ctx.view) == len(eager["ids"])
    assert again.context().view.ids() == [*eager["ids"], new]
    assert side not in again.context().view.ids()
    again.close()
