"""From a path to what the model sees (DESIGN §5).

:func:`build_view` turns the path from the root to a leaf into the ordered ids of the view:
entry ids for messages, the compaction entry's id for its summary, the branch-summary entry's id
for its summary, and ``<op_id>:<n>`` for messages that context operations synthesize. A
:class:`Context` resolves those ids to messages lazily, so building one for a 100,000-entry
session costs a walk of ids, and decoding happens only for the messages a caller reads.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, overload

import msgspec

from threadline.model.content import Message
from threadline.model.entries import ModelChange
from threadline.store.base import bulk_load

if TYPE_CHECKING:
    from threadline.model.tree import Run
    from threadline.state import SessionState


class ViewItem(msgspec.Struct, frozen=True, kw_only=True):
    """Where message ``i`` of a context came from."""

    id: str  # entry id, compaction / branch-summary entry id, or "<op_id>:<n>"
    kind: str  # "message" | "compaction" | "branch_summary" | "synthetic"
    entry_id: str | None  # the tree entry behind it (the op entry for synthetic messages)
    tags: list[str] = msgspec.field(default_factory=list)
    # markers (kind "marker"): the op they belong to and how many originals it hides or, when
    # expanded, shows; messages shown by an expanded op carry that op's id too
    op_id: str | None = None
    hidden: int | None = None
    expanded: bool | None = None


_CHUNK = 2048

Piece = tuple[Sequence[str], int, int]
"""``(ids, lo, hi)``: the ids ``ids[lo:hi]`` (``hi > lo``), taken by reference."""


class ViewIds(Sequence[str]):
    """The ids of a view: runs of ids held by reference (pieces of an index's id column, or of
    any sequence), then :attr:`tail`, a list that appends extend.

    A list of 990,000 ids costs a reference count per id on a string scattered in memory, so
    building it cost more per id the longer the session; the pieces of a path cost per run.
    Reading by position bisects the pieces; slices, :meth:`between` and iteration copy only the
    part asked for; :meth:`tolist` is the plain list."""

    __slots__ = ("_ends", "_pieces", "base", "tail")

    def __init__(self, pieces: Iterable[Piece] = (), tail: list[str] | None = None) -> None:
        self._pieces = [p for p in pieces if p[2] > p[1]]
        self._ends = list(accumulate(hi - lo for _, lo, hi in self._pieces))
        self.base = self._ends[-1] if self._ends else 0  # how many ids the pieces hold
        self.tail: list[str] = [] if tail is None else tail

    @property
    def pieces(self) -> list[Piece]:
        """The runs before :attr:`tail` (shared: do not modify)."""
        return self._pieces

    def append(self, entry_id: str) -> None:
        self.tail.append(entry_id)

    def __len__(self) -> int:
        return self.base + len(self.tail)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return self.sliced(i, len(self))
        if i < 0:
            i += len(self)
        if i >= self.base:
            if i - self.base >= len(self.tail):
                raise IndexError("view index out of range")
            return self.tail[i - self.base]
        if i < 0:
            raise IndexError("view index out of range")
        k = bisect.bisect_right(self._ends, i)
        seq, _, hi = self._pieces[k]
        return seq[hi - (self._ends[k] - i)]

    def sliced(self, i: slice, n: int) -> list[str]:
        """``self[:n][i]``, copying only the ids asked for."""
        r = range(n)[i]
        if r.step == 1:
            return self.between(r.start, max(r.start, r.stop))
        return [self[j] for j in r]

    def between(self, start: int, stop: int) -> list[str]:
        """The ids at positions ``start`` .. ``stop - 1`` (``0 <= start <= stop <= len``)."""
        if start >= self.base:
            return self.tail[start - self.base : stop - self.base]
        out: list[str] = []
        ends, pieces = self._ends, self._pieces
        k = bisect.bisect_right(ends, start)
        while k < len(pieces) and start < stop:
            seq, _, hi = pieces[k]
            first = hi - (ends[k] - start)  # where ``start`` falls in this piece
            take = min(hi, first + stop - start)
            out += seq[first:take]
            start += take - first
            k += 1
        if stop > start:
            out += self.tail[start - self.base : stop - self.base]
        return out

    def __iter__(self) -> Iterator[str]:
        for seq, lo, hi in self._pieces:
            yield from seq[lo:hi]
        yield from self.tail

    def __contains__(self, entry_id: object) -> bool:
        if not isinstance(entry_id, str):
            return False
        try:
            self.index(entry_id)
        except ValueError:
            return False
        return True

    def index(self, entry_id: str, start: int = 0, stop: int | None = None) -> int:
        """The first position of ``entry_id`` in ``start`` .. ``stop - 1``; a C-speed scan
        per piece. Raises ``ValueError`` when it is not there."""
        bounds = range(len(self))[start:stop]  # negative and out-of-range bounds as a slice's
        start, stop = bounds.start, bounds.stop
        at = 0
        for seq, lo, hi in [*self._pieces, (self.tail, 0, len(self.tail))]:
            a, b = max(start - at, 0), min(stop - at, hi - lo)
            if a < b:
                with contextlib.suppress(ValueError):
                    return at + seq.index(entry_id, lo + a, lo + b) - lo
            at += hi - lo
        raise ValueError(f"{entry_id!r} is not in the view")

    def tolist(self, n: int | None = None) -> list[str]:
        """The first ``n`` ids (default: all) as a new list."""
        return self.between(0, len(self) if n is None else n)

    def __repr__(self) -> str:
        return f"<{len(self)} view ids in {len(self._pieces)} runs and a tail of {len(self.tail)}>"


class _Lazy(Sequence[Message]):
    __slots__ = ("_ids", "_n", "_prefetch", "_resolve")

    def __init__(
        self,
        ids: ViewIds,
        n: int,
        resolve: Callable[[str], Message],
        prefetch: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self._ids, self._n, self._resolve, self._prefetch = ids, n, resolve, prefetch

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return [self._resolve(x) for x in self._ids.sliced(i, self._n)]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("message index out of range")
        return self._resolve(self._ids[i])

    def __iter__(self) -> Iterator[Message]:
        # Decode a chunk at a time with the cyclic GC paused (it was half of materializing a
        # big context), and never across a yield: the caller's code runs with GC on.
        resolve, prefetch = self._resolve, self._prefetch
        ids = self._ids
        for lo in range(0, self._n, _CHUNK):
            part = ids.between(lo, min(lo + _CHUNK, self._n))
            with bulk_load():
                if prefetch is not None:
                    prefetch(part)  # the chunk's messages decoded together (fewer reads)
                chunk = [resolve(x) for x in part]
            yield from chunk

    def __repr__(self) -> str:
        return f"<{self._n} messages>"


class _View(Sequence[ViewItem]):
    __slots__ = ("_ids", "_item", "_n")

    def __init__(self, ids: ViewIds, n: int, item: Callable[[str], ViewItem]) -> None:
        self._ids, self._n, self._item = ids, n, item

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> ViewItem: ...
    @overload
    def __getitem__(self, i: slice) -> list[ViewItem]: ...
    def __getitem__(self, i: int | slice) -> ViewItem | list[ViewItem]:
        if isinstance(i, slice):
            return [self._item(x) for x in self._ids.sliced(i, self._n)]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("view index out of range")
        return self._item(self._ids[i])

    def __iter__(self) -> Iterator[ViewItem]:
        return map(self._item, self._ids.tolist(self._n))

    def ids(self) -> list[str]:
        """The view's ids, as a new list."""
        return self._ids.tolist(self._n)


