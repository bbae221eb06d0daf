"""The Store/Session contract (DESIGN §4, §5, §10), run once per backend.

Every test here takes the ``store`` fixture from conftest.py and uses only the public Store and
Session API, so a new backend joins by adding itself to ``BACKENDS`` there; no test is copied.
Behaviours that need a hand-written file or another process live in test_persistence.py,
test_crash.py and test_concurrency.py.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

import msgspec
import pytest

import threadline as tl
from threadline.errors import NotFoundError, SessionLockedError, UserError
from threadline.model.content import Message, text, tool_result, tool_use
from threadline.model.entries import (
    BranchSummary,
    BranchSummaryEntry,
    Compaction,
    CompactionEntry,
    MessageEntry,
    ModelChange,
)

T = "2024-01-01T00:00:{:02d}.000Z"


def msg(eid: str, parent: str | None, body: str, ts: int = 0, role: str = "user") -> MessageEntry:
    return MessageEntry(
        id=eid,
        parent_id=parent,
        timestamp=T.format(ts),
        message=Message(role=role, content=[text(body)]),
    )


def seen(ctx: tl.Context) -> list[tuple[str, str]]:
    """What the model sees, as (role, text) pairs."""
    return [(m.role, m.text) for m in ctx.messages]


def view_ids(ctx: tl.Context) -> list[str]:
    return [v.id for v in ctx.view]


def conversation(s: tl.Session, *turns: str) -> list[str]:
    """Append alternating user/assistant messages; returns their ids."""
    return [s.append_message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(turns)]


# -- appends, parent chain, leaf ---------------------------------------------------------------


def test_a_new_session_is_empty_with_no_leaf(store: tl.Store) -> None:
    s = store.create()
    assert s.leaf_id is None
    assert s.entries() == []
    assert s.path() == []
    assert list(s.context().messages) == []
    assert s.context().thinking_level == "off"
    assert s.context().model is None
    assert s.tree() == []
    assert s.load_report.clean


def test_every_append_returns_the_new_id_and_moves_the_leaf_to_it(store: tl.Store) -> None:
    s = store.create()
    ids = [
        s.append_message("user", "hi"),
        s.append_model_change("openai", "gpt-4o"),
        s.append_thinking_level("high"),
        s.append_session_info("my session"),
        s.append_custom("note", {"k": [1, 2]}),
    ]
    ids.append(s.set_label(ids[0], "start"))
    ids.append(s.append_compaction("sum", ids[0], 123))
    ids.append(s.branch_with_summary(ids[-1], "nothing abandoned"))
    assert all(isinstance(i, str) for i in ids)
    assert len(set(ids)) == len(ids)
    assert s.leaf_id == ids[-1]
    assert [e.id for e in s.entries()] == ids
    assert [e.type for e in s.entries()] == [
        "message",
        "model_change",
        "thinking_level",
        "session_info",
        "custom",
        "label",
        "compaction",
        "branch_summary",
    ]
    # each entry is the child of the leaf before it
    assert [e.parent_id for e in s.entries()] == [None, *ids[:-1]]
    assert s.path_ids() == ids
    assert s.name == "my session"


def test_appended_payloads_read_back_exactly(store: tl.Store) -> None:
    s = store.create()
    mid = s.append_message(
        "assistant",
        [text("a"), tool_use("t1", "ls", {"dir": "/"})],
        model="m1",
        usage={"input": 3, "output": 4},
        stop_reason="tool_use",
        provider_details={"x": 1},
    )
    cid = s.append_custom("note", {"k": [1, 2.5, None, "s"]})
    comp = s.append_compaction("the summary", mid, 4242)
    assert msgspec.to_builtins(s.entry(mid).payload) == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": {"content": "a"}},
            {"type": "tool_use", "tool_use": {"id": "t1", "name": "ls", "input": {"dir": "/"}}},
        ],
        "model": "m1",
        "usage": {"input": 3, "output": 4},
        "stop_reason": "tool_use",
        "provider_details": {"x": 1},
    }
    assert msgspec.to_builtins(s.entry(cid).payload) == {
        "custom_type": "note",
        "data": {"k": [1, 2.5, None, "s"]},
    }
    assert msgspec.to_builtins(s.entry(comp).payload) == {
        "summary": "the summary",
        "first_kept_entry_id": mid,
        "tokens_before": 4242,
    }


def test_content_as_string_blocks_or_file_shaped_dicts_gives_the_same_message(
    store: tl.Store,
) -> None:
    s = store.create()
    a = s.append_message("user", "hello")
    b = s.append_message("user", [text("hello")])
    c = s.append_message("user", [{"type": "text", "text": {"content": "hello"}}])
    d = s.append_message(Message(role="user", content=[text("hello")]))
    payloads = [msgspec.to_builtins(s.entry(x).payload) for x in (a, b, c, d)]
    assert (
        payloads
        == [{"role": "user", "content": [{"type": "text", "text": {"content": "hello"}}]}] * 4
    )


def test_an_unknown_role_is_refused_and_nothing_is_written(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "hi")
    with pytest.raises(UserError, match="Unknown role 'robot'"):
        s.append_message("robot", "beep")
    assert len(s.entries()) == 1


def test_entry_children_and_path_return_the_exact_records(store: tl.Store) -> None:
    s = store.create()
    u, a = conversation(s, "q", "a")
    s.branch(u)
    a2 = s.append_message("assistant", "a2")
    assert s.entry(a).message.text == "a"
    assert [e.id for e in s.children(u)] == [a, a2]
    assert [e.id for e in s.children(None)] == [u]
    assert s.children(a) == []
    assert [e.id for e in s.path()] == [u, a2]
    assert [e.id for e in s.path(a)] == [u, a]
    with pytest.raises(NotFoundError, match="Entry 'nope' not found"):
        s.entry("nope")
    with pytest.raises(NotFoundError):
        s.children("nope")
    with pytest.raises(NotFoundError):
        s.path("nope")


# -- navigation and branches --------------------------------------------------------------------


def test_branch_moves_the_leaf_and_the_next_append_starts_a_sibling(store: tl.Store) -> None:
    s = store.create()
    u1, a1, u2, a2 = conversation(s, "u1", "a1", "u2", "a2")
    s.branch(a1)
    assert s.leaf_id == a1
    assert seen(s.context()) == [("user", "u1"), ("assistant", "a1")]
    u2b = s.append_message("user", "u2b")
    assert s.entry(u2b).parent_id == a1
    assert [c.id for c in s.children(a1)] == [u2, u2b]
    assert seen(s.context()) == [("user", "u1"), ("assistant", "a1"), ("user", "u2b")]
    # the abandoned branch is still there and can be checked out again
    s.branch(a2)
    assert s.path_ids() == [u1, a1, u2, a2]


def test_reset_leaf_makes_the_next_append_a_new_root(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "first")
    s.reset_leaf()
    assert s.leaf_id is None
    assert list(s.context().messages) == []
    r2 = s.append_message("user", "again")
    assert s.entry(r2).parent_id is None
    assert [e.id for e in s.children(None)] == [u1, r2]
    assert [n.entry.id for n in s.tree()] == [u1, r2]


def test_branch_to_an_unknown_entry_is_refused_and_the_leaf_stays(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "x")
    with pytest.raises(NotFoundError, match="Entry 'missing' not found in session"):
        s.branch("missing")
    assert s.leaf_id == u1


def test_sibling_branches_show_in_the_tree_with_their_labels(store: tl.Store) -> None:
    s = store.create()
    u1, a1 = conversation(s, "u1", "a1")
    s.branch(u1)
    a1b = s.append_message("assistant", "a1b")
    lab = s.set_label(a1, "first try")
    roots = s.tree()
    assert len(roots) == 1
    root = roots[0]
    assert root.entry.id == u1
    assert [c.entry.id for c in root.children] == [a1, a1b]
    assert root.children[0].label == "first try"
    assert root.children[1].label is None
    assert [c.entry.id for c in root.children[1].children] == [lab]
    flat = s.tree(flat=True)
    assert [(n.entry.id, n.parent_id, n.children, n.depth, n.label) for n in flat] == [
        (u1, None, [a1, a1b], 0, None),
        (a1, u1, [], 1, "first try"),
        (a1b, u1, [lab], 1, None),
        (lab, a1b, [], 2, None),
    ]


def test_a_path_100000_entries_deep_works_and_branches_anywhere(store: tl.Store) -> None:
    n = 100_000
    records = [msg("e0", None, "m0")]
    records += [
        msg(f"e{i}", f"e{i - 1}", f"m{i}", role="user" if i % 2 == 0 else "assistant")
        for i in range(1, n)
    ]
    s = store.create(records=records)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # a recursive walk of the tree would fail here
    try:
        assert s.leaf_id == f"e{n - 1}"
        assert len(s.path_ids()) == n
        ctx = s.context()
        roots = s.tree()
        flat = s.tree(flat=True)
        s.branch("e50000")
        side = s.append_message("assistant", "side")
        side_ctx = s.context()
        deep_ctx = s.context(leaf_id=f"e{n - 1}")
    finally:
        sys.setrecursionlimit(limit)
    assert len(ctx.messages) == n
    assert ctx.messages[-1].text == f"m{n - 1}"
    node, depth = roots[0], 0
    while node.children:
        node, depth = node.children[0], depth + 1
    assert (node.entry.id, depth) == (f"e{n - 1}", n - 1)
    assert [(f.entry.id, f.depth) for f in flat[:2]] == [("e0", 0), ("e1", 1)]
    assert (flat[-1].entry.id, flat[-1].depth) == (f"e{n - 1}", n - 1)
    assert len(side_ctx.messages) == 50_002
    assert side_ctx.messages[-2].text == "m50000"
    assert side_ctx.messages[-1].text == "side"
    assert [c.id for c in s.children("e50000")] == ["e50001", side]
    assert len(deep_ctx.messages) == n


def test_children_are_ordered_by_timestamp_then_file_order(store: tl.Store) -> None:
    s = store.create(
        records=[
            msg("root", None, "r", ts=0),
            msg("c-late", "root", "late", ts=9),
            msg("c-early-1", "root", "e1", ts=3),
            msg("c-early-2", "root", "e2", ts=3),
            msg("c-mid", "root", "mid", ts=5),
        ]
    )
    assert [c.id for c in s.children("root")] == ["c-early-1", "c-early-2", "c-mid", "c-late"]
    assert [c.entry.id for c in s.tree()[0].children] == [
        "c-early-1",
        "c-early-2",
        "c-mid",
        "c-late",
    ]
    # the leaf is the last entry in the file, not the newest timestamp
    assert s.leaf_id == "c-mid"


def test_entries_with_an_unknown_parent_become_roots_and_are_reported(store: tl.Store) -> None:
    s = store.create(
        records=[
            msg("a", None, "a"),
            msg("o", "gone", "orphan", ts=1),
            msg("p", "o", "child of orphan", ts=2),
        ]
    )
    assert s.load_report.orphans == ["o"]
    assert [n.entry.id for n in s.tree()] == ["a", "o"]
    assert s.path_ids() == ["o", "p"]
    assert seen(s.context()) == [("user", "orphan"), ("user", "child of orphan")]


def test_parent_cycles_are_broken_and_reported_never_looped(store: tl.Store) -> None:
    s = store.create(
        records=[
            msg("a", "b", "a", ts=0),
            msg("b", "a", "b", ts=1),
            msg("c", "b", "c", ts=2),
            msg("self", "self", "s", ts=3),
        ]
    )
    assert s.load_report.cycles == ["a", "self"]
    assert s.path_ids() == ["self"]
    assert s.path_ids("c") == ["a", "b", "c"]
    assert [(f.entry.id, f.depth) for f in s.tree(flat=True)] == [
        ("a", 0),
        ("b", 1),
        ("c", 2),
        ("self", 0),
    ]


# -- labels ----------------------------------------------------------------------------------


def test_a_label_is_set_read_and_overwritten_by_the_latest(store: tl.Store) -> None:
    s = store.create()
    u1, a1 = conversation(s, "u1", "a1")
    first = s.set_label(u1, "start")
    assert s.get_label(u1) == "start"
    assert s.entry(first).label.target_id == u1
    assert s.leaf_id == first  # a label is a tree entry under the leaf
    s.set_label(u1, "beginning")
    assert s.get_label(u1) == "beginning"
    assert s.labels() == {u1: "beginning"}
    assert s.get_label(a1) is None


@pytest.mark.parametrize("cleared", ["", None])
def test_an_empty_or_none_label_clears_it(store: tl.Store, cleared: str | None) -> None:
    s = store.create()
    (u1,) = conversation(s, "u1")
    s.set_label(u1, "x")
    s.set_label(u1, cleared)
    assert s.get_label(u1) is None
    assert s.labels() == {}
    assert s.tree()[0].label is None


def test_a_label_on_an_unknown_target_is_refused_and_nothing_is_written(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "u1")
    with pytest.raises(NotFoundError, match="Entry 'ghost' not found"):
        s.set_label("ghost", "x")
    assert [e.id for e in s.entries()] == [u1]
    assert s.labels() == {}


def test_labels_are_session_global_across_branches(store: tl.Store) -> None:
    s = store.create()
    u1, a1 = conversation(s, "u1", "a1")
    s.branch(u1)
    s.append_message("assistant", "other")
    s.set_label(a1, "labelled from another branch")
    s.branch(a1)
    assert s.get_label(a1) == "labelled from another branch"
    assert s.labels() == {a1: "labelled from another branch"}


# -- branch_with_summary, create_branched_session, fork -----------------------------------------


def test_branch_with_summary_appends_the_summary_under_the_target(store: tl.Store) -> None:
    s = store.create()
    u1, a1, _u2, a2 = conversation(s, "u1", "a1", "u2", "a2")
    bs = s.branch_with_summary(a1, "tried u2, it failed")
    rec = s.entry(bs)
    assert isinstance(rec, BranchSummaryEntry)
    assert rec.parent_id == a1
    assert rec.branch_summary == BranchSummary(summary="tried u2, it failed", from_id=a2)
    assert s.leaf_id == bs
    ctx = s.context()
    assert seen(ctx) == [
        ("user", "u1"),
        ("assistant", "a1"),
        ("branchSummary", "tried u2, it failed"),
    ]
    assert view_ids(ctx) == [u1, a1, bs]
    assert ctx.view[2].kind == "branch_summary"


def test_an_empty_branch_summary_adds_no_message(store: tl.Store) -> None:
    s = store.create()
    u1, a1, _u2 = conversation(s, "u1", "a1", "u2")
    bs = s.branch_with_summary(u1, "")
    assert s.entry(bs).parent_id == u1
    assert seen(s.context()) == [("user", "u1")]
    del a1


def test_branch_with_summary_to_an_unknown_entry_is_refused(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "u1")
    with pytest.raises(NotFoundError):
        s.branch_with_summary("nope", "x")
    assert s.leaf_id == u1
    assert len(s.entries()) == 1


def test_create_branched_session_keeps_the_path_and_only_labels_on_it(store: tl.Store) -> None:
    s = store.create()
    u1, a1, u2, a2 = conversation(s, "u1", "a1", "u2", "a2")
    s.set_label(u1, "on path")
    s.branch(a1)
    u2b = s.append_message("user", "u2b")
    s.set_label(u2b, "off path")
    s.set_label(a1, "on path, set from the other branch")
    new = s.create_branched_session(a2)
    assert new.id != s.id
    assert new.header.parent_session == s.id
    assert store.exists(new.id)
    assert new.labels() == {u1: "on path", a1: "on path, set from the other branch"}
    assert [e.id for e in new.entries() if e.type != "label"] == [u1, a1, u2, a2]
    assert not new.has_entry(u2b)
    assert seen(new.context()) == seen(s.context(leaf_id=a2))
    # the copy is a new session on disk: reopen it
    new.close()
    again = store.open(new.id)
    assert again.labels() == {u1: "on path", a1: "on path, set from the other branch"}
    assert seen(again.context()) == [
        ("user", "u1"),
        ("assistant", "a1"),
        ("user", "u2"),
        ("assistant", "a2"),
    ]
    # the source is untouched
    assert s.get_label(u2b) == "off path"


def test_fork_copies_every_entry_and_the_leaf_into_a_new_session(store: tl.Store) -> None:
    s = store.create()
    u1, a1, _u2 = conversation(s, "u1", "a1", "u2")
    s.set_label(u1, "lab")
    s.branch(a1)
    s.close()
    f = store.fork(s.id)
    assert f.id != s.id
    assert f.header.parent_session == s.id
    src = store.open(s.id)
    assert [msgspec.to_builtins(e) for e in f.entries()] == [
        msgspec.to_builtins(e) for e in src.entries()
    ]
    assert f.leaf_id == a1
    assert f.labels() == {u1: "lab"}
    f.append_message("user", "only in the fork")
    assert len(store.open(s.id).entries()) == 4
    assert [r.parent_session for r in store.list() if r.id == f.id] == [s.id]
    with pytest.raises(NotFoundError, match="Session 'nosuch' not found"):
        store.fork("nosuch")


# -- store: list, continue_recent, exists, delete ------------------------------------------------


def test_list_reports_each_session_newest_first(store: tl.Store) -> None:
    a = store.create()
    a.append_message("system", "be brief")
    a.append_message("user", "first question")
    a.append_message("assistant", "answer")
    a.append_message("user", "second question")
    a.append_session_info("alpha")
    time.sleep(0.003)  # timestamps have millisecond resolution
    b = store.create()
    b_last = b.append_message("user", "hello b")
    assert store.list() == [
        tl.SessionSummary(
            id=b.id,
            name=None,
            created=b.header.timestamp,
            modified=b.entry(b_last).timestamp,
            message_count=1,
            first_message="hello b",
            path=store.location(b.id),
        ),
        tl.SessionSummary(
            id=a.id,
            name="alpha",
            created=a.header.timestamp,
            modified=a.entries()[-1].timestamp,
            message_count=4,
            first_message="first question",
            path=store.location(a.id),
        ),
    ]


def test_list_of_an_empty_store_is_empty(store: tl.Store) -> None:
    assert store.list() == []


def test_continue_recent_opens_the_most_recently_modified_session(store: tl.Store) -> None:
    a = store.create()
    a.append_message("user", "a")
    time.sleep(0.003)
    b = store.create()
    b.append_message("user", "b")
    b.close()
    r = store.continue_recent()
    assert r.id == b.id
    r.close()
    time.sleep(0.003)
    a.append_message("user", "a again")
    a.close()
    r = store.continue_recent()
    assert r.id == a.id
    assert seen(r.context()) == [("user", "a"), ("user", "a again")]


def test_continue_recent_on_an_empty_store_creates_a_session(store: tl.Store) -> None:
    s = store.continue_recent()
    assert store.exists(s.id)
    assert [r.id for r in store.list()] == [s.id]


def test_open_of_an_unknown_session_is_refused(store: tl.Store) -> None:
    with pytest.raises(
        NotFoundError, match=r"^Session 'nope' not found; list the sessions to see their ids$"
    ):
        store.open("nope")


def test_create_with_an_existing_id_is_refused(store: tl.Store) -> None:
    store.create(session_id="fixed").append_message("user", "keep me")
    with pytest.raises(UserError, match="Session 'fixed' already exists"):
        store.create(session_id="fixed")
    assert seen(store.open("fixed").context()) == [("user", "keep me")]


def test_delete_removes_the_session(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "x")
    s.close()
    store.delete(s.id)
    assert not store.exists(s.id)
    assert store.list() == []
    with pytest.raises(NotFoundError):
        store.delete(s.id)


def test_reopen_gives_the_same_entries_leaf_and_labels(store: tl.Store) -> None:
    s = store.create()
    u1, a1, _u2 = conversation(s, "u1", "a1", "u2")
    s.set_label(a1, "kept")
    s.branch(a1)
    before = [msgspec.to_builtins(e) for e in s.entries()]
    s.close()
    again = store.open(s.id)
    assert [msgspec.to_builtins(e) for e in again.entries()] == before
    assert again.leaf_id == a1
    assert again.labels() == {a1: "kept"}
    again.reset_leaf()
    again.close()
    assert store.open(s.id).leaf_id is None
    del u1


def test_a_read_only_session_refuses_writes(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "u1")
    s.close()
    ro = store.open(s.id, read_only=True)
    with pytest.raises(UserError, match="opened read-only"):
        ro.append_message("user", "no")
    with pytest.raises(UserError, match="opened read-only"):
        ro.branch(u1)
    assert len(store.open(s.id).entries()) == 1


# -- one writer at a time -----------------------------------------------------------------------


def test_a_second_session_object_cannot_write_while_the_first_holds_the_lock(
    store: tl.Store,
) -> None:
    s1 = store.create()
    u1 = s1.append_message("user", "from s1")
    s2 = store.open(s1.id)
    with pytest.raises(SessionLockedError) as info:
        s2.append_message("user", "from s2")
    assert info.value.pid == os.getpid()
    assert str(info.value) == (
        f"Session '{s1.id}' is locked by pid {os.getpid()}; close the "
        "other writer or open read-only"
    )
    a1 = s1.append_message("assistant", "s1 again")
    s1.close()
    # s2 loaded before a1 was written; taking the lock it catches up, so its parent is a1
    u2 = s2.append_message("user", "from s2")
    assert s2.entry(u2).parent_id == a1
    assert s2.path_ids() == [u1, a1, u2]
    s2.close()
    assert store.open(s1.id).path_ids() == [u1, a1, u2]


def test_closing_a_session_lets_another_take_the_lock(store: tl.Store) -> None:
    with store.create() as s1:
        s1.append_message("user", "x")
    with store.open(s1.id) as s2:
        s2.append_message("user", "y")
    assert seen(store.open(s1.id).context()) == [("user", "x"), ("user", "y")]


# -- context (DESIGN §5) -----------------------------------------------------------------------


def test_context_without_compaction_is_the_path_messages(store: tl.Store) -> None:
    s = store.create()
    u1 = s.append_message("user", "u1")
    s.append_session_info("name")
    s.append_custom("c", {})
    s.set_label(u1, "l")
    s.append_model_change("p", "m")
    a1 = s.append_message("assistant", "a1")
    ctx = s.context()
    assert seen(ctx) == [("user", "u1"), ("assistant", "a1")]
    assert view_ids(ctx) == [u1, a1]
    assert [(v.kind, v.entry_id) for v in ctx.view] == [("message", u1), ("message", a1)]
    assert ctx.leaf_id == a1


def test_one_compaction_shows_its_summary_then_the_kept_entries(store: tl.Store) -> None:
    s = store.create()
    _u1, _a1, u2, a2 = conversation(s, "u1", "a1", "u2", "a2")
    c = s.append_compaction("summary of u1 a1", u2, 1000)
    u3 = s.append_message("user", "u3")
    ctx = s.context()
    assert seen(ctx) == [
        ("compactionSummary", "summary of u1 a1"),
        ("user", "u2"),
        ("assistant", "a2"),
        ("user", "u3"),
    ]
    assert view_ids(ctx) == [c, u2, a2, u3]
    assert ctx.view[0].kind == "compaction"
    assert ctx.messages[0].content == [text("summary of u1 a1")]


def test_two_compactions_the_latest_wins_and_the_older_one_is_skipped(store: tl.Store) -> None:
    s = store.create()
    _u1, _a1, u2, a2 = conversation(s, "u1", "a1", "u2", "a2")
    s.append_compaction("first", u2)
    u3, a3 = conversation(s, "u3", "a3")
    c2 = s.append_compaction("second", a2)
    u4 = s.append_message("user", "u4")
    ctx = s.context()
    assert seen(ctx) == [
        ("compactionSummary", "second"),
        ("assistant", "a2"),
        ("user", "u3"),
        ("assistant", "a3"),
        ("user", "u4"),
    ]
    assert view_ids(ctx) == [c2, a2, u3, a3, u4]


def test_a_compaction_whose_first_kept_entry_is_not_on_the_path_keeps_what_follows_it(
    store: tl.Store,
) -> None:
    s = store.create()
    u1, a1 = conversation(s, "u1", "a1")
    s.branch(u1)
    a1b = s.append_message("assistant", "a1b")
    c = s.append_compaction("sum", a1)  # a1 is on the other branch
    u2 = s.append_message("user", "u2")
    assert view_ids(s.context()) == [c, u2]
    assert seen(s.context()) == [("compactionSummary", "sum"), ("user", "u2")]
    del a1b


def test_a_compaction_keeping_nothing_shows_only_what_follows_it(store: tl.Store) -> None:
    s = store.create()
    conversation(s, "u1", "a1")
    c = s.append_compaction("all of it", None)
    u2 = s.append_message("user", "u2")
    assert view_ids(s.context()) == [c, u2]


@pytest.mark.parametrize("first_kept", ["c", "never-written"])
def test_a_first_kept_pointer_equal_to_the_compaction_or_unknown_keeps_what_follows_it(
    store: tl.Store, first_kept: str
) -> None:
    s = store.create(
        records=[
            msg("u1", None, "u1", ts=1),
            msg("a1", "u1", "a1", ts=2, role="assistant"),
            CompactionEntry(
                id="c",
                parent_id="a1",
                timestamp=T.format(3),
                compaction=Compaction(summary="sum", first_kept_entry_id=first_kept),
            ),
            msg("u2", "c", "u2", ts=4),
        ]
    )
    assert view_ids(s.context()) == ["c", "u2"]
    assert seen(s.context()) == [("compactionSummary", "sum"), ("user", "u2")]


def test_a_compaction_on_another_branch_is_ignored(store: tl.Store) -> None:
    s = store.create()
    u1, a1, u2 = conversation(s, "u1", "a1", "u2")
    c = s.append_compaction("sum", u2)
    s.branch(a1)
    u2b = s.append_message("user", "u2b")
    assert view_ids(s.context()) == [u1, a1, u2b]
    assert view_ids(s.context(leaf_id=c)) == [c, u2]


def test_a_compaction_with_an_unknown_first_kept_entry_is_refused(store: tl.Store) -> None:
    s = store.create()
    conversation(s, "u1")
    with pytest.raises(NotFoundError, match="Entry 'nope' not found"):
        s.append_compaction("sum", "nope")
    assert len(s.entries()) == 1


def test_branch_summaries_on_the_path_become_messages_and_empty_ones_are_skipped(
    store: tl.Store,
) -> None:
    s = store.create()
    u1, a1, _u2 = conversation(s, "u1", "a1", "u2")
    b1 = s.branch_with_summary(a1, "summary one")
    u3 = s.append_message("user", "u3")
    s.append_message("assistant", "a3")
    s.branch_with_summary(u3, "")
    ctx = s.context()
    assert seen(ctx) == [
        ("user", "u1"),
        ("assistant", "a1"),
        ("branchSummary", "summary one"),
        ("user", "u3"),
    ]
    assert view_ids(ctx) == [u1, a1, b1, u3]


def test_a_branch_summary_kept_after_a_compaction_stays_in_the_context(store: tl.Store) -> None:
    s = store.create()
    u1, a1, _u2 = conversation(s, "u1", "a1", "u2")
    b = s.branch_with_summary(a1, "abandoned u2")
    c = s.append_compaction("sum", b)
    assert view_ids(s.context()) == [c, b]
    del u1


def test_context_at_an_explicit_leaf_leaves_the_current_leaf_alone(store: tl.Store) -> None:
    s = store.create()
    u1, a1, u2 = conversation(s, "u1", "a1", "u2")
    s.branch(u1)
    a1b = s.append_message("assistant", "a1b")
    assert view_ids(s.context(leaf_id=u2)) == [u1, a1, u2]
    assert s.context(leaf_id=u2).leaf_id == u2
    assert s.leaf_id == a1b
    assert view_ids(s.context()) == [u1, a1b]


def test_context_at_an_unknown_leaf_is_refused(store: tl.Store) -> None:
    s = store.create()
    conversation(s, "u1")
    with pytest.raises(NotFoundError, match="Entry 'nope' not found in session"):
        s.context(leaf_id="nope")


def test_model_and_thinking_level_are_the_latest_on_the_whole_path(store: tl.Store) -> None:
    s = store.create()
    s.append_model_change("openai", "gpt-4o")
    s.append_thinking_level("high")
    u1, a1 = conversation(s, "u1", "a1")
    s.append_model_change("anthropic", "claude")
    u2 = s.append_message("user", "u2")
    s.append_compaction("sum", u2)  # the model changes before it still count
    ctx = s.context()
    assert ctx.model == ModelChange(provider="anthropic", model_id="claude")
    assert ctx.thinking_level == "high"
    s.branch(a1)
    s.append_thinking_level("low")
    assert s.context().model == ModelChange(provider="openai", model_id="gpt-4o")
    assert s.context().thinking_level == "low"
    assert s.context(leaf_id=u1).thinking_level == "high"


def test_thinking_level_is_off_until_set(store: tl.Store) -> None:
    s = store.create()
    conversation(s, "u1")
    assert s.context().thinking_level == "off"
    assert s.context().model is None


def test_a_context_taken_earlier_does_not_change_when_the_session_grows(store: tl.Store) -> None:
    s = store.create()
    u1, a1 = conversation(s, "u1", "a1")
    ctx = s.context()
    u2 = s.append_message("user", "u2")
    assert view_ids(ctx) == [u1, a1]
    assert view_ids(s.context()) == [u1, a1, u2]


def test_tool_calls_and_results_keep_their_blocks_in_the_context(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "list /")
    s.append_message("assistant", [tool_use("t1", "ls", {"path": "/"})])
    s.append_message("user", [tool_result("t1", "bin etc")])
    msgs = list(s.context().messages)
    assert msgs[1].tool_uses[0].id == "t1"
    assert msgs[2].tool_results[0].content == "bin etc"
    assert not msgs[2].is_user_input


def test_list_follows_appends_made_after_an_earlier_listing(store: tl.Store) -> None:
    s = store.create()
    s.append_message("assistant", "greeting")
    assert [(r.message_count, r.first_message, r.name) for r in store.list()] == [(1, None, None)]
    s.append_message("user", "the first question")
    s.append_session_info("renamed")
    last = s.append_message("user", "another")
    (row,) = store.list()
    assert (row.message_count, row.first_message, row.name) == (3, "the first question", "renamed")
    assert row.modified == s.entry(last).timestamp


def test_append_records_keeps_ids_and_refuses_an_existing_id(store: tl.Store) -> None:
    s = store.create()
    (u1,) = conversation(s, "u1")
    ids = s.append_records(
        [
            msg("imported-1", u1, "i1", ts=1),
            msg("imported-2", "imported-1", "i2", ts=2, role="assistant"),
        ]
    )
    assert ids == ["imported-1", "imported-2"]
    assert s.leaf_id == "imported-2"
    assert view_ids(s.context()) == [u1, "imported-1", "imported-2"]
    with pytest.raises(UserError, match="Entry id 'imported-1' already exists"):
        s.append_records([msg("fresh", "imported-2", "x"), msg("imported-1", "fresh", "dup")])
    assert not s.has_entry("fresh")
    s.close()
    assert store.open(s.id).path_ids() == [u1, "imported-1", "imported-2"]


def test_create_branched_session_at_an_unknown_leaf_is_refused(store: tl.Store) -> None:
    s = store.create()
    conversation(s, "u1")
    with pytest.raises(NotFoundError):
        s.create_branched_session("nope")
    assert len(store.list()) == 1


def test_a_session_dropped_without_close_releases_the_lock(store: tl.Store) -> None:
    s1 = store.create()
    sid = s1.id
    first = s1.append_message("user", "x")
    del s1
    gc.collect()
    s2 = store.open(sid)
    second = s2.append_message("user", "y")
    assert s2.path_ids() == [first, second]


def test_line_separators_and_escapes_in_text_survive_a_reopen(store: tl.Store) -> None:
    body = 'a\u2028b\u2029c\x85d\re\nf "q" \\ \U0001f600 \u4e2d'
    s = store.create()
    u = s.append_message("user", body)
    a = s.append_message("assistant", [text(body), tool_use("t", body, {body: [body]})])
    s.close()
    again = store.open(s.id)
    assert again.load_report.clean
    assert again.path_ids() == [u, a]
    assert again.entry(u).message.text == body
    assert again.entry(a).message.content == [text(body), tool_use("t", body, {body: [body]})]


# -- the Backend contract (threadline.store.base.Backend) ---------------------------------------

BACKEND_METHODS = [
    "exists",
    "delete",
    "open_log",
    "create_log",
    "session_ids",
    "list",
    "changes_since",
    "catalog_location",
    "forget_listing",
    "close",
]


def test_every_backend_implements_each_capability_of_the_contract(store: tl.Store) -> None:
    from threadline.store.base import BaseStore

    backend = type(store.backend)
    # the hooks with no shared default are the backend's own
    own = [
        m
        for m in ("exists", "delete", "open_log", "create_log", "session_ids")
        if getattr(backend, m) is getattr(BaseStore, m)
    ]
    assert own == []
    assert [m for m in BACKEND_METHODS if not callable(getattr(store.backend, m, None))] == []


def test_changes_since_returns_what_was_appended_after_the_cursor(store: tl.Store) -> None:
    s = store.create()
    a = s.append_message("user", "one")
    b = s.append_message("assistant", "two")
    reset, slots, cursor = store.backend.changes_since(s.id, "")
    assert (reset, [x.id for x in slots]) == (True, [a, b])
    c = s.append_message("user", "three")
    reset, slots, cursor2 = store.backend.changes_since(s.id, cursor)
    if store.backend.catalog_location().kind == "sqlite":  # indexed incrementally from here
        assert (reset, [x.id for x in slots]) == (False, [c])
        assert store.backend.changes_since(s.id, cursor2)[:2] == (False, [])
    else:  # the PostgreSQL catalog is kept in the same database: the portable fallback
        assert (reset, [x.id for x in slots]) == (True, [a, b, c])


def test_the_catalog_is_made_from_the_location_the_backend_names(store: tl.Store) -> None:
    from threadline.stores import CATALOGS

    assert store.backend.catalog_location().kind in CATALOGS
    s = store.create()
    s.append_message("user", "walrus tusks")
    store.catalog.embedder = None
    assert [h.session_id for h in store.catalog.search("walrus", mode="keyword")] == [s.id]
    assert store.opened_catalog is store.catalog


def test_list_reports_an_unreadable_session_in_skipped(jsonl_store: tl.Store) -> None:
    s = jsonl_store.create()
    s.append_message("user", "fine")
    bad = jsonl_store.backend.directory / "broken.jsonl"  # type: ignore[attr-defined]
    bad.write_bytes(b"this is not a session header\n")
    rows = jsonl_store.list()
    assert [r.id for r in rows] == [s.id]
    assert rows.skipped == [
        ("broken", "not a session header: JSON is malformed: invalid character (byte 4)")
    ]


def test_the_cli_names_a_skipped_session_on_stderr(jsonl_store: tl.Store) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    s = jsonl_store.create()
    s.append_message("user", "fine")
    directory = jsonl_store.backend.directory  # type: ignore[attr-defined]
    (directory / "broken.jsonl").write_bytes(b"this is not a session header\n")
    res = CliRunner().invoke(cli, ["--store", str(directory), "sessions", "--json"])
    assert res.exit_code == 0
    assert [row["id"] for row in json.loads(res.stdout)] == [s.id]
    assert res.stderr == (
        "Skipped unreadable session 'broken': not a session header: JSON is "
        "malformed: invalid character (byte 4)\n"
    )
