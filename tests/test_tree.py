"""The pure tree index (DESIGN §4): parents, children order, orphans, cycles, deep paths.

No I/O here; the same behaviours seen through a Session and a file are in test_conformance.py and
test_persistence.py.
"""

from __future__ import annotations

import sys

from threadline.model.tree import TreeIndex

T0 = "2024-01-01T00:00:00.000Z"
T1 = "2024-01-01T00:00:01.000Z"
T2 = "2024-01-01T00:00:02.000Z"


def build(*rows: tuple[str, str | None, str]) -> TreeIndex:
    t = TreeIndex()
    for eid, parent, ts in rows:
        t.add(eid, parent, ts)
    t.settle()
    return t


def test_a_chain_gives_the_path_from_root_to_leaf() -> None:
    t = build(("a", None, T0), ("b", "a", T0), ("c", "b", T0))
    assert t.path("c") == ["a", "b", "c"]
    assert t.path("a") == ["a"]
    assert t.path(None) == []
    assert t.roots() == ["a"]
    assert t.depth("c") == 2


def test_children_are_ordered_by_timestamp_then_file_order() -> None:
    t = build(("r", None, T0), ("late", "r", T2), ("x", "r", T1), ("y", "r", T1))
    assert t.children("r") == ["x", "y", "late"]


def test_children_order_is_the_same_when_built_incrementally() -> None:
    t = TreeIndex()
    t.add("r", None, T0)
    assert t.children("r") == []  # builds the children index, later adds update it in place
    t.add("late", "r", T2)
    t.add("x", "r", T1)
    t.add("y", "r", T1)
    assert t.children("r") == ["x", "y", "late"]


def test_an_entry_with_an_unknown_parent_becomes_a_root_and_is_reported() -> None:
    t = build(("a", None, T0), ("o", "missing", T1), ("p", "o", T1))
    assert t.orphans == ["o"]
    assert t.roots() == ["a", "o"]
    assert t.path("p") == ["o", "p"]
    assert t.cycles == []


def test_a_parent_that_appears_later_in_the_file_is_not_an_orphan() -> None:
    t = build(("child", "par", T1), ("par", None, T0))
    assert t.orphans == []
    assert t.path("child") == ["par", "child"]


def test_a_self_parent_is_broken_and_reported() -> None:
    t = build(("a", "a", T0), ("b", "a", T0))
    assert t.cycles == ["a"]
    assert t.path("b") == ["a", "b"]
    assert t.roots() == ["a"]


def test_a_two_cycle_is_cut_where_the_parent_reference_points_latest_in_the_file() -> None:
    # a -> b (b is later in the file), b -> a: the member whose parent stands latest is a
    t = build(("a", "b", T0), ("b", "a", T0), ("c", "b", T0))
    assert t.cycles == ["a"]
    assert t.parent == {"a": None, "b": "a", "c": "b"}
    assert t.path("c") == ["a", "b", "c"]


def test_a_three_cycle_with_a_tail_is_broken_once() -> None:
    t = build(("tail", "x", T0), ("x", "z", T0), ("y", "x", T0), ("z", "y", T0))
    # cycle x -> z -> y -> x; parents' file positions: x->z (3), y->x (1), z->y (2): cut x
    assert t.cycles == ["x"]
    assert t.orphans == []
    assert t.path("tail") == ["x", "tail"]
    assert t.path("z") == ["x", "y", "z"]
    assert sorted(t.preorder()) == [("tail", 1), ("x", 0), ("y", 1), ("z", 2)]


def test_every_entry_is_reachable_from_a_root_after_settling_any_parent_map() -> None:
    ids = [f"n{i}" for i in range(30)]
    # every node points at another node (many cycles and chains), none is a root before settle
    t = build(*((eid, ids[(i * 7 + 3) % 30], T0) for i, eid in enumerate(ids)))
    seen = [eid for eid, _ in t.preorder()]
    assert sorted(seen) == sorted(ids)
    for eid in ids:
        assert t.path(eid)[-1] == eid


def test_a_path_100000_deep_works_without_recursion() -> None:
    n = 100_000
    t = TreeIndex()
    t.add("e0", None, T0)
    for i in range(1, n):
        t.add(f"e{i}", f"e{i - 1}", T0)
    t.add("side", "e50000", T1)
    t.settle()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # any recursive walk would fail here
    try:
        path = t.path(f"e{n - 1}")
        order = list(t.preorder())
        depth = t.depth(f"e{n - 1}")
    finally:
        sys.setrecursionlimit(limit)
    assert path == [f"e{i}" for i in range(n)]
    assert depth == n - 1
    assert len(order) == n + 1
    assert order[50_001] == ("e50001", 50_001)
    assert order[-1] == ("side", 50_001)
    assert t.children("e50000") == ["e50001", "side"]


def test_siblings_are_ordered_by_time_whatever_the_timestamp_precision_or_offset() -> None:
    rows = [
        ("r", None, T0),
        ("noon", "r", "2024-01-01T12:00:00Z"),
        ("noon-and-a-half-second", "r", "2024-01-01T12:00:00.500Z"),
        ("one-pm-written-in-utc-2", "r", "2024-01-01T11:00:00-02:00"),
        ("no-timestamp", "r", ""),
        ("eleven", "r", "2024-01-01T11:00:00.000Z"),
    ]
    expected = [
        "eleven",
        "noon",
        "noon-and-a-half-second",
        "one-pm-written-in-utc-2",
        "no-timestamp",
    ]
    assert build(*rows).children("r") == expected
    incremental = TreeIndex()
    incremental.add("r", None, T0)
    incremental.children("r")
    for eid, parent, ts in rows[1:]:
        incremental.add(eid, parent, ts)
    assert incremental.children("r") == expected