class Context:
    """What the model sees at a leaf: ``messages``, ``model``, ``thinking_level``, ``view``.

    ``messages`` and ``view`` are sequences (not lists) that decode on access;
    ``list(ctx.messages)`` materializes them. A context does not change when the session
    grows afterwards.
    """

    __slots__ = ("leaf_id", "messages", "model", "thinking_level", "view")

    def __init__(
        self,
        ids: ViewIds,
        session: SessionState,
        model: ModelChange | None,
        thinking_level: str,
        leaf_id: str | None,
    ) -> None:
        n = len(ids)
        self.messages: Sequence[Message] = _Lazy(
            ids, n, session.message_for_view_id, session.decode_messages
        )
        self.view: _View = _View(ids, n, session.view_item)
        self.model = model
        self.thinking_level = thinking_level
        self.leaf_id = leaf_id

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return (
            f"Context({len(self.messages)} messages, model={self.model!r}, "
            f"thinking_level={self.thinking_level!r})"
        )


class ViewState:
    """The cached view at one leaf; extended in place on appends (ids only ever grow: an
    append goes to ``ids.tail``)."""

    __slots__ = ("active_tags", "ids", "leaf", "model", "thinking_level")

    def __init__(
        self,
        leaf: str | None,
        active_tags: frozenset[str],
        ids: ViewIds,
        model: ModelChange | None,
        thinking_level: str,
    ) -> None:
        self.leaf = leaf
        self.active_tags = active_tags
        self.ids = ids
        self.model = model
        self.thinking_level = thinking_level


