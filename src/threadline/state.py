"""SessionState: the indexes over one session's log, shared by :class:`~threadline.session.Session`
and its views (context, operations, bookmarks, history, compaction).

The session layer's one internal object. ``Session`` is the public API; the view modules receive
a ``SessionState`` and work on its attributes, so none of them reads ``Session``'s private state
and none imports ``threadline.session``. The attributes are internal (not a stable API), but they
are named and typed here, which is what lets mypy check every view.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.context import Context, ViewItem, ViewState, build_view
from threadline.errors import Hint, NotFoundError, UserError
from threadline.model.content import Message, text
from threadline.model.entries import (
    RECORD_CLASSES,
    AnyRecord,
    Bookmark,
    KnownRecord,
    Label,
    Leaf,
    MessageEntry,
    OpState,
    PurgedEntry,
    SessionHeader,
    UnknownRecord,
    encode,
    new_id,
    now,
)
from threadline.model.limits import check_record, encode_checked
from threadline.model.tree import TreeIndex
from threadline.store.base import (
    Columns,
    LazyMessage,
    Loaded,
    LoadReport,
    Log,
    Slot,
    decode_run,
)

if TYPE_CHECKING:
    from threadline.operations import Marker
    from threadline.store.base import BaseStore

AT_LEAF: Any = object()  # write()'s default parent: the current leaf


DECODED_CACHE = 4096  # decoded messages kept from whole-session walks (tree, entries)


class Slots:
    """Every tree entry's slot (a record, or a lazy message), by id, in file order.

    The tree entries are the entries of ``keys`` (the tree: the same entries, added in the
    same order); ``by_id`` holds the records, the decoded messages and the lazy messages of
    a parsed log. The messages an open read by column (``Columns``, what the JSONL index gives)
    are in neither: an open inserts nothing here for them and makes no lazy message. One asked
    for is made from its row in the columns and not kept (a walk over the whole session keeps
    nothing); the id → row map is built the first time one is asked for."""

    __slots__ = ("by_id", "cols", "keys")

    def __init__(self, keys: TreeIndex) -> None:
        self.keys = keys
        self.by_id: dict[str, Slot] = {}
        self.cols: Columns | None = None

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys)

    def _row_map(self) -> tuple[Columns, dict[str, int]]:
        cols = self.cols
        assert cols is not None  # an entry of the tree with no slot came from the columns
        return cols, cols.row_map()

    def rows(self) -> Mapping[str, int]:
        """The row of every message of the columns (empty without columns)."""
        return self._row_map()[1] if self.cols is not None else {}

    def size(self, entry_id: str) -> int:
        """The line length of a message of the columns, 0 for any other id."""
        if self.cols is None:
            return 0
        cols, rows = self._row_map()
        row = rows.get(entry_id)
        return 0 if row is None else cols.lengths[row]

    def _lazy(self, entry_id: str) -> LazyMessage:
        cols, rows = self._row_map()
        return cols.lazy(rows[entry_id])

    def __getitem__(self, entry_id: str) -> Slot:
        slot = self.by_id.get(entry_id)
        if slot is None:
            if entry_id not in self.keys:
                raise KeyError(entry_id)
            return self._lazy(entry_id)
        return slot

    def get(self, entry_id: str) -> Slot | None:
        slot = self.by_id.get(entry_id)
        if slot is None and entry_id in self.keys:
            return self._lazy(entry_id)
        return slot

    def to_decode(self, entry_ids: Iterable[str]) -> list[LazyMessage]:
        """The lazy messages among ``entry_ids``, in their order, to be decoded and replaced
        at once: those of the columns are made bare (id and line; no parent, no timestamp),
        which is all decoding reads."""
        by_id, keys = self.by_id, self.keys
        rows: dict[str, int] | None = None
        out: list[LazyMessage] = []
        for eid in entry_ids:
            slot = by_id.get(eid)
            if slot is None:
                if eid in keys:
                    if rows is None:
                        cols, rows = self._row_map()
                        starts, lengths, source = cols.starts, cols.lengths, cols.source
                    row = rows[eid]
                    start = starts[row]
                    out.append(LazyMessage(eid, None, "", source, start, start + lengths[row]))
            elif slot.__class__ is LazyMessage:
                out.append(slot)
        return out

    def __setitem__(self, entry_id: str, slot: Slot) -> None:
        """Set the slot of an entry of the tree (added to ``keys`` first)."""
        self.by_id[entry_id] = slot

    def items(self) -> Iterator[tuple[str, Slot]]:
        by_id = self.by_id
        for eid in self.keys:
            slot = by_id.get(eid)
            yield eid, self._lazy(eid) if slot is None else slot


class EntryTypes(Mapping[str, str]):
    """The type of every tree entry: ``"message"`` unless ``named`` says otherwise. Only the
    other kinds (about 1% of a real session) are stored, so an open does not insert one entry
    per message; the tree entries themselves are the keys of ``entries`` (the tree's parents)."""

    __slots__ = ("entries", "named")

    def __init__(self, entries: Collection[str]) -> None:
        self.entries = entries
        self.named: dict[str, str] = {}

    def __getitem__(self, entry_id: str) -> str:
        kind = self.named.get(entry_id)
        if kind is not None:
            return kind
        if entry_id in self.entries:
            return "message"
        raise KeyError(entry_id)

    def get(self, entry_id: str, default: Any = None) -> Any:
        kind = self.named.get(entry_id)
        if kind is not None:
            return kind
        return "message" if entry_id in self.entries else default

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class SessionState:
    """Everything known about one session's log: the tree, the records, the meta-record
    indexes (labels, bookmarks, op states, message tags, purges), the leaf and the cached view."""

    def __init__(
        self,
        store: BaseStore | None,
        log: Log,
        loaded: Loaded,
        *,
        read_only: bool = False,
        shared: bool = False,
    ) -> None:
        # Session's methods run under this lock (threads, DESIGN §3); it survives reload()
        self.lock = threading.RLock()
        # opened shared: each append takes the writer lock for itself alone (write_at_leaf);
        # behind: such appends left records this session has not read (catch_up reads them
        # before the session is next read); pending_leaf: the last of them it wrote
        self.shared = shared
        self.behind = False
        self.pending_leaf: str | None = None
        self.load(store, log, loaded, read_only=read_only)

    def load(
        self, store: BaseStore | None, log: Log, loaded: Loaded, *, read_only: bool = False
    ) -> None:
        """(Re)build every index from a fresh load of the log."""
        self.store = store
        self.log = log
        self.header: SessionHeader = loaded.header
        self.id: str = loaded.header.id
        self.load_report: LoadReport = loaded.report
        self.read_only = read_only
        self.sizes: dict[str, int] = loaded.sizes
        self.tree = TreeIndex()
        self.slots = Slots(self.tree)
        self.decoded: OrderedDict[str, AnyRecord] = OrderedDict()  # DECODED_CACHE at most
        self.types = EntryTypes(self.tree)
        # tree entries that are not messages (about 1% of a real session): context building
        # tests this small set instead of looking every path entry's type up
        self.special: set[str] = set()
        self.labels: dict[str, str] = {}
        self.bookmarks: dict[str, Bookmark] = {}
        self.bookmark_times: dict[str, str] = {}
        self.bookmark_log: list[tuple[str, Bookmark]] = []  # every bookmark record, in order
        self.op_states: dict[str, OpState] = {}
        self.ops: list[str] = []
        self.message_tags: dict[str, list[str]] = {}
        self.purged: set[str] = set()
        # filled as context operations are applied: marker view ids -> what they stand for, and
        # the originals an expanded revise/snip shows -> its op id (operations.py)
        self.markers: dict[str, Marker] = {}
        self.members: dict[str, str] = {}
        self.name: str | None = None
        self.leaf: str | None = None
        self.writer = False
        self.closed = False
        self.view: ViewState | None = None  # the view at the leaf, kept up to date by appends
        self.path_cache: tuple[str | None, list[str]] | None = None
        cols = loaded.columns
        if cols is not None and cols.clean:
            self.ingest_columns(cols)
            rest = loaded.slots
            self.ingest(rest)
            self.settle(())
            # lazy messages are never purged entries: only the decoded records need a look
            # (the ones that were indexed: a duplicate id is not)
            slots = self.slots
            for rec in [*cols.records, *rest]:
                if isinstance(rec, PurgedEntry) and slots.get(rec.id) is rec:
                    self.purged.add(rec.id)
        else:
            self.ingest(loaded.all_slots())
            self.settle()

    # -- loading -----------------------------------------------------------------------------

    def ingest(self, slots: Iterable[Slot]) -> None:
        report = self.load_report
        tree = self.tree
        if tree.lazy:  # on an index's columns: one by one (a log's tail, other writers' appends)
            for rec in slots:
                self.ingest_record(rec)
            tree.drop_children()
            return
        store_slots = self.slots.by_id
        parents = tree.parent
        stamps = tree.added_ts
        forward = tree.forward
        leaf = self.leaf
        lazy = LazyMessage
        for rec in slots:
            rid = rec.id
            if rec.__class__ is lazy:  # the hot path: most records of a big session
                assert rid is not None
                if rid in parents:  # every tree entry (the slots' keys)
                    report.duplicate_ids.append(rid)
                    continue
                p = rec.parent_id
                if p is not None and p not in parents:
                    forward.append(rid)
                parents[rid] = p
                stamps[rid] = rec.timestamp
                store_slots[rid] = rec
                leaf = rid
                continue
            self.leaf = leaf
            self.ingest_record(rec)
            leaf = self.leaf
        self.leaf = leaf
        tree.drop_children()

    def ingest_columns(self, cols: Columns) -> None:
        """What :meth:`ingest` does with the first ``cols.count`` slots, without a dict or an
        object per message: the tree takes the columns as they are (a clean load has no
        duplicate or forward reference), and only the decoded records are indexed one by one."""
        tree = self.tree
        self.slots.cols = cols
        tree.attach(cols)
        ids, record_rows = cols.ids, cols.record_rows
        tree.add_stamps(ids, cols.stamps)
        hint = cols.hint
        prev = m = 0
        leaf_row = -1
        for i, p in enumerate(cols.positions):
            if p > prev:
                m += p - prev
                leaf_row = m - 1
                self.leaf = ids[leaf_row]
            rec = cols.records[i]
            r = record_rows[i]
            self.ingest_record(rec, known=True, row=r if r >= 0 else None)
            if r >= 0 and not rec.tree:  # a leaf record: where its target message is
                hint[ids[r]] = r
            prev = p + 1
        if cols.count > prev:
            leaf_row = len(ids) - 1
            self.leaf = ids[leaf_row]
        if leaf_row >= 0:
            hint[ids[leaf_row]] = leaf_row
        tree.drop_children()

    def ingest_record(self, rec: Any, known: bool = False, row: int | None = None) -> None:
        """Index one record (a decoded one, or a lazy message). ``known``: (a clean index's
        record) no id to check for a duplicate or a forward reference; ``row``: there, the
        row of the message that is its parent."""
        report = self.load_report
        store_slots = self.slots.by_id
        entries = self.tree  # every tree entry (the slots' keys)
        rid = rec.id
        if rec.tree:
            if rid is None:
                return  # an unknown record without id: kept in the file only
            if not known and rid in entries:
                report.duplicate_ids.append(rid)
                return
            kind = rec.type
            self.tree.add(rid, rec.parent_id, rec.timestamp or "", known=known, row=row)
            store_slots[rid] = rec
            if kind != "message":
                self.types.named[rid] = kind
                self.special.add(rid)
            if not isinstance(rec, UnknownRecord):  # only known tree entries move the leaf
                self.leaf = rid
            if kind == "message":
                return
            if isinstance(rec, PurgedEntry):  # its payload is gone: it labels, names nothing
                self.purged.add(rid)
                return
            if kind == "label":
                lab: Label = rec.payload
                if lab.label:
                    self.labels[lab.target_id] = lab.label
                else:
                    self.labels.pop(lab.target_id, None)
            elif kind == "session_info":
                self.name = rec.payload.name
            elif kind == "context_op":
                self.ops.append(rid)
            return
        kind = rec.type
        payload = rec.payload
        if kind == "leaf":
            target = payload.target_id
            if known or target is None or target in entries:
                self.leaf = target
            else:
                report.unknown_leaf.append(target)
        elif kind == "bookmark":
            self.bookmark_log.append((rec.timestamp or "", payload))
            if payload.removed:
                self.bookmarks.pop(payload.name, None)
                self.bookmark_times.pop(payload.name, None)
            else:
                self.bookmarks[payload.name] = payload
                self.bookmark_times[payload.name] = rec.timestamp
        elif kind == "op_state":
            self.op_states[payload.op_id] = payload
        elif kind == "message_tags":
            for target in payload.target_ids:
                tags = self.message_tags.get(target, [])
                tags = [t for t in tags if t not in payload.remove]
                tags.extend(t for t in payload.add if t not in tags)
                if tags:
                    self.message_tags[target] = tags
                else:
                    self.message_tags.pop(target, None)
        elif kind == "purge":
            self.purged.update(payload.entry_ids)

    def settle(self, new: Iterable[Any] | None = None) -> None:
        """Resolve the tree after records were ingested: all of them, or only ``new``."""
        tree = self.tree
        had = (len(tree.orphans), len(tree.cycles))
        tree.settle()
        self.load_report.orphans.extend(tree.orphans[had[0] :])
        self.load_report.cycles.extend(tree.cycles[had[1] :])
        if new is not None:  # an append: only its records can be purged ones
            for rec in new:
                if isinstance(rec, PurgedEntry):
                    self.purged.add(rec.id)
            return
        for eid, slot in self.slots.by_id.items():
            if isinstance(slot, PurgedEntry):
                self.purged.add(eid)

    def refuse_read_only(self) -> None:
        if self.read_only:
            raise UserError(
                f"Session '{self.id}' was opened read-only; open it without read_only to write"
            )

    def ensure_writer(self) -> None:
        self.refuse_read_only()
        if self.writer:
            return
        newer = self.log.acquire()
        self.writer = True
        self.closed = False
        self.behind = False  # the lock's read brings what shared appends left unread
        self.pending_leaf = None
        if newer:
            self.ingest(newer)
            self.settle(newer)  # only these can be new purged entries: no walk of the session
            self.invalidate()

    def append_lines(
        self, lines: list[bytes], first: bool, records: Sequence[KnownRecord] | None = None
    ) -> None:
        """Append to the log (``records``: what ``lines`` encode); when the session's first
        write fails (disk full), the writer lock it just took is let go again (the caller may
        never close this session)."""
        log = self.log
        try:
            log.append(lines, records)
        except BaseException:
            if first:
                log.release()
                self.writer = False
            raise
        finally:
            if log.let_go:  # handed on (PostgreSQL): taken again before the next write
                self.writer = False

    def invalidate(self) -> None:
        self.view = None
        self.path_cache = None

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        kind: str,
        payload: Any,
        *,
        tree: bool = True,
        parent_id: str | object | None = AT_LEAF,
    ) -> str:
        """Append one record of ``kind``: a tree entry (under the leaf, or under ``parent_id``)
        or a meta record (``tree=False``)."""
        first = not self.writer
        if first:
            if self.shared and tree and parent_id is AT_LEAF:
                rid = self.write_at_leaf(kind, payload)
                if rid is not None:
                    return rid
            self.ensure_writer()  # a writer is never read-only: ensure_writer refuses the lock
        if not tree:
            parent = None
        elif parent_id is AT_LEAF:
            parent = self.leaf
        else:
            parent = parent_id if isinstance(parent_id, str) else None
        rec, line = self.new_record(kind, payload, parent)
        self.append_lines([line], first, [rec])
        self.sizes[rec.id] = len(line)
        self.after_write(rec)
        if first and self.shared:  # a shared session holds the lock for one write at a time
            self.release()
        return str(rec.id)

    def new_record(self, kind: str, payload: Any, parent: str | None) -> tuple[Any, bytes]:
        """A new record of ``kind`` under ``parent``, and its line (checked against the
        limits)."""
        rid = new_id()
        rec: Any
        if kind == "message":  # the hot path: no keyword dict
            rec = MessageEntry(id=rid, parent_id=parent, timestamp=now(), message=payload)
        else:
            rec = RECORD_CLASSES[kind](id=rid, parent_id=parent, timestamp=now(), **{kind: payload})
        try:
            line = encode(rec)
        except UnicodeEncodeError:
            line = encode_checked(encode, rec)  # raises the LimitError
        check_record(payload, line, 1 if parent is None else 0)
        return rec, line

    def write_at_leaf(self, kind: str, payload: Any) -> str | None:
        """A shared session's append of a tree entry under the leaf through
        :meth:`Log.append_at_leaf` (one round trip on PostgreSQL, no lock kept). When other
        writers appended meanwhile, the store puts the new entry under the last of theirs and
        the session is left behind: it reads those records (and its own) with
        :meth:`catch_up` before anything next reads it, not now (writers appending in turn
        would otherwise each read every other writer's entries at every append). None when the
        store cannot (the caller takes the writer lock for the write, which catches up)."""
        self.refuse_read_only()
        parent = self.pending_leaf if self.behind else self.leaf
        rec, line = self.new_record(kind, payload, parent)
        got = self.log.append_at_leaf(line, rec, parent)
        if got is None:
            return None
        if got.behind:
            self.behind = True
            self.pending_leaf = rec.id
            self.invalidate()
        else:
            self.sizes[rec.id] = len(line)
            self.after_write(rec)
        self.closed = False  # close() gives the log its release (a fold it may carry)
        return str(rec.id)

    def catch_up(self) -> None:
        """Read what shared appends left unread (see :meth:`write_at_leaf`)."""
        newer = self.log.read_newer()
        self.behind = False
        self.pending_leaf = None
        if newer:
            self.ingest(newer)
            self.settle(newer)  # only these can be new purged entries
            self.invalidate()

    def after_write(self, rec: KnownRecord) -> None:
        prev_leaf = self.leaf
        rid = rec.id
        # what ingest_record does with a new message, inline (the hot path); the leaf is in
        # the tree (or None): no membership test for the usual parent
        if rec.__class__ is MessageEntry and self.tree.add_new(
            rid, rec.parent_id, rec.timestamp or "", known=rec.parent_id == prev_leaf
        ):
            self.slots.by_id[rid] = rec
            self.leaf = rid
            kind = "message"
        else:
            self.ingest_record(rec)
            if not rec.tree:
                if rec.type in ("leaf", "op_state", "purge"):
                    self.invalidate()
                return
            kind = rec.type
        if rec.parent_id != prev_leaf:  # written under another entry (branch_with_summary)
            self.invalidate()
            return
        path = self.path_cache
        if path is not None and path[0] == prev_leaf:
            path[1].append(rid)
            self.path_cache = (rid, path[1])
        else:
            self.path_cache = None
        view = self.view
        if view is None or view.leaf != prev_leaf:
            self.view = None
            return
        if kind == "message":
            view.ids.tail.append(rid)
        elif kind == "branch_summary":
            if rec.payload.summary:
                view.ids.tail.append(rid)
        elif kind == "model_change":
            view.model = rec.payload
        elif kind == "thinking_level":
            view.thinking_level = rec.payload.thinking_level
        elif kind in ("compaction", "context_op"):
            self.view = None
            return
        view.leaf = rid

    # -- reading -----------------------------------------------------------------------------

    def unknown(self, entry_id: str) -> NotFoundError:
        return NotFoundError(
            f"Entry '{entry_id}' not found in session '{self.id}'",
            hint=Hint("list_entries", self.id),
        )

    def record(self, entry_id: str, keep: bool = True) -> AnyRecord:
        """The decoded entry. ``keep``: a decoded message replaces its lazy slot (what the
        context reads again and again); walks over the whole session (``tree()``,
        ``entries()``) pass False and go through a bounded cache instead."""
        slot = self.slots.by_id.get(entry_id)  # (a decoded entry: the common case)
        if slot is None:
            slot = self.slots[entry_id]
        if isinstance(slot, LazyMessage):
            cache = self.decoded
            rec = cache.get(entry_id)
            if rec is not None:
                if keep:
                    self.keep_size(slot)
                    self.slots[entry_id] = cache.pop(entry_id)
                return rec
            try:
                rec = slot.decode()
            except Exception as exc:
                self.load_report.corrupt_lines.append((-1, f"entry {entry_id}: {exc}"))
                rec = MessageEntry(
                    id=slot.id,
                    parent_id=slot.parent_id,
                    timestamp=slot.timestamp,
                    message=Message(
                        role="custom", content=[text(f"[unreadable entry {entry_id}]")]
                    ),
                )
                self.keep_size(slot)
                self.slots[entry_id] = rec  # reported once
                return rec
            if keep:
                self.keep_size(slot)
                self.slots[entry_id] = rec
                return rec
            # A bounded cache (oldest out first): a session that showed its whole tree once
            # must not keep every message decoded (480 MB at 100k entries, 4.6 GB at 1M).
            if len(cache) >= DECODED_CACHE:
                cache.popitem(last=False)  # O(1); a plain dict's next(iter()) is not
            cache[entry_id] = rec
            return rec
        return slot

    def decode_messages(self, entry_ids: Sequence[str]) -> None:
        """Decode the lazy messages among ``entry_ids`` together (a context materializing a
        chunk): one read per span of the file instead of one per message. They replace their
        slots, as :meth:`record` does; a line that does not decode is left to it."""
        slots = self.slots
        lazy = slots.to_decode(entry_ids)
        if len(lazy) < 2:
            return
        cache = self.decoded
        by_id = slots.by_id
        rows = slots.rows()
        for slot, rec in zip(lazy, decode_run(lazy), strict=True):
            # still lazy (an id given twice is replaced once)
            if rec is not None and isinstance(by_id.get(slot.id, slot), LazyMessage):
                if slot.id not in rows:  # (the index's messages: their row knows it)
                    self.sizes.setdefault(slot.id, slot._end - slot._start)
                by_id[slot.id] = rec
                if cache:
                    cache.pop(slot.id, None)

    def size(self, entry_id: str) -> int:
        """The length of a record's line (0 for an unknown id). ``sizes`` holds it for the
        records of a parsed log, decoded at load or written since; the index's messages have
        theirs in its columns (an open through it inserts none)."""
        n = self.sizes.get(entry_id)
        if n is None:
            slot = self.slots.by_id.get(entry_id)
            n = slot.size if isinstance(slot, LazyMessage) else self.slots.size(entry_id)
        return n

    def keep_size(self, slot: LazyMessage) -> None:
        """A lazy message of a parsed log is about to be replaced by its record: its size stays
        in ``sizes`` (the index's messages keep theirs in its columns)."""
        if slot.id not in self.slots.rows():
            self.sizes.setdefault(slot.id, slot.size)

    def payload(self, entry_id: str) -> Any:
        return self.record(entry_id).payload

    def path_ids(self, leaf_id: str | None = None) -> list[str]:
        """Entry ids from the root to ``leaf_id`` (default: the current leaf)."""
        if leaf_id is None:
            cached = self.path_cache
            if cached is not None and cached[0] == self.leaf:
                return list(cached[1])
            ids = self.tree.path(self.leaf)
            self.path_cache = (self.leaf, ids)
            return list(ids)
        if leaf_id not in self.slots:
            raise self.unknown(leaf_id)
        return self.tree.path(leaf_id)

    def context(
        self,
        leaf_id: str | None = None,
        active_tags: Iterable[str] | None = None,
        *,
        markers: bool = True,
    ) -> Context:
        """What the model sees at ``leaf_id`` (default: the current leaf), DESIGN §5;
        ``markers=False`` leaves the revise/snip markers out (not cached)."""
        tags = frozenset(active_tags or ())
        if leaf_id is not None and leaf_id not in self.slots:
            raise self.unknown(leaf_id)
        leaf = self.leaf if leaf_id is None else leaf_id
        if not markers:
            path = self.path_ids() if leaf == self.leaf else self.tree.path(leaf)
            bare = build_view(self, path, tags, markers=False)
            return Context(bare.ids, self, bare.model, bare.thinking_level, leaf)
        view = self.view
        if view is None or view.leaf != leaf or view.active_tags != tags:
            if self.tree.lazy:  # on an index's columns: runs of messages, never a path list
                view = build_view(self, (), tags, runs=self.tree.path_runs(leaf), leaf=leaf)
            else:
                path = self.path_ids() if leaf == self.leaf else self.tree.path(leaf)
                view = build_view(self, path, tags)
            if leaf == self.leaf:
                self.view = view
        return Context(view.ids, self, view.model, view.thinking_level, leaf)

    def message_for_view_id(self, view_id: str) -> Message:
        kind = self.types.named.get(view_id)  # (inline EntryTypes.get: once per message)
        if kind is None and view_id in self.tree:
            kind = "message"
        if kind == "message":
            rec = self.record(view_id)
            if isinstance(rec, PurgedEntry):  # purged, but its purge record was lost
                return Message(role="custom", content=[text(f"[purged entry {view_id}]")])
            assert isinstance(rec, MessageEntry)  # its type was indexed as "message"
            return rec.message
        if kind == "compaction":
            return Message(role="compactionSummary", content=[text(self.payload(view_id).summary)])
        if kind == "branch_summary":
            return Message(role="branchSummary", content=[text(self.payload(view_id).summary)])
        from threadline.operations import synthetic_message

        return synthetic_message(self, view_id)

    def view_item(self, view_id: str) -> ViewItem:
        kind = self.types.get(view_id)
        tags = list(self.message_tags.get(view_id, ()))
        if kind is not None:
            return ViewItem(
                id=view_id, kind=kind, entry_id=view_id, tags=tags, op_id=self.members.get(view_id)
            )
        mark = self.markers.get(view_id)
        if mark is not None:
            return ViewItem(
                id=view_id,
                kind="marker",
                entry_id=mark.op_id,
                tags=tags,
                op_id=mark.op_id,
                hidden=mark.hidden,
                expanded=mark.expanded,
            )
        return ViewItem(id=view_id, kind="synthetic", entry_id=view_id.rsplit(":", 1)[0], tags=tags)

    def build_view(self, path: list[str], active_tags: frozenset[str]) -> ViewState:
        """The view over ``path`` (root .. leaf ids), uncached (DESIGN §5)."""
        return build_view(self, path, active_tags)

    def move_leaf(self, target: str | None) -> None:
        """Durably move the leaf to ``target`` (``None``: before the first entry)."""
        if target is not None and target not in self.slots:
            raise self.unknown(target)
        self.write("leaf", Leaf(target_id=target), tree=False)

    def reload(self) -> None:
        """Re-read the log from the store (after a rewrite), keeping the writer lock."""
        writer = self.writer
        self.load(self.store, self.log, self.log.load(), read_only=self.read_only)
        self.writer = writer
        self.behind = False
        self.pending_leaf = None

    def release(self) -> None:
        """Give the writer lock up; the indexes stay readable."""
        if not self.closed:
            self.closed = True
            self.log.release()
            self.writer = False
