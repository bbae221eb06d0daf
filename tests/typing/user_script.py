"""A user's script calling every public Session/Store method the docs name, type-checked with
``mypy --strict`` by tests/test_architecture.py (it is never run: the point is its types)."""

from __future__ import annotations

import threadline as tl
from threadline.bookmarks import TagListing, TagStatus, UndoResult


def tour(store: tl.Store) -> None:
    s: tl.Session = store.create(session_id="tour", cwd="/tmp", metadata={"k": "v"})
    user: str = s.append_message("user", "Hello")
    s.append_message("assistant", [tl.text("Hi")], model="m", usage={"input": 1, "output": 2})
    s.append_model_change("openai", "gpt-4o")
    s.append_thinking_level("high")
    s.append_session_info("a name")
    s.append_custom("note", {"x": 1})
    s.set_label(user, "start")
    label: str | None = s.get_label(user)
    labels: dict[str, str] = s.labels()
    s.branch(user)
    s.reset_leaf()
    summary_id: str = s.branch_with_summary(user, "what was tried")
    s.append_compaction("summary", user, tokens_before=10)
    ctx: tl.Context = s.context(active_tags=["draft"])
    messages = list(ctx.messages)
    item: tl.ViewItem = ctx.view[0]
    ids: list[str] = s.path_ids()
    s.path()
    s.entry(user)
    s.has_entry(user)
    s.entries()
    s.entry_ids()
    s.children(None)
    nodes = s.tree()
    flat = s.tree(flat=True)
    metas: list[tl.EntryMeta] = s.metadata()
    stats: dict[str, object] = s.stats()
    count: int = s.message_count()
    leaf: str | None = s.leaf_id
    name: str | None = s.name
    report = s.load_report.clean

    op: str = s.digest(0, 1, "short", tags=["draft"])
    s.revise(0, 0, [{"role": "user", "content": "Hello again"}])
    s.snip(0, 0)
    s.resequence([1, 0])
    s.insert(-1, [tl.Message(role="user", content=[tl.text("first")])])
    tagged: int = s.tag_messages(0, 1, ["keep"])
    ops: list[tl.OperationInfo] = s.operations(active_only=True)
    s.toggle(op, False)
    s.revert(op)

    t: TagStatus = s.tag("here")
    listing: TagListing = s.tags()
    s.untag("here")
    undone: UndoResult = s.undo(1)
    s.undo_to("__session_start__")
    s.clear()

    plan: tl.PurgePlan = s.purge([user])
    plan = s.purge(all=True, dry_run=False)
    copy: tl.Session = s.create_branched_session(user)
    s.close()

    with store.open("tour", read_only=True) as again:
        again.context()
    forked: tl.Session = store.fork("tour")
    recent: tl.Session = store.continue_recent()
    rows: tl.SessionListing = store.list()
    skipped: list[tuple[str, str]] = rows.skipped
    first: tl.SessionSummary = rows[0]
    exists: bool = store.exists("tour")
    hits = store.catalog.search("hello", k=3)
    store.delete(forked.id)
    store.close()
    print(
        label,
        labels,
        summary_id,
        messages,
        item,
        ids,
        nodes,
        flat,
        metas,
        stats,
        count,
        leaf,
        name,
        report,
        tagged,
        ops,
        t,
        listing,
        undone,
        plan,
        copy,
        recent,
        skipped,
        first,
        exists,
        hits,
    )


tour(tl.open_store("memory://"))
