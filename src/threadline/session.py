"""Session: the public API over one session's log (DESIGN §4, §5, §10).

A session is an append-only tree of entries. Appending a tree entry makes it a child of the
current leaf and moves the leaf to it; navigation (``branch``, ``reset_leaf``) appends a ``leaf``
meta record, so it survives a reopen. Nothing is ever deleted except by :meth:`Session.purge`.

The first write takes the store's writer lock (``SessionLockedError`` when another writer holds
it) and first reads what other writers appended since the load, so parent ids are never stale.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import msgspec

from threadline import bookmarks as _bookmarks
from threadline import history as _history
from threadline import operations as _operations
from threadline import repair as _repair
from threadline.bookmarks import TagEvent, TagImport, TagListing, TagStatus, UndoResult
from threadline.context import Context
from threadline.errors import StoreError, UserError
from threadline.history import PurgePlan
from threadline.model.content import (
    ROLES,
    Message,
    Text,
    TextBlock,
    Usage,
    coerce_content,
    unknown_role,
)
from threadline.model.entries import (
    RECORD_CLASSES,
    AnyRecord,
    BookmarkRecord,
    BranchSummary,
    Compaction,
    Custom,
    KnownRecord,
    Label,
    LabelEntry,
    ModelChange,
    PurgedEntry,
    SessionHeader,
    SessionInfo,
    ThinkingLevel,
    UnknownRecord,
    encode,
    encode_record,
    new_id,
    now,
)
from threadline.model.limits import check_record, check_value, encode_checked
from threadline.model.tree import TreeIndex
from threadline.operations import OperationInfo
from threadline.repair import Repair
from threadline.state import AT_LEAF, SessionState
from threadline.store.base import (
    NO_PARENT,
    BaseStore,
    LazyMessage,
    Loaded,
    LoadReport,
    Log,
    bulk_load,
    check_session_id,
    not_found,
)


class TreeNode(msgspec.Struct, kw_only=True, gc=False):
    """A node of :meth:`Session.tree`: the entry, its children (ordered), its label.

    ``entry`` is decoded when it is first read (a message's content is only decoded for the
    nodes a caller looks at), so building the tree of a large session links ids and decodes
    nothing; decoding goes through the session's bounded cache, under its lock. Nodes are not
    tracked by the cyclic garbage collector (they hold no cycles), so a 1M-node tree costs no
    collection passes."""

    _entry: Any = None  # the entry, or its id until read
    _load: Session | None = None  # the session to read it from
    children: list[TreeNode] = msgspec.field(default_factory=list)
    label: str | None = None

    @property
    def entry(self) -> Any:
        session = self._load
        if session is not None:
            self._entry = session._walked_entry(self._entry)
            self._load = None
        return self._entry

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeNode):
            return NotImplemented
        return (self.entry, self.label, self.children) == (other.entry, other.label, other.children)

    def __repr__(self) -> str:
        return f"TreeNode(entry={self.entry!r}, children={self.children!r}, label={self.label!r})"


class FlatNode(msgspec.Struct, kw_only=True):
    """One node of ``tree(flat=True)``; every JSON output of a tree uses this form."""

    entry: Any
    parent_id: str | None
    children: list[str]
    depth: int
    label: str | None = None


class EntryMeta(msgspec.Struct, kw_only=True):
    """Per-entry metadata without the content, with the wrapped-chat-history seed's fields:
    ``id``, ``ts``, ``type`` and ``size`` (bytes).

    ``type`` is the *content* type for a message (``input_text``, ``output_text``, ``reasoning``,
    ``function_call``, ``function_call_output``, ``message``; ``purged`` once purged) and the
    entry type for anything else (``compaction``, ``label``, …); ``entry_type`` is always the
    entry type. ``timestamp`` repeats ``ts`` under the file format's name."""

    id: str
    ts: str
    type: str
    size: int
    timestamp: str
    entry_type: str
    parent_id: str | None = None


_NO_ENTRY = object()
_P = ParamSpec("_P")
_R = TypeVar("_R")


