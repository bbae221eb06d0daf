"""Session: the public API over one session's log (DESIGN §4, §5, §10).

A session is an append-only tree of entries. Appending a tree entry makes it a child of the
current leaf and moves the leaf to it; navigation (``branch``, ``reset_leaf``) appends a ``leaf``
meta record, so it survives a reopen. Nothing is ever deleted except by :meth:`Session.purge`.

The first write takes the store's writer lock (``SessionLockedError`` when another writer holds
it) and first reads what other writers appended since the load, so parent ids are never stale.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.context import Context, ViewItem, ViewState, build_view
from threadline.errors import NotFoundError, UserError
from threadline.model.content import ROLES, Message, Usage, coerce_content, text
from threadline.model.entries import (
    RECORD_CLASSES,
    AnyRecord,
    Bookmark,
    BranchSummary,
    Compaction,
    Custom,
    KnownRecord,
    Label,
    LabelEntry,
    Leaf,
    MessageEntry,
    ModelChange,
    OpState,
    PurgedEntry,
    SessionHeader,
    SessionInfo,
    ThinkingLevel,
    UnknownRecord,
    encode,
    new_id,
    now,
)
from threadline.model.limits import check_record, encode_checked
from threadline.model.tree import TreeIndex
from threadline.store.base import LazyMessage, Loaded, LoadReport, Log, Slot

if TYPE_CHECKING:
    from threadline.store.base import Store


_AT_LEAF = object()  # _write's default parent: the current leaf


class TreeNode(msgspec.Struct, kw_only=True):
    """A node of :meth:`Session.tree`: the entry, its children (ordered), its label."""

    entry: Any
    children: list[TreeNode] = msgspec.field(default_factory=list)
    label: str | None = None


class FlatNode(msgspec.Struct, kw_only=True):
    """One node of ``tree(flat=True)``; every JSON output of a tree uses this form."""

    entry: Any
    parent_id: str | None
    children: list[str]
    depth: int
    label: str | None = None


class EntryMeta(msgspec.Struct, kw_only=True):
    """Per-entry metadata without the content: id, timestamp, type, size in bytes."""

    id: str
    timestamp: str
    type: str
    size: int
    parent_id: str | None = None


class Session:
    """One conversation tree. Get one from a store: ``store.create()``, ``store.open(id)``."""

    def __init__(self, store: Store | None, log: Log, loaded: Loaded, *, read_only: bool = False
                 ) -> None:
        self._store = store
        self._log = log
        self.header: SessionHeader = loaded.header
        self.id: str = loaded.header.id
        self.load_report: LoadReport = loaded.report
        self.read_only = read_only
        self._sizes: dict[str, int] = loaded.sizes
        self._tree = TreeIndex()
        self._slots: dict[str, Slot] = {}
        self._types: dict[str, str] = {}
        # tree entries that are not messages (about 1% of a real session): context building
        # tests this small set instead of looking every path entry's type up
        self._special: set[str] = set()
        self._labels: dict[str, str] = {}
        self._bookmarks: dict[str, Bookmark] = {}
        self._bookmark_times: dict[str, str] = {}
        self._op_states: dict[str, OpState] = {}
        self._ops: list[str] = []
        self._message_tags: dict[str, list[str]] = {}
        self._purged: set[str] = set()
        self._name: str | None = None
        self._leaf: str | None = None
        self._writer = False
        self._closed = False
        self._view: ViewState | None = None
        self._path: tuple[str | None, list[str]] | None = None
        self._ingest(loaded.slots)
        self._settle()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the writer lock (if held). The session can still be read afterwards."""
        if not self._closed:
            self._closed = True
            self._log.release()
            self._writer = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._writer:
                self._log.release()
        except Exception:  # interpreter shutdown: the OS drops the flock with the descriptor
            pass

    def __repr__(self) -> str:
        return f"<Session {self.id} entries={len(self._tree)} leaf={self._leaf}>"

    @property
    def store(self) -> Store | None:
        return self._store

    @property
    def leaf_id(self) -> str | None:
        """The current leaf (``None`` before the first entry or after ``reset_leaf``)."""
        return self._leaf

    @property
    def name(self) -> str | None:
        """The latest ``session_info`` name."""
        return self._name

    # -- loading -----------------------------------------------------------------------------

    def _ingest(self, slots: Iterable[Slot]) -> None:
        report = self.load_report
        tree = self._tree
        kinds = self._types
        store_slots = self._slots
        parents = tree.parent
        stamps = tree.ts
        forward = tree._forward
        leaf = self._leaf
        lazy = LazyMessage
        for rec in slots:
            rid = rec.id
            if rec.__class__ is lazy:  # the hot path: most records of a big session
                assert rid is not None
                if rid in store_slots:
                    report.duplicate_ids.append(rid)
                    continue
                p = rec.parent_id
                if p is not None and p not in parents:
                    forward.append(rid)
                parents[rid] = p
                stamps[rid] = rec.timestamp
                store_slots[rid] = rec
                kinds[rid] = "message"
                leaf = rid
                continue
            self._leaf = leaf
            self._ingest_record(rec)
            leaf = self._leaf
        self._leaf = leaf
        tree._children = None


    def _ingest_record(self, rec: Any) -> None:
        """Index one decoded record (anything but a lazy message)."""
        report = self.load_report
        store_slots = self._slots
        rid = rec.id
        if rec.tree:
            if rid is None:
                return  # an unknown record without id: kept in the file only
            if rid in store_slots:
                report.duplicate_ids.append(rid)
                return
            kind = rec.type
            self._tree.add(rid, rec.parent_id, rec.timestamp or "")
            store_slots[rid] = rec
            self._types[rid] = kind
            if kind != "message":
                self._special.add(rid)
            if not isinstance(rec, UnknownRecord):  # only known tree entries move the leaf
                self._leaf = rid
            if kind == "message":
                return
            if kind == "label":
                lab: Label = rec.payload
                if lab.label:
                    self._labels[lab.target_id] = lab.label
                else:
                    self._labels.pop(lab.target_id, None)
            elif kind == "session_info" and not isinstance(rec, PurgedEntry):
                self._name = rec.payload.name
            elif kind == "context_op":
                self._ops.append(rid)
            return
        kind = rec.type
        payload = rec.payload
        if kind == "leaf":
            target = payload.target_id
            if target is None or target in store_slots:
                self._leaf = target
            else:
                report.unknown_leaf.append(target)
        elif kind == "bookmark":
            if payload.removed:
                self._bookmarks.pop(payload.name, None)
                self._bookmark_times.pop(payload.name, None)
            else:
                self._bookmarks[payload.name] = payload
                self._bookmark_times[payload.name] = rec.timestamp
        elif kind == "op_state":
            self._op_states[payload.op_id] = payload
        elif kind == "message_tags":
            for target in payload.target_ids:
                tags = self._message_tags.get(target, [])
                tags = [t for t in tags if t not in payload.remove]
                tags.extend(t for t in payload.add if t not in tags)
                if tags:
                    self._message_tags[target] = tags
                else:
                    self._message_tags.pop(target, None)
        elif kind == "purge":
            self._purged.update(payload.entry_ids)

    def _settle(self) -> None:
        tree = self._tree
        had = (len(tree.orphans), len(tree.cycles))
        tree.settle()
        self.load_report.orphans.extend(tree.orphans[had[0]:])
        self.load_report.cycles.extend(tree.cycles[had[1]:])
        for eid, slot in self._slots.items():
            if isinstance(slot, PurgedEntry):
                self._purged.add(eid)

    def _ensure_writer(self) -> None:
        if self.read_only:
            raise UserError(
                f"Session '{self.id}' was opened read-only; open it without read_only to write"
            )
        if self._writer:
            return
        newer = self._log.acquire()
        self._writer = True
        self._closed = False
        if newer:
            self._ingest(newer)
            self._settle()
            self._invalidate()

    def _invalidate(self) -> None:
        self._view = None
        self._path = None

    # -- writing -----------------------------------------------------------------------------

    def _write(self, kind: str, payload: Any, *, tree: bool = True,
               parent_id: str | object | None = _AT_LEAF) -> str:
        """Append one record of ``kind``: a tree entry (under the leaf, or under ``parent_id``)
        or a meta record (``tree=False``)."""
        self._ensure_writer()
        cls = RECORD_CLASSES[kind]
        if not tree:
            parent = None
        elif parent_id is _AT_LEAF:
            parent = self._leaf
        else:
            parent = parent_id  # type: ignore[assignment]
        rec: Any = cls(id=new_id(), parent_id=parent, timestamp=now(), **{kind: payload})
        line = encode_checked(encode, rec)
        check_record(payload, line, 1 if parent is None else 0)
        self._log.append([line])
        self._sizes[rec.id] = len(line)
        self._after_write(rec)
        return rec.id  # type: ignore[no-any-return]

    def _after_write(self, rec: KnownRecord) -> None:
        prev_leaf = self._leaf
        self._ingest_record(rec)
        view = self._view
        if not rec.tree:
            if rec.type in ("leaf", "op_state", "purge"):
                self._invalidate()
            return
        if rec.parent_id != prev_leaf:  # written under another entry (branch_with_summary)
            self._invalidate()
            return
        path = self._path
        if path is not None and path[0] == prev_leaf:
            path[1].append(rec.id)
            self._path = (rec.id, path[1])
        else:
            self._path = None
        if view is None or view.leaf != prev_leaf:
            self._view = None
            return
        kind = rec.type
        if kind == "message":
            view.ids.append(rec.id)
        elif kind == "branch_summary":
            if rec.payload.summary:
                view.ids.append(rec.id)
        elif kind == "model_change":
            view.model = rec.payload
        elif kind == "thinking_level":
            view.thinking_level = rec.payload.thinking_level
        elif kind in ("compaction", "context_op"):
            self._view = None
            return
        view.leaf = rec.id

    def append_records(self, records: Sequence[KnownRecord]) -> list[str]:
        """Append prepared records as they are (ids, parents, timestamps kept): the importers'
        and copiers' path. All are validated before anything is written; one durable batch."""
        if not records:
            return []
        self._ensure_writer()
        lines = []
        seen = set(self._slots)
        for rec in records:
            if rec.tree and rec.id in seen:
                raise UserError(f"Entry id '{rec.id}' already exists in session '{self.id}'")
            seen.add(rec.id)
            line = encode_checked(encode, rec)
            check_record(rec.payload, line, 1 if rec.parent_id is None else 0)
            lines.append(line)
        self._log.append(lines)
        for rec, line in zip(records, lines, strict=True):
            self._sizes[rec.id] = len(line)
        self._ingest(records)
        self._settle()
        self._invalidate()
        return [r.id for r in records]

    def append_message(self, role: str | Message, content: Any = None, *,
                       model: str | None = None, usage: Usage | dict[str, int] | None = None,
                       stop_reason: str | None = None,
                       provider_details: dict[str, Any] | None = None) -> str:
        """Append a message as a child of the leaf; returns its entry id.

        ``role`` is a role name (``user``, ``assistant``, ``tool``, ``system``, …) with ``content``
        as a string, blocks, or dicts in the file format's shape, or a whole :class:`Message`.
        """
        if isinstance(role, Message):
            msg = role
        else:
            if role not in ROLES:
                raise UserError(f"Unknown role {role!r}; use one of: {', '.join(sorted(ROLES))}")
            if content is None:
                raise UserError("append_message needs content (a string or a list of blocks)")
            if isinstance(usage, dict):
                usage = msgspec.convert(usage, Usage)
            msg = Message(role=role, content=coerce_content(content), model=model, usage=usage,
                          stop_reason=stop_reason, provider_details=provider_details)
        if msg.role not in ROLES:
            raise UserError(f"Unknown role {msg.role!r}; use one of: {', '.join(sorted(ROLES))}")
        return self._write("message", msg)

    def append_model_change(self, provider: str, model_id: str) -> str:
        return self._write("model_change", ModelChange(provider=provider, model_id=model_id))

    def append_thinking_level(self, level: str) -> str:
        return self._write("thinking_level", ThinkingLevel(thinking_level=level))

    def append_compaction(self, summary: str, first_kept_entry_id: str | None,
                          tokens_before: int = 0, details: Any = None) -> str:
        """Record a compaction: the summary replaces the path before ``first_kept_entry_id``."""
        if first_kept_entry_id is not None and first_kept_entry_id not in self._slots:
            raise self._unknown(first_kept_entry_id)
        return self._write("compaction", Compaction(
            summary=summary, first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before, details=details))

    def append_session_info(self, name: str) -> str:
        return self._write("session_info", SessionInfo(name=name))

    def append_custom(self, custom_type: str, data: Any = None) -> str:
        return self._write("custom", Custom(custom_type=custom_type, data=data))

    def set_label(self, target_id: str, label: str | None) -> str:
        """Label an entry (session-global; the latest wins). ``""`` or ``None`` clears it."""
        if target_id not in self._slots:
            raise self._unknown(target_id)
        return self._write("label", Label(target_id=target_id, label=label or None))

    def get_label(self, target_id: str) -> str | None:
        return self._labels.get(target_id)

    def labels(self) -> dict[str, str]:
        """Every current label, by target entry id."""
        return dict(self._labels)

    # -- navigation --------------------------------------------------------------------------

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append starts a sibling branch there."""
        if entry_id not in self._slots:
            raise self._unknown(entry_id)
        self._write("leaf", Leaf(target_id=entry_id), tree=False)

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append starts a new root."""
        self._write("leaf", Leaf(target_id=None), tree=False)

    def branch_with_summary(self, entry_id: str | None, summary: str, details: Any = None) -> str:
        """Branch to ``entry_id`` and append a summary of the abandoned path as its child."""
        if entry_id is not None and entry_id not in self._slots:
            raise self._unknown(entry_id)
        # One record: a tree entry appended under entry_id becomes the leaf by itself (DESIGN
        # §4), so there is no window where the leaf moved but the summary is missing.
        return self._write("branch_summary",
                           BranchSummary(summary=summary, from_id=self._leaf, details=details),
                           parent_id=entry_id)

    def create_branched_session(self, leaf_id: str | None = None) -> Session:
        """A new session holding the path to ``leaf_id`` (same ids) and the labels on it."""
        if self._store is None:
            raise UserError("This session has no store to create the branched session in")
        leaf = self._leaf if leaf_id is None else leaf_id
        if leaf is not None and leaf not in self._slots:
            raise self._unknown(leaf)
        path = self._tree.path(leaf)
        on_path = set(path)
        records: list[KnownRecord] = []
        for eid in path:
            rec = self._record(eid)
            if rec.type != "label" and not isinstance(rec, (PurgedEntry, UnknownRecord)):
                records.append(rec)
        parent = records[-1].id if records else None
        stamp = now()
        for target in path:
            label = self._labels.get(target)
            if label and target in on_path:
                rec = LabelEntry(id=new_id(), parent_id=parent, timestamp=stamp,
                                 label=Label(target_id=target, label=label))
                records.append(rec)
                parent = rec.id
        from threadline.store.base import BaseStore

        assert isinstance(self._store, BaseStore)
        return self._store.create(parent_session=self.id, cwd=self.header.cwd, records=records)

    # -- reading -----------------------------------------------------------------------------

    def _unknown(self, entry_id: str) -> NotFoundError:
        return NotFoundError(
            f"Entry '{entry_id}' not found in session '{self.id}'; "
            f"run 'threadline tree {self.id}' to see the entry ids"
        )

    def _record(self, entry_id: str) -> AnyRecord:
        slot = self._slots[entry_id]
        if isinstance(slot, LazyMessage):
            try:
                rec = slot.decode()
            except Exception as exc:
                self.load_report.corrupt_lines.append((-1, f"entry {entry_id}: {exc}"))
                rec = MessageEntry(id=slot.id, parent_id=slot.parent_id, timestamp=slot.timestamp,
                                   message=Message(role="custom", content=[
                                       text(f"[unreadable entry {entry_id}]")]))
            self._slots[entry_id] = rec
            return rec
        return slot

    def _payload(self, entry_id: str) -> Any:
        return self._record(entry_id).payload

    def entry(self, entry_id: str) -> AnyRecord:
        """The entry with this id (a message, compaction, label, …)."""
        if entry_id not in self._slots:
            raise self._unknown(entry_id)
        return self._record(entry_id)

    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self._slots

    def entries(self) -> list[AnyRecord]:
        """Every tree entry in file order."""
        return [self._record(e) for e in self._slots]

    def entry_ids(self) -> list[str]:
        return list(self._slots)

    def children(self, entry_id: str | None) -> list[AnyRecord]:
        """Children of an entry (``None``: the roots), by timestamp then file order."""
        if entry_id is not None and entry_id not in self._slots:
            raise self._unknown(entry_id)
        return [self._record(c) for c in self._tree.children(entry_id)]

    def path_ids(self, leaf_id: str | None = None) -> list[str]:
        """Entry ids from the root to ``leaf_id`` (default: the current leaf)."""
        if leaf_id is None:
            cached = self._path
            if cached is not None and cached[0] == self._leaf:
                return list(cached[1])
            ids = self._tree.path(self._leaf)
            self._path = (self._leaf, ids)
            return list(ids)
        if leaf_id not in self._slots:
            raise self._unknown(leaf_id)
        return self._tree.path(leaf_id)

    def path(self, leaf_id: str | None = None) -> list[AnyRecord]:
        """Tree entries from the root to ``leaf_id`` (default: the current leaf)."""
        return [self._record(e) for e in self.path_ids(leaf_id)]

    def context(self, leaf_id: str | None = None,
                active_tags: Iterable[str] | None = None) -> Context:
        """What the model sees at ``leaf_id`` (default: the current leaf), DESIGN §5."""
        tags = frozenset(active_tags or ())
        if leaf_id is not None and leaf_id not in self._slots:
            raise self._unknown(leaf_id)
        leaf = self._leaf if leaf_id is None else leaf_id
        view = self._view
        if view is None or view.leaf != leaf or view.active_tags != tags:
            path = self.path_ids() if leaf == self._leaf else self._tree.path(leaf)
            view = build_view(self, path, tags)
            if leaf == self._leaf:
                self._view = view
        return Context(view.ids, self, view.model, view.thinking_level, leaf)

    def _message_for_view_id(self, view_id: str) -> Message:
        kind = self._types.get(view_id)
        if kind == "message":
            rec = self._record(view_id)
            return rec.message  # type: ignore[union-attr]
        if kind == "compaction":
            return Message(role="compactionSummary",
                           content=[text(self._payload(view_id).summary)])
        if kind == "branch_summary":
            return Message(role="branchSummary",
                           content=[text(self._payload(view_id).summary)])
        from threadline.operations import synthetic_message

        return synthetic_message(self, view_id)

    def _view_item(self, view_id: str) -> ViewItem:
        kind = self._types.get(view_id)
        tags = list(self._message_tags.get(view_id, ()))
        if kind is not None:
            return ViewItem(id=view_id, kind=kind, entry_id=view_id, tags=tags)
        return ViewItem(id=view_id, kind="synthetic", entry_id=view_id.rsplit(":", 1)[0],
                        tags=tags)

    def tree(self, flat: bool = False) -> list[TreeNode] | list[FlatNode]:
        """The whole tree: nested :class:`TreeNode` roots, or one :class:`FlatNode` per entry
        in depth-first order with ``flat=True``. Built without recursion."""
        t = self._tree
        if flat:
            return [FlatNode(entry=self._record(eid), parent_id=t.parent[eid],
                             children=t.children(eid), depth=depth, label=self._labels.get(eid))
                    for eid, depth in t.preorder()]
        nodes: dict[str, TreeNode] = {}
        roots: list[TreeNode] = []
        for eid, _depth in t.preorder():
            node = TreeNode(entry=self._record(eid), label=self._labels.get(eid))
            nodes[eid] = node
            parent = t.parent[eid]
            (roots if parent is None else nodes[parent].children).append(node)
        return roots

    def metadata(self) -> list[EntryMeta]:
        """id, timestamp, type and encoded size of every tree entry, without decoding content."""
        out = []
        for eid, slot in self._slots.items():
            out.append(EntryMeta(id=eid, timestamp=slot.timestamp or "", type=slot.type,
                                 size=self._sizes.get(eid, 0), parent_id=self._tree.parent[eid]))
        return out

    def stats(self, largest: int = 5) -> dict[str, Any]:
        """Totals, per-type breakdown, time range, size distribution and largest entries."""
        metas = self.metadata()
        by_type: dict[str, dict[str, int]] = {}
        for m in metas:
            row = by_type.setdefault(m.type, {"count": 0, "bytes": 0})
            row["count"] += 1
            row["bytes"] += m.size
        sizes = sorted(m.size for m in metas)
        buckets = {"<1KB": 0, "1-10KB": 0, "10-100KB": 0, "100KB-1MB": 0, ">=1MB": 0}
        for s in sizes:
            key = ("<1KB" if s < 1024 else "1-10KB" if s < 10240 else "10-100KB" if s < 102400
                   else "100KB-1MB" if s < 1048576 else ">=1MB")
            buckets[key] += 1
        stamps = [m.timestamp for m in metas if m.timestamp]
        top = heapq.nlargest(largest, metas, key=lambda m: m.size)
        ctx = self.context()
        return {
            "session_id": self.id,
            "name": self._name,
            "entries": len(metas),
            "bytes": sum(sizes),
            "file_bytes": self._log.size(),
            "by_type": dict(sorted(by_type.items())),
            "oldest": min(stamps) if stamps else None,
            "newest": max(stamps) if stamps else None,
            "size_distribution": buckets,
            "median_size": sizes[len(sizes) // 2] if sizes else 0,
            "largest": [{"id": m.id, "type": m.type, "size": m.size} for m in top],
            "branches": sum(1 for e in self._slots if len(self._tree.children(e)) > 1),
            "leaf_id": self._leaf,
            "context_messages": len(ctx.messages),
            "labels": len(self._labels),
        }

    def message_count(self) -> int:
        return sum(1 for t in self._types.values() if t == "message")


def encode_tree_json(nodes: Sequence[FlatNode]) -> bytes:
    return msgspec.json.encode(nodes)


# -- capabilities implemented in their own modules ---------------------------------------------
# Bookmarks (bookmarks.py, DESIGN §7), context operations (operations.py, §6) and purge
# (history.py, §3) are Session methods whose logic lives beside the Session, not inside it.


def _bind() -> None:
    def tag(self: Session, name: str | None = None, position: int | None = None) -> Any:
        """Bookmark position ``position`` (default: the end of the view) as ``name``."""
        from threadline import bookmarks

        return bookmarks.tag(self, name, position)

    def tags(self: Session) -> Any:
        """Every tag with its status, sorted by position; invalid tags are removed and reported."""
        from threadline import bookmarks

        return bookmarks.tags(self)

    def untag(self: Session, name: str) -> None:
        """Remove tag ``name`` (``__session_start__`` cannot be removed)."""
        from threadline import bookmarks

        bookmarks.untag(self, name)

    def undo(self: Session, n: int = 1) -> Any:
        """Move the leaf to just before the n-th last user input message."""
        from threadline import bookmarks

        return bookmarks.undo(self, n)

    def undo_to(self: Session, name: str) -> Any:
        """Restore the view to the position of tag ``name``."""
        from threadline import bookmarks

        return bookmarks.undo_to(self, name)

    def clear(self: Session) -> Any:
        """Start over: the leaf moves before the first entry; nothing is deleted."""
        from threadline import bookmarks

        return bookmarks.clear(self)

    def purge(self: Session, entry_ids: Sequence[str] | None = None, *, all: bool = False,
              dry_run: bool = True) -> Any:
        """Really delete entries' content from the store (preview unless ``dry_run=False``)."""
        from threadline import history

        return history.purge(self, entry_ids, all=all, dry_run=dry_run)

    for fn in (tag, tags, untag, undo, undo_to, clear, purge):
        setattr(Session, fn.__name__, fn)

    def op_method(name: str) -> Any:
        def method(self: Session, *args: Any, **kwargs: Any) -> Any:
            from threadline import operations

            return getattr(operations, name)(self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = f"Context operation ``{name}`` (DESIGN §6); see threadline.operations."
        return method

    for name in ("tag_messages", "digest", "revise", "snip", "resequence", "insert",
                 "operations", "toggle", "revert"):
        setattr(Session, name, op_method(name))


_bind()