def build_view(
    session: SessionState,
    path: Sequence[str],
    active_tags: frozenset[str],
    *,
    markers: bool = True,
    runs: Sequence[Run] | None = None,
    leaf: str | None = None,
) -> ViewState:
    """Steps 1-4 of DESIGN §5 over ``path`` (root .. leaf entry ids), in one pass.

    ``markers=False`` leaves the revise/snip markers out (a bare payload). ``runs``: instead
    of ``path``, the same path in runs (``TreeIndex.path_runs``) and its ``leaf``: a plain run
    (consecutive messages) is taken whole, by reference: the view is the path's runs from the
    latest compaction on (:class:`ViewIds`), made a list only when purges or context
    operations rewrite it."""
    special = session.special  # the few non-message entries; everything else is a message
    types = session.types
    model: ModelChange | None = None
    thinking = "off"
    last_compaction: str | None = None
    op_ids: list[str] = []
    ids: list[str] = []  # entries that become messages, in path order
    seen_at: dict[str, int] = {}  # len(ids) when each non-message entry was passed
    purged = session.purged

    def passed(eid: str) -> bool:
        """Take in a non-message entry; True when it becomes a message of the view."""
        nonlocal model, thinking, last_compaction
        if eid in purged:  # a purged summary, model change, op…: its payload is gone
            return False
        t = types[eid]
        if t == "branch_summary":
            return bool(session.payload(eid).summary)  # empty summaries are skipped
        if t == "compaction":
            last_compaction = eid
        elif t == "model_change":
            model = session.payload(eid)
        elif t == "thinking_level":
            thinking = session.payload(eid).thinking_level
        elif t == "context_op":
            op_ids.append(eid)
        return False

    if runs is None:
        leaf = path[-1] if path else None
        append = ids.append
        for eid in path:
            if eid not in special:
                append(eid)
                continue
            seen_at[eid] = len(ids)
            if passed(eid):
                append(eid)
        if last_compaction is not None:
            start = _kept_from(session, last_compaction, seen_at, ids.index)
            ids = [last_compaction, *ids[start:]]
    else:
        # the view's entries as pieces (ids, lo, hi): runs of the columns' ids, or lists
        parts: list[tuple[Sequence[str], int, int]] = []
        n = 0
        single: list[str] | None = None  # the list piece being filled
        for seq, lo, hi, plain in runs:
            if plain:
                if hi > lo:
                    parts.append((seq, lo, hi))
                    n += hi - lo
                    single = None
                continue
            for eid in seq[lo:hi]:
                if eid in special:
                    seen_at[eid] = n
                    if not passed(eid):
                        continue
                if single is None:
                    single = []
                    parts.append((single, 0, -1))
                single.append(eid)
                n += 1
        parts = [(seq, lo, len(seq) if hi < 0 else hi) for seq, lo, hi in parts]
        start = 0
        pieces: list[Piece] = []
        if last_compaction is not None:
            near = seen_at[last_compaction]
            start = _kept_from(session, last_compaction, seen_at, lambda x: _find(parts, x, near))
            pieces.append(([last_compaction], 0, 1))
        for seq, lo, hi in parts:  # the view: the path from ``start`` on
            k = hi - lo
            if start >= k:
                start -= k
                continue
            pieces.append((seq, lo + start, hi))
            start = 0
        if not purged and not op_ids:
            return ViewState(leaf, active_tags, ViewIds(pieces), model, thinking)
        ids = ViewIds(pieces).tolist()
    if purged:
        ids = [x for x in ids if x not in purged]
        ids = _drop_orphaned_tool_partners(session, ids)
    if op_ids:
        from threadline.operations import apply_operations

        ids = apply_operations(session, ids, op_ids, active_tags)
        if not markers:
            from threadline.operations import is_marker

            ids = [x for x in ids if not is_marker(session, x)]
    return ViewState(leaf, active_tags, ViewIds(tail=ids), model, thinking)


def _kept_from(
    session: SessionState,
    compaction: str,
    seen_at: dict[str, int],
    index: Callable[[str], int],
) -> int:
    """Where the view starts after the latest compaction: at its first kept entry (or, when
    that is not on the path, after the compaction); ``index`` finds a message on the path."""
    start = seen_at[compaction]
    first_kept = session.payload(compaction).first_kept_entry_id
    if first_kept is not None and first_kept != compaction:
        if first_kept in seen_at:
            start = seen_at[first_kept]
        elif first_kept not in session.special:
            with contextlib.suppress(ValueError):  # not on this path: keep the default
                start = index(first_kept)
    return start


def _find(parts: list[tuple[Sequence[str], int, int]], entry_id: str, near: int) -> int:
    """The position of ``entry_id`` among the pieces, searched outwards from position
    ``near`` (a compaction keeps the entries just before it): one C-speed scan per piece."""
    offsets: list[int] = []
    n = 0
    for _, lo, hi in parts:
        offsets.append(n)
        n += hi - lo
    at = max(0, bisect.bisect_right(offsets, near) - 1)
    order: list[int] = [*range(at, -1, -1), *range(at + 1, len(parts))]
    for i in order:
        seq, lo, hi = parts[i]
        try:
            pos: int = seq.index(entry_id, lo, hi)
        except ValueError:
            continue
        return offsets[i] + pos - lo
    raise ValueError(entry_id)


def _drop_orphaned_tool_partners(session: SessionState, ids: list[str]) -> list[str]:
    """A tool call or result whose partner was purged leaves the view with it."""
    calls: dict[str, str] = {}
    results: dict[str, str] = {}
    for vid in ids:
        msg = session.message_for_view_id(vid)
        for b in msg.tool_uses:
            calls[b.id] = vid
        for r in msg.tool_results:
            results[r.tool_use_id] = vid
    last = ids[-1] if ids else None  # a pending call at the end is legitimate
    drop = {vid for cid, vid in calls.items() if cid not in results and vid != last}
    drop |= {vid for rid, vid in results.items() if rid not in calls}
    return [v for v in ids if v not in drop] if drop else ids