def serialized(
    method: Callable[Concatenate[Session, _P], _R],
) -> Callable[Concatenate[Session, _P], _R]:
    """Run a Session method under the session's lock (DESIGN §3, threads): appends from
    several threads serialize, each parents to the leaf at the moment it is written, and a
    reader never sees a half-applied append. The lock is reentrant (methods call each other)."""

    def locked(self: Session, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        state = self._state
        with state.lock:
            if state.behind:  # a shared session's appends left records unread
                state.catch_up()
            return method(self, *args, **kwargs)

    functools.update_wrapper(locked, method)
    return locked


class Session:
    """One conversation tree. Get one from a store: ``store.create()``, ``store.open(id)``.

    Every public method is declared here. The bookkeeping lives in one :class:`SessionState`
    (:attr:`state`), which the view modules (``context``, ``operations``, ``bookmarks``,
    ``history``, ``compaction``) work on; the methods below delegate to them.
    """

    __slots__ = ("__weakref__", "_state")

    def __init__(
        self,
        store: BaseStore | None,
        log: Log,
        loaded: Loaded,
        *,
        read_only: bool = False,
        shared: bool = False,
    ) -> None:
        self._state = SessionState(store, log, loaded, read_only=read_only, shared=shared)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the writer lock (if held). The session can still be read afterwards."""
        with self._state.lock:  # serialized, without reading what shared appends left unread
            self._state.release()

    def __enter__(self) -> Session:
        return self

    @contextlib.contextmanager
    def batch(self) -> Iterator[Session]:
        """Group commit: appends inside the block are written at once (readers see them) and
        made durable together with one sync when the block exits; they are acknowledged then,
        not before. If the final sync fails, none of the block's entries is kept and StoreError
        is raised (the session reads its log again). Blocks nest (the outermost syncs). On
        stores whose appends are each durable on their own (SQLite, PostgreSQL, memory) the
        block changes nothing."""
        state = self._state
        state.ensure_writer()
        try:
            with state.log.batch():
                yield self
        except StoreError:
            writer = state.writer
            state.load(state.store, state.log, state.log.load(), read_only=state.read_only)
            state.writer = writer
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            state = self._state
            if state.writer:
                state.log.release()
        except Exception:  # interpreter shutdown: the OS drops the flock with the descriptor
            pass

    def __repr__(self) -> str:
        state = self.state
        return f"<Session {self.id} entries={len(state.tree)} leaf={state.leaf}>"

    @property
    def state(self) -> SessionState:
        """The indexes behind this session, shared with the view modules (internal: its
        attributes may change between releases; use the methods of Session)."""
        state = self._state
        if state.behind:  # a shared session's appends left records unread
            with state.lock:
                if state.behind:
                    state.catch_up()
        return state

    @property
    def store(self) -> BaseStore | None:
        """The store this session lives in (``None`` for a detached session)."""
        return self._state.store

    @property
    def id(self) -> str:
        """The session id (the header's ``id``)."""
        return self._state.id

    @property
    def header(self) -> SessionHeader:
        """The session header (id, version, timestamp, parent_session, cwd, metadata)."""
        return self._state.header

    @property
    def load_report(self) -> LoadReport:
        """What the load skipped or repaired (corrupt lines, duplicates, orphans, …)."""
        return self._state.load_report

    @property
    def read_only(self) -> bool:
        """True when opened with ``read_only=True``: every write raises ``UserError``."""
        return self._state.read_only

    @property
    def shared(self) -> bool:
        """True when opened with ``shared=True`` (:meth:`threadline.Store.open`)."""
        return self._state.shared

    @property
    def leaf_id(self) -> str | None:
        """The current leaf (``None`` before the first entry or after ``reset_leaf``)."""
        return self.state.leaf

    @property
    def name(self) -> str | None:
        """The latest ``session_info`` name."""
        return self.state.name

    # -- writing -----------------------------------------------------------------------------

    @serialized
    def raw_lines(self) -> list[bytes]:
        """Every stored record as its encoded line, header excluded (what a fork copies)."""
        return list(self._state.log.raw_lines())

    @serialized
    def append(
        self, record: KnownRecord | dict[str, Any], *, parent_id: str | object | None = AT_LEAF
    ) -> str:
        """Append one tree entry given whole (a record, or a dict in the file's shape, DESIGN §2)
        as a child of the current leaf, unless ``parent_id`` is given (``None``: a new root); a
        dict's own ``"parent_id"`` key counts as given. The id and timestamp are generated when
        absent; returns the entry id."""
        if isinstance(record, dict):
            raw = dict(record)
            if "parent_id" in raw and parent_id is AT_LEAF:
                parent_id = raw["parent_id"]
            raw.setdefault("id", new_id())
            raw.setdefault("timestamp", now())
            raw["parent_id"] = None
            try:
                rec: Any = msgspec.convert(raw, RECORD_CLASSES[raw.get("type", "")])
            except (KeyError, msgspec.ValidationError) as exc:
                raise UserError(
                    f"Record {raw!r:.80} is not a known tree entry ({exc}); see "
                    "DESIGN §2 for the record shapes"
                ) from None
        else:
            rec = record
        if not rec.tree:
            raise UserError(
                f"append() takes tree entries; a {rec.type!r} record is written by "
                "its own method (branch, tag, toggle, …)"
            )
        st = self._state
        if rec.id in st.slots:
            raise UserError(f"Entry id '{rec.id}' already exists in session '{self.id}'")
        first = not st.writer
        if first and parent_id is AT_LEAF:
            st.ensure_writer()  # the lock first: another writer may have moved the leaf
        parent = st.leaf if parent_id is AT_LEAF else parent_id
        if parent is not None and parent not in st.slots:
            raise st.unknown(str(parent))
        rec = msgspec.structs.replace(rec, parent_id=parent)
        self._append_records([rec], first)
        return str(rec.id)

    @serialized
    def append_records(self, records: Sequence[KnownRecord]) -> list[str]:
        """Append prepared records as they are (ids, parents, timestamps kept): the importers'
        and copiers' path. All are validated before anything is written; one durable batch."""
        if not records:
            return []
        return self._append_records(records, not self._state.writer)

    def _append_records(self, records: Sequence[KnownRecord], first: bool) -> list[str]:
        st = self._state
        st.ensure_writer()
        lines = []
        slots = st.slots
        seen: set[str] = set()  # this batch's ids (the session's are in slots: no copy of them)
        for rec in records:
            if rec.tree and (rec.id in seen or rec.id in slots):
                raise UserError(f"Entry id '{rec.id}' already exists in session '{self.id}'")
            seen.add(rec.id)
            line = encode_checked(encode, rec)
            check_record(rec.payload, line, 1 if rec.parent_id is None else 0)
            lines.append(line)
        st.append_lines(lines, first, records)
        for rec, line in zip(records, lines, strict=True):
            st.sizes[rec.id] = len(line)
        # a chain of tree entries under the leaf (a framework adapter's turn) keeps the context
        # incremental, as single appends do; anything else is re-indexed
        tip = st.leaf
        chain = True
        for rec in records:
            if not rec.tree or rec.parent_id != tip:
                chain = False
                break
            tip = rec.id
        if chain:
            for rec in records:
                st.after_write(rec)
        else:
            st.ingest(records)
            st.settle(records)
            st.invalidate()
        if first and st.shared:  # a shared session holds the lock for one write at a time
            st.release()
        return [r.id for r in records]

    def append_message(
        self,
        role: str | Message,
        content: Any = None,
        *,
        model: str | None = None,
        usage: Usage | dict[str, int] | None = None,
        stop_reason: str | None = None,
        provider_details: dict[str, Any] | None = None,
        parent_id: str | object | None = AT_LEAF,
    ) -> str:
        """Append a message as a child of the leaf (or of ``parent_id`` when given; ``None``
        starts a new root); the leaf moves to it. Returns its entry id.

        ``role`` is a role name (``user``, ``assistant``, ``tool``, ``system``, …) with ``content``
        as a string, blocks, dicts in the file format's shape or provider-shaped dicts
        (``[{"type": "text", "text": "x"}]``, Anthropic tool blocks, Gemini parts), or a whole
        :class:`Message`.
        """
        # serialized like every method, by hand: the decorator's forwarding of *args and
        # **kwargs costs a tenth of a small append
        with self._state.lock:
            if parent_id is not AT_LEAF and self._state.behind:
                self._state.catch_up()
            if (
                parent_id is not AT_LEAF
                and parent_id is not None
                and parent_id not in self._state.slots
            ):
                raise self._state.unknown(str(parent_id))
            if isinstance(role, Message):
                msg = role
                if msg.role not in ROLES:
                    raise unknown_role(msg.role)
            else:
                if role not in ROLES:
                    raise unknown_role(role)
                if content is None:
                    raise UserError("append_message needs content (a string or a list of blocks)")
                if isinstance(usage, dict):
                    usage = msgspec.convert(usage, Usage)
                msg = Message(
                    role=role,
                    # a string: one text block (coerce_content would make it, in three calls)
                    content=[TextBlock(text=Text(content=content))]
                    if content.__class__ is str
                    else coerce_content(content),
                    model=model,
                    usage=usage,
                    stop_reason=stop_reason,
                    provider_details=provider_details,
                )
            return self._state.write("message", msg, parent_id=parent_id)

    @serialized
    def append_model_change(self, provider: str, model_id: str) -> str:
        return self._state.write("model_change", ModelChange(provider=provider, model_id=model_id))

    @serialized
    def append_thinking_level(self, level: str) -> str:
        return self._state.write("thinking_level", ThinkingLevel(thinking_level=level))

    @serialized
    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int = 0,
        details: Any = None,
    ) -> str:
        """Record a compaction: the summary replaces the path before ``first_kept_entry_id``."""
        if first_kept_entry_id is not None and first_kept_entry_id not in self._state.slots:
            raise self._state.unknown(first_kept_entry_id)
        return self._state.write(
            "compaction",
            Compaction(
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
            ),
        )

    @serialized
    def append_session_info(self, name: str) -> str:
        return self._state.write("session_info", SessionInfo(name=name))

    @serialized
    def append_custom(self, custom_type: str, data: Any = None) -> str:
        return self._state.write("custom", Custom(custom_type=custom_type, data=data))

    @serialized
    def set_label(self, target_id: str, label: str | None) -> str:
        """Label an entry (session-global; the latest wins). ``""`` or ``None`` clears it."""
        if target_id not in self._state.slots:
            raise self._state.unknown(target_id)
        return self._state.write("label", Label(target_id=target_id, label=label or None))

    @serialized
    def get_label(self, target_id: str) -> str | None:
        return self._state.labels.get(target_id)

    @serialized
    def labels(self) -> dict[str, str]:
        """Every current label, by target entry id."""
        return dict(self._state.labels)

    # -- navigation --------------------------------------------------------------------------

    @serialized
    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append starts a sibling branch there."""
        if entry_id not in self._state.slots:
            raise self._state.unknown(entry_id)
        self._state.move_leaf(entry_id)

    @serialized
    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append starts a new root."""
        self._state.move_leaf(None)

    @serialized
    def branch_with_summary(self, entry_id: str | None, summary: str, details: Any = None) -> str:
        """Branch to ``entry_id`` and append a summary of the abandoned path as its child."""
        if entry_id is not None and entry_id not in self._state.slots:
            raise self._state.unknown(entry_id)
        # One record: a tree entry appended under entry_id becomes the leaf by itself (DESIGN
        # §4), so there is no window where the leaf moved but the summary is missing.
        summary_entry = BranchSummary(summary=summary, from_id=self._state.leaf, details=details)
        return self._state.write("branch_summary", summary_entry, parent_id=entry_id)

    @serialized
    def create_branched_session(self, leaf_id: str | None = None) -> Session:
        """A new session holding the path to ``leaf_id`` (same ids) and the labels on it."""
        if self._state.store is None:
            raise UserError("This session has no store to create the branched session in")
        leaf = self._state.leaf if leaf_id is None else leaf_id
        if leaf is not None and leaf not in self._state.slots:
            raise self._state.unknown(leaf)
        path = self._state.tree.path(leaf)
        on_path = set(path)
        records: list[KnownRecord] = []
        for eid in path:
            rec = self._state.record(eid)
            if rec.type != "label" and not isinstance(rec, (PurgedEntry, UnknownRecord)):
                records.append(rec)
        parent = records[-1].id if records else None
        stamp = now()
        for target in path:
            label = self._state.labels.get(target)
            if label and target in on_path:
                rec = LabelEntry(
                    id=new_id(),
                    parent_id=parent,
                    timestamp=stamp,
                    label=Label(target_id=target, label=label),
                )
                records.append(rec)
                parent = rec.id
        # tags go with the session: those bound to an entry on the path (or to position 0)
        for name, bm in self._state.bookmarks.items():
            if not name.startswith("__") and (bm.target_id is None or bm.target_id in on_path):
                records.append(
                    BookmarkRecord(id=new_id(), parent_id=None, timestamp=stamp, bookmark=bm)
                )
        return create_session(
            self._state.store, parent_session=self.id, cwd=self.header.cwd, records=records
        )

    @serialized
    def entry(self, entry_id: str) -> AnyRecord:
        """The entry with this id (a message, compaction, label, …)."""
        if entry_id not in self._state.slots:
            raise self._state.unknown(entry_id)
        return self._state.record(entry_id)

    @serialized
    def _walked_entry(self, entry_id: str) -> AnyRecord:
        # a tree node's entry, read after tree() returned: through the bounded cache
        return self._state.record(entry_id, False)

    @serialized
    def entry_bytes(self, entry_id: str) -> bytes:
        """The entry as stored: its JSON line without the newline, read without decoding it
        (a cheap test of the raw text before paying for a decode)."""
        state = self._state
        if entry_id not in state.slots:
            raise state.unknown(entry_id)
        slot = state.slots[entry_id]
        return slot.raw() if isinstance(slot, LazyMessage) else encode_record(slot)

    @serialized
    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self._state.slots

    @serialized
    def entries(self) -> list[AnyRecord]:
        """Every tree entry in file order."""
        return [self._state.record(e, False) for e in self._state.slots]

    @serialized
    def entry_ids(self) -> list[str]:
        return list(self._state.slots)

    @serialized
    def children(self, entry_id: str | None) -> list[AnyRecord]:
        """Children of an entry (``None``: the roots), by timestamp then file order."""
        if entry_id is not None and entry_id not in self._state.slots:
            raise self._state.unknown(entry_id)
        return [self._state.record(c) for c in self._state.tree.children(entry_id)]

    @serialized
    def path_ids(self, leaf_id: str | None = None) -> list[str]:
        """Entry ids from the root to ``leaf_id`` (default: the current leaf)."""
        return self._state.path_ids(leaf_id)

    @serialized
    def path(self, leaf_id: str | None = None) -> list[AnyRecord]:
        """Tree entries from the root to ``leaf_id`` (default: the current leaf)."""
        return [self._state.record(e) for e in self.path_ids(leaf_id)]

    @serialized
    def context(
        self,
        leaf_id: str | None = None,
        active_tags: Iterable[str] | None = None,
        *,
        markers: bool = True,
    ) -> Context:
        """What the model sees at ``leaf_id`` (default: the current leaf), DESIGN §5.

        ``markers=False`` leaves out the markers revise and snip put in the view (a bare
        payload); positions always refer to the view with markers."""
        return self._state.context(leaf_id, active_tags, markers=markers)

    @serialized
    def tree(self, flat: bool = False) -> list[TreeNode] | list[FlatNode]:
        """The whole tree: nested :class:`TreeNode` roots, or one :class:`FlatNode` per entry
        in depth-first order with ``flat=True``. Built without recursion."""
        state = self._state
        t = state.tree
        labels = state.labels
        # bulk work: the cyclic GC would walk every node built so far again and again, and
        # nothing built here holds a cycle; decoded messages go through the bounded cache
        with bulk_load():
            if flat:
                return [
                    FlatNode(
                        entry=state.record(eid, False),
                        parent_id=t.parent[eid],
                        children=t.children(eid),
                        depth=depth,
                        label=labels.get(eid),
                    )
                    for eid, depth in t.preorder()
                ]
            return self._linked_tree()

    def _linked_tree(self) -> list[TreeNode]:
        # One pass in file order: each node is linked under its parent's node as it is made,
        # so siblings arrive in file order and a stable sort by time alone gives the tree's
        # order (timestamp, then file order). Nothing is decoded: a node holds its entry's id
        # until .entry is read. An entry written before its parent (rare: imported logs) is
        # linked after the pass, and its siblings are sorted with the file order spelled out.
        t = self._state.tree
        roots: list[TreeNode] = []
        grown: list[list[TreeNode]] = []  # a children list each time it gets one more child
        late: list[tuple[str, TreeNode]] = []
        find: Callable[[str], TreeNode | None]
        if t.columns is None:
            nodes: dict[str, TreeNode] = {}
            self._link_pairs(t.items(), nodes.get, nodes, roots, grown, late)
            find = nodes.get
        else:
            find = self._link_columns(t, roots, grown, late)
        branches = list({id(kids): kids for kids in grown}.values())
        if late:
            for parent, node in late:
                above = find(parent)
                assert above is not None
                above.children.append(node)
        # the time of the entries that have siblings only (the whole column is not merged)
        late_kids = [find(p).children for p in {p for p, _ in late}]  # type: ignore[union-attr]
        sorting = [*branches, roots, *late_kids]
        keys = t.sibling_keys(n._entry for kids in sorting if len(kids) > 1 for n in kids)
        key = keys.__getitem__
        for kids in branches:
            kids.sort(key=lambda n: key(n._entry))
        if len(roots) > 1:
            roots.sort(key=lambda n: key(n._entry))
        if late:
            seq = t.file_order()
            for kids in late_kids:
                if len(kids) > 1:  # (an only child has no time in keys)
                    kids.sort(key=lambda n: (key(n._entry), seq[n._entry]))
        for eid, label in self._state.labels.items():
            labelled = find(eid)
            if labelled is not None:
                labelled.label = label
        return roots

    def _link_pairs(
        self,
        pairs: Iterable[tuple[str, str | None]],
        find: Callable[[str], TreeNode | None],
        nodes: dict[str, TreeNode],
        roots: list[TreeNode],
        grown: list[list[TreeNode]],
        late: list[tuple[str, TreeNode]],
        prev_id: object = _NO_ENTRY,
        prev: TreeNode | None = None,
    ) -> tuple[object, TreeNode | None]:
        """Link the nodes of ``(entry, parent)`` pairs in file order (see :meth:`_linked_tree`);
        returns the last entry's id and node. The parent of most entries is the entry just
        before them: it is taken from there, not looked up (the first entry has none before
        it: a marker no parent equals)."""
        for eid, parent in pairs:
            node = TreeNode(_entry=eid, _load=self)
            nodes[eid] = node
            if parent == prev_id:
                kids = prev.children  # type: ignore[union-attr]
            elif parent is None:
                roots.append(node)
                prev_id, prev = eid, node
                continue
            else:
                above = find(parent)
                if above is None:
                    late.append((parent, node))
                    prev_id, prev = eid, node
                    continue
                kids = above.children
            if kids:  # a second child or more: the list is sorted below
                grown.append(kids)
            kids.append(node)
            prev_id, prev = eid, node
        return prev_id, prev

    def _link_columns(
        self,
        t: TreeIndex,
        roots: list[TreeNode],
        grown: list[list[TreeNode]],
        late: list[tuple[str, TreeNode]],
    ) -> Callable[[str], TreeNode | None]:
        """:meth:`_link_pairs` over a tree still on an index's columns: the messages' nodes in
        a list by row, linked by their parent rows (a run of rows between two breaks is a chain,
        each row under the one before), the entries added since by their pairs. Returns how to
        find an entry's node (None: not made yet)."""
        cols = t.columns
        assert cols is not None
        made: list[TreeNode] = []  # the messages' nodes, by row
        added: dict[str, TreeNode] = {}  # the other entries' nodes
        rows, breaks, named, row_of = cols.rows, cols.breaks, cols.named, cols.row
        pieces = list(t.pieces())
        # the rows of the messages found by id below (the parents of the entries added, the
        # labelled entries), by one scan: the map of every id (Columns.row) costs more
        known = t.column_rows(
            itertools.chain(
                self._state.labels,
                (p for seq, lo, _ in pieces if lo < 0 for _, p in seq if p is not None),
            )
        ).get

        def find(eid: str) -> TreeNode | None:
            node = added.get(eid)
            if node is None:
                r = known(eid)
                if r is None:
                    r = row_of(eid)
                if r is not None and r < len(made):
                    node = made[r]
            return node

        prev_id: object = _NO_ENTRY
        prev: TreeNode | None = None
        for seq, lo, hi in pieces:
            if lo < 0:
                prev_id, prev = self._link_pairs(
                    seq, find, added, roots, grown, late, prev_id, prev
                )
                continue
            if lo == hi:
                continue
            made += [TreeNode(_entry=eid, _load=self) for eid in seq[lo:hi]]
            i = bisect_left(breaks, lo)
            r = lo
            while r < hi:
                b = breaks[i] if i < len(breaks) else hi
                b = min(b, hi)
                if r < b:  # rows r..b-1 each under the row before
                    if r == lo:  # the row before is another piece's: it may have children
                        before = made[r - 1].children
                        if before:
                            grown.append(before)
                        before.append(made[r])
                        r += 1
                    for above, node in zip(made[r - 1 : b - 1], made[r:b], strict=True):
                        above.children.append(node)
                    r = b
                    continue
                node = made[r]  # a break: a row whose parent is not the row before it
                p = rows[r]
                kids: list[TreeNode] | None
                if p >= 0:
                    kids = made[p].children
                elif p == NO_PARENT:
                    roots.append(node)
                    kids = None
                else:
                    parent = named[r]
                    named_above = find(parent)
                    if named_above is None:
                        late.append((parent, node))
                        kids = None
                    else:
                        kids = named_above.children
                if kids is not None:
                    if kids:
                        grown.append(kids)
                    kids.append(node)
                i += 1
                r += 1
            prev_id, prev = seq[hi - 1], made[hi - 1]
        return find

    @serialized
    def metadata(self, *, content_types: bool = True) -> list[EntryMeta]:
        """id, ts, type (the content type of a message), size of every tree entry.

        A message's content type needs its content decoded; ``content_types=False`` skips that
        (``type`` is then the entry type, as ``entry_type`` always is), so a tree layout over a
        large session decodes nothing."""
        from threadline.model.content import content_type

        out = []
        size, parents = self._state.size, self._state.tree.parent
        for eid, slot in self._state.slots.items():
            kind = slot.type
            shown = kind
            if kind == "message" and content_types:
                rec = self._state.record(eid)
                shown = "purged" if isinstance(rec, PurgedEntry) else content_type(rec.payload)
            stamp = slot.timestamp or ""
            out.append(
                EntryMeta(
                    id=eid,
                    ts=stamp,
                    timestamp=stamp,
                    type=shown,
                    entry_type=kind,
                    size=size(eid),
                    parent_id=parents[eid],
                )
            )
        return out

    @serialized
    def stats(self, largest: int = 5) -> dict[str, Any]:
        """Totals, per-type breakdown, time range, size distribution and largest entries."""
        metas = self.metadata()
        by_type: dict[str, dict[str, int]] = {}
        by_content: dict[str, dict[str, int]] = {}
        for m in metas:
            row = by_type.setdefault(m.entry_type, {"count": 0, "bytes": 0})
            row["count"] += 1
            row["bytes"] += m.size
            row = by_content.setdefault(m.type, {"count": 0, "size": 0})
            row["count"] += 1
            row["size"] += m.size
        sizes = sorted(m.size for m in metas)
        buckets = {"<1KB": 0, "1-10KB": 0, "10-100KB": 0, "100KB-1MB": 0, ">=1MB": 0}
        for s in sizes:
            key = (
                "<1KB"
                if s < 1024
                else "1-10KB"
                if s < 10240
                else "10-100KB"
                if s < 102400
                else "100KB-1MB"
                if s < 1048576
                else ">=1MB"
            )
            buckets[key] += 1
        stamps = [m.timestamp for m in metas if m.timestamp]
        top = heapq.nlargest(largest, metas, key=lambda m: m.size)
        ctx = self.context()
        total = sum(sizes)
        return {
            "session_id": self.id,
            "name": self._state.name,
            # the wrapped-chat-history seed's names: entries, size in KB, breakdown by content type
            "total_entries": len(metas),
            "total_size_kb": round(total / 1024, 2),
            "stats_by_type": dict(sorted(by_content.items())),
            "entries": len(metas),
            "bytes": sum(sizes),
            "file_bytes": self._state.log.size(),
            "by_type": dict(sorted(by_type.items())),
            "oldest": min(stamps) if stamps else None,
            "newest": max(stamps) if stamps else None,
            "size_distribution": buckets,
            "median_size": sizes[len(sizes) // 2] if sizes else 0,
            "largest": [{"id": m.id, "type": m.entry_type, "size": m.size} for m in top],
            "branches": sum(1 for e in self._state.slots if len(self._state.tree.children(e)) > 1),
            "leaf_id": self._state.leaf,
            "context_messages": len(ctx.messages),
            "labels": len(self._state.labels),
        }

    @serialized
    def message_count(self) -> int:
        return len(self._state.slots) - len(self._state.types.named)

    # -- bookmarks and undo (threadline.bookmarks, DESIGN §7) --------------------------------

    @serialized
    def tag(self, name: str | None = None, position: int | None = None) -> TagStatus:
        """Bookmark position ``position`` (default: the end of the view) as ``name``."""
        return _bookmarks.tag(self._state, name, position)

    @serialized
    def tags(self) -> TagListing:
        """Every tag with its status, sorted by position; invalid tags are removed and reported."""
        return _bookmarks.tags(self._state)

    @serialized
    def untag(self, name: str) -> None:
        """Remove tag ``name`` (``__session_start__`` cannot be removed)."""
        _bookmarks.untag(self._state, name)

    @serialized
    def undo(self, n: int = 1) -> UndoResult:
        """Move the leaf to just before the n-th last user input message."""
        return _bookmarks.undo(self._state, n)

    @serialized
    def undo_to(self, name: str) -> UndoResult:
        """Restore the view to the position of tag ``name``."""
        return _bookmarks.undo_to(self._state, name)

    @serialized
    def clear(self) -> UndoResult:
        """Start over: the leaf moves before the first entry; nothing is deleted."""
        return _bookmarks.clear(self._state)

    @serialized
    def rename_tag(self, old: str, new: str) -> TagStatus:
        """Rename tag ``old`` to ``new`` (it keeps its entry and position)."""
        return _bookmarks.rename(self._state, old, new)

    @serialized
    def tag_history(self, name: str) -> list[TagEvent]:
        """Every move of tag ``name`` (set, moved, renamed, removed), oldest first."""
        return _bookmarks.history(self._state, name)

    @serialized
    def export_tags(self) -> dict[str, Any]:
        """The session's tags as JSON-ready data (see ``bookmarks.export_tags``)."""
        return _bookmarks.export_tags(self._state)

    @serialized
    def import_tags(self, data: Any, *, replace: bool = False) -> TagImport:
        """Set the tags of an ``export_tags`` document on this session."""
        return _bookmarks.import_tags(self._state, data, replace=replace)

    # -- context operations (threadline.operations, DESIGN §6) -------------------------------

    @serialized
    def digest(
        self,
        start: int,
        end: int,
        summary: str,
        *,
        tags: Iterable[str] | None = None,
        active_tags: Iterable[str] | None = None,
    ) -> str:
        """Replace positions ``start``..``end`` (inclusive) with one ``system`` message holding
        ``summary``. Returns the op id."""
        return _operations.digest(
            self._state, start, end, summary, tags=tags, active_tags=active_tags
        )

    @serialized
    def revise(
        self,
        start: int,
        end: int,
        replacements: Iterable[Any],
        *,
        tags: Iterable[str] | None = None,
        active_tags: Iterable[str] | None = None,
    ) -> str:
        """Replace positions ``start``..``end`` with ``replacements`` (messages or dicts with
        ``role`` and ``content``). Returns the op id."""
        return _operations.revise(
            self._state, start, end, replacements, tags=tags, active_tags=active_tags
        )

    @serialized
    def snip(
        self,
        start: int,
        end: int,
        *,
        tags: Iterable[str] | None = None,
        active_tags: Iterable[str] | None = None,
    ) -> str:
        """Remove positions ``start``..``end`` from the view (the op stays listed)."""
        return _operations.snip(self._state, start, end, tags=tags, active_tags=active_tags)

    @serialized
    def resequence(
        self,
        new_order: Sequence[int],
        *,
        tags: Iterable[str] | None = None,
        active_tags: Iterable[str] | None = None,
    ) -> str:
        """Reorder a contiguous range of positions (``new_order`` is its permutation)."""
        return _operations.resequence(self._state, new_order, tags=tags, active_tags=active_tags)

    @serialized
    def insert(
        self,
        after: int,
        messages: Iterable[Any],
        *,
        tags: Iterable[str] | None = None,
        active_tags: Iterable[str] | None = None,
    ) -> str:
        """Insert synthetic ``messages`` after position ``after`` (``-1``: at the front)."""
        return _operations.insert(self._state, after, messages, tags=tags, active_tags=active_tags)

    @serialized
    def tag_messages(
        self,
        start: int,
        end: int,
        tags: Iterable[str],
        *,
        remove: bool = False,
        active_tags: Iterable[str] | None = None,
    ) -> int:
        """Add (or remove) message tags on positions ``start``..``end``; not an op."""
        return _operations.tag_messages(
            self._state, start, end, tags, remove=remove, active_tags=active_tags
        )

    @serialized
    def operations(
        self, active_only: bool = False, active_tags: Iterable[str] | None = None
    ) -> list[OperationInfo]:
        """Every op of the session with its state and standing on the current branch."""
        return _operations.operations(self._state, active_only, active_tags)

    @serialized
    def toggle(self, op_id: str, active: bool) -> OperationInfo:
        """Switch an op on or off (session-wide); ``True`` also brings a reverted op back."""
        return _operations.toggle(self._state, op_id, active)

    @serialized
    def revert(self, op_id: str) -> OperationInfo:
        """Switch an op off and mark it reverted."""
        return _operations.revert(self._state, op_id)

    @serialized
    def expand(self, op_id: str) -> OperationInfo:
        """Show the originals of a revise or snip in place, between its markers (the op stays
        active); recorded like ``toggle``."""
        return _operations.expand(self._state, op_id)

    @serialized
    def collapse(self, op_id: str) -> OperationInfo:
        """Hide the originals of an expanded revise or snip again."""
        return _operations.collapse(self._state, op_id)

    # -- purge (threadline.history, DESIGN §3) -----------------------------------------------

    @serialized
    def purge(
        self, entry_ids: Sequence[str] | None = None, *, all: bool = False, dry_run: bool = True
    ) -> PurgePlan:
        """Really delete entries' content from the store (preview unless ``dry_run=False``)."""
        return _history.purge(self._state, entry_ids, all=all, dry_run=dry_run)

    @serialized
    def repair(
        self,
        *,
        apply: bool = False,
        active_tags: Iterable[str] | None = None,
        keep_pending: bool = False,
    ) -> Repair:
        """Answer the context's interrupted tool calls in the log with synthetic results
        (preview unless ``apply=True``; ``keep_pending`` leaves a turn that ends the context
        alone); reversible with :meth:`undo_repair`. See :mod:`threadline.repair`."""
        return _repair.repair(
            self._state, apply=apply, active_tags=active_tags, keep_pending=keep_pending
        )

    @serialized
    def undo_repair(self, op_ids: Iterable[str] | None = None) -> list[str]:
        """Revert repair ops (default: every active one on this branch); returns their ids."""
        return _repair.undo_repair(self._state, op_ids)


def encode_tree_json(nodes: Sequence[FlatNode]) -> bytes:
    return msgspec.json.encode(nodes)


# -- sessions of a backend (threadline.Store calls these) ---------------------------------------


def open_session(
    backend: BaseStore, session_id: str, *, read_only: bool = False, shared: bool = False
) -> Session:
    """Open a session of ``backend``; takes no lock until the first write."""
    check_session_id(session_id)
    if not backend.exists(session_id):
        raise not_found(session_id)
    log = backend.open_log(session_id)
    with bulk_load():
        return Session(backend, log, log.load(), read_only=read_only, shared=shared)


def create_session(
    backend: BaseStore,
    *,
    session_id: str | None = None,
    parent_session: str | None = None,
    cwd: str | None = None,
    metadata: dict[str, Any] | None = None,
    records: Sequence[Any] = (),
) -> Session:
    """Create a session in ``backend``, with prepared records written in one atomic step."""
    sid = check_session_id(session_id) if session_id is not None else new_id()
    header = SessionHeader(
        id=sid,
        version=1,
        timestamp=now(),
        parent_session=parent_session,
        cwd=cwd,
        metadata=metadata,
    )
    check_value(metadata or {}, depth=2)
    lines = []
    for rec in records:
        line = encode_checked(encode, rec)
        check_record(rec.payload, line, 1 if rec.parent_id is None else 0)
        lines.append(line)
    log = backend.create_log(header, lines)
    return Session(backend, log, log.load())


def fork_session(backend: BaseStore, session_id: str) -> Session:
    """A new session holding a copy of every record of ``session_id`` (unknown ones too)."""
    check_session_id(session_id)
    if not backend.exists(session_id):
        raise not_found(session_id)
    src = backend.open_log(session_id)
    loaded = src.load()
    header = SessionHeader(
        id=new_id(),
        version=1,
        timestamp=now(),
        parent_session=session_id,
        cwd=loaded.header.cwd,
        metadata=loaded.header.metadata,
    )
    log = backend.create_log(header, list(src.raw_lines()))
    return Session(backend, log, log.load())
