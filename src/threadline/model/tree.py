"""The tree index: parents, children, paths. Pure, no I/O, never recursive.

Real paths are 100,000 entries deep, so every walk here is a loop. Orphans (unknown parent)
become roots; parent cycles are broken at the entry whose parent reference points forward in the
file. Both are reported, never looped on.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import chain, compress, islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadline.store.base import Columns


def time_key(timestamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp, to order siblings by time whatever the
    precision or offset each was written with (as text, ``…:00Z`` sorts after ``…:00.5Z``).
    An unreadable or missing timestamp sorts last."""
    try:
        dt = datetime.fromisoformat(timestamp)
    except ValueError:
        return math.inf
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _rows_of(ids: Sequence[str], wanted: set[str]) -> Iterator[int]:
    """The rows of ``ids`` that hold one of ``wanted``, picked out by C loops (no bytecode per
    row)."""
    return compress(range(len(ids)), map(wanted.__contains__, ids))


Run = tuple[Sequence[str], int, int, bool]
"""A piece of a path, ``(ids, lo, hi, plain)``: the entries ``ids[lo:hi]``; ``plain`` when they
are consecutive messages of an index's columns (``ids`` is then all of the columns' ids)."""


class TreeIndex:
    """Effective parent of every tree entry, in file order.

    Opened from an index's columns (:meth:`attach`), it keeps the messages' parents as the
    columns' rows and builds no dict: paths walk the rows a run at a time, membership asks the
    columns, and the entries added since (records, appends) wait in ``_tail``. :attr:`parent`,
    the dict of every entry, is built the first time something asks for it (children, file
    order, a whole-tree walk)."""

    __slots__ = (
        "_children",
        "_cols",
        "_parent",
        "_rec_rows",
        "_stamps",
        "_tail",
        "added_ts",
        "cycles",
        "forward",
        "orphans",
    )

    def __init__(self) -> None:
        self._parent: dict[str, str | None] | None = {}  # insertion order is file order
        self._cols: Columns | None = None  # the messages of an index, while _parent is None
        self._tail: dict[str, str | None] = {}  # entries added to the columns, in order
        self._rec_rows: dict[str, int] = {}  # records of the columns -> their parent's row
        # timestamps of the entries added one by one (loads write here directly), and the
        # (ids, timestamps) columns given by add_stamps: both merged on first use of ts
        self.added_ts: dict[str, str] = {}
        self._stamps: list[tuple[Sequence[str], Iterable[str]]] = []
        self.orphans: list[str] = []
        self.cycles: list[str] = []
        self.forward: list[str] = []  # entries whose parent was not yet seen when added
        self._children: dict[str | None, list[str]] | None = None

    def attach(self, cols: Columns) -> None:
        """Take the messages of ``cols`` (clean: distinct, parents before children) as the
        first entries, without a dict of them; only into an empty index."""
        assert not self._parent and not self._tail
        self._parent = None
        self._cols = cols

    @property
    def lazy(self) -> bool:
        """True while the entries are the columns' rows (no :attr:`parent` dict yet)."""
        return self._parent is None

    @property
    def parent(self) -> dict[str, str | None]:
        """The parent of every entry, in file order (built from the columns on first use)."""
        parent = self._parent
        if parent is None:
            parent = self._materialize()
        return parent

    def _materialize(self) -> dict[str, str | None]:
        parent = dict(self.items())  # the columns' runs, their records and the tail, in order
        self._parent = parent
        self._cols = None
        self._tail = {}
        self._rec_rows = {}
        return parent

    def __len__(self) -> int:
        if self._parent is None:
            assert self._cols is not None
            return len(self._cols.ids) + len(self._tail)
        return len(self._parent)

    def __contains__(self, entry_id: object) -> bool:
        if self._parent is None:
            if entry_id in self._tail:
                return True
            assert self._cols is not None
            return isinstance(entry_id, str) and self._cols.row(entry_id) is not None
        return entry_id in self._parent

    def __iter__(self) -> Iterator[str]:
        if self._parent is None:
            return iter(self._in_order())
        return iter(self._parent)

    def items(self) -> Iterable[tuple[str, str | None]]:
        """(entry, parent) of every entry in file order; from the columns (runs of ids and
        parent ids) while :attr:`parent` is not built, without building it."""
        if self._parent is not None:
            return self._parent.items()
        cols = self._cols
        assert cols is not None
        pids = cols.parent_list()
        return chain.from_iterable(
            zip(seq[lo:hi], pids[lo:hi], strict=True) if lo >= 0 else seq
            for seq, lo, hi in self._pieces()
        )

    @property
    def columns(self) -> Columns | None:
        """The columns the messages are read from while the tree is :attr:`lazy`, else None."""
        return self._cols

    def pieces(self) -> Iterator[tuple[Sequence[Any], int, int]]:
        """The entries in file order while the tree is :attr:`lazy`: the columns' ids with the
        rows ``lo:hi`` of a run, or (``lo`` -1) (entry, parent) pairs of the entries added."""
        return self._pieces()

    def column_rows(self, entry_ids: Iterable[str]) -> dict[str, int]:
        """The rows of those of ``entry_ids`` that are messages of the columns (none when the
        tree is not :attr:`lazy`), found by one scan in C loops, with no map of every id."""
        cols = self._cols
        wanted = set(entry_ids)
        if cols is None or not wanted:
            return {}
        ids = cols.ids
        return {ids[r]: r for r in _rows_of(ids, wanted)}

    def _in_order(self) -> list[str]:
        """Every entry id in file order, from the columns (runs of ids, no dict)."""
        out: list[str] = []
        for seq, lo, hi in self._pieces():
            if lo >= 0:
                out += seq[lo:hi]
            else:
                out += [eid for eid, _ in seq]
        return out

    def _pieces(self) -> Iterator[tuple[Sequence[Any], int, int]]:
        """The entries in file order while the tree is on the columns, in pieces: the columns'
        ids with the rows ``lo:hi`` of a run, or (``lo`` -1) (entry, parent) pairs of the tail:
        the columns' tree records in their place (they are the tail's first entries, ingested
        with the columns), then what followed."""
        cols = self._cols
        assert cols is not None
        tail = self._tail
        ids = cols.ids
        prev = m = placed = 0
        for p, rec in zip([*cols.positions, cols.count], [*cols.records, None], strict=True):
            if p > prev:
                k = p - prev
                yield ids, m, m + k
                m += k
            if rec is not None and rec.tree and rec.id is not None and rec.id in tail:
                yield ((rec.id, tail[rec.id]),), -1, -1
                placed += 1
            prev = p + 1
        yield tuple(islice(tail.items(), placed, None)), -1, -1

    def add(
        self,
        entry_id: str,
        parent_id: str | None,
        timestamp: str,
        *,
        known: bool = False,
        row: int | None = None,
    ) -> None:
        """Add an entry; during a load call :meth:`settle` once all entries are in.
        ``known``: its parent is known to be in already. ``row``: (a record of the columns)
        the row of its parent message."""
        if self._parent is None:
            if not known and parent_id is not None and parent_id not in self:
                self.forward.append(entry_id)
            self._tail[entry_id] = parent_id
            if row is not None:
                self._rec_rows[entry_id] = row
            self.added_ts[entry_id] = timestamp
            return
        parent = self._parent
        if not known and parent_id is not None and parent_id not in parent:
            self.forward.append(entry_id)
        parent[entry_id] = parent_id
        self.added_ts[entry_id] = timestamp
        if self._children is not None:
            if parent_id is None or parent_id in parent:
                self._insert_child(parent_id, entry_id)
            else:
                self._children = None

    def add_new(
        self, entry_id: str, parent_id: str | None, timestamp: str, *, known: bool = False
    ) -> bool:
        """:meth:`add` an entry that is not in the tree yet, else add nothing and answer False:
        an append's membership test and insert in one call (appends are hot)."""
        parent = self._parent
        if parent is None:
            tail, cols = self._tail, self._cols
            assert cols is not None
            if entry_id in tail or cols.row(entry_id) is not None:
                return False
            if not known and parent_id is not None and parent_id not in self:
                self.forward.append(entry_id)
            tail[entry_id] = parent_id
            self.added_ts[entry_id] = timestamp
            return True
        if entry_id in parent:
            return False
        self.add(entry_id, parent_id, timestamp, known=known)
        return True

    def add_stamps(self, ids: Sequence[str], stamps: Iterable[str]) -> None:
        """The timestamps of entries added to :attr:`parent` directly (a load by columns),
        kept as given until siblings are first ordered: an open inserts none of them."""
        self._stamps.append((ids, stamps))

    @property
    def ts(self) -> dict[str, str]:
        """Every entry's timestamp (what orders siblings)."""
        if self._stamps:
            # in place: a load holds added_ts while it adds (the ids are distinct, an entry is
            # in the tree once, so the order of the updates does not matter)
            for ids, stamps in self._stamps:
                self.added_ts.update(zip(ids, stamps, strict=True))
            self._stamps = []
        return self.added_ts

    def settle(self) -> None:
        """Resolve forward references: orphans become roots, cycles are broken."""
        if not self.forward:
            return
        parent = self.parent
        seq = self.file_order()
        done: set[str] = set()
        for start in self.forward:
            p = parent[start]
            if p is not None and p not in parent:
                parent[start] = None
                self.orphans.append(start)
        for start in self.forward:
            on_path: dict[str, None] = {}
            node: str | None = start
            while node is not None and node not in done:
                if node in on_path:
                    # a cycle: cut it at the member whose parent stands latest in the file
                    cycle = list(on_path)[list(on_path).index(node) :]
                    cut = max(cycle, key=lambda n: seq[parent[n]])  # type: ignore[index]
                    parent[cut] = None
                    self.cycles.append(cut)
                    break
                on_path[node] = None
                node = parent[node]
            done.update(on_path)
        self.forward = []
        self._children = None

    def drop_children(self) -> None:
        """Forget the children lists (rebuilt on next use) after bulk additions."""
        self._children = None

    def path_runs(self, leaf: str | None) -> list[Run]:
        """:meth:`path` in runs, root first (see :data:`Run`). Over the columns it walks from
        run to run (the rows where a parent is not the row before), not entry by entry, and
        slices nothing: a path of 1M messages with 10,000 branch points is 10,000 steps."""
        cols = self._cols
        if self._parent is not None or cols is None:
            path = self.path(leaf)
            return [(path, 0, len(path), False)]
        tail, rec_rows = self._tail, self._rec_rows
        ids, rows, named, breaks = cols.ids, cols.rows, cols.named, cols.breaks
        runs: list[Run] = []  # leaf first
        single: list[str] = []  # entries walked one by one (leaf first)
        node = leaf
        budget = len(tail) + len(breaks) + 1  # steps; a cycle cannot loop forever
        while node is not None:
            budget -= 1
            if budget < 0:
                raise RuntimeError("parent cycle in a settled tree")
            if node in tail:
                single.append(node)
                row = rec_rows.get(node)
                if row is None:
                    node = tail[node]
                    continue
            else:
                row = cols.row(node)
                if row is None:
                    raise KeyError(node)
            if single:
                single.reverse()
                runs.append((single, 0, len(single), False))
                single = []
            i = bisect_right(breaks, row) - 1  # the run's first row: the break at or before
            while True:  # down the rows, a run at a time
                b = breaks[i]
                runs.append((ids, b, row + 1, True))
                p = rows[b]
                if p < 0:
                    node = named[b] if p != -1 else None
                    break
                if p >= b:
                    raise RuntimeError("parent cycle in a settled tree")
                row = p
                # the parent's run starts at a break before this one: usually one or two
                # breaks back (a side branch), else found by bisection
                i -= 1
                if breaks[i] > row:
                    i -= 1
                    if breaks[i] > row:
                        i = bisect_right(breaks, row, 0, i) - 1
        if single:
            single.reverse()
            runs.append((single, 0, len(single), False))
        runs.reverse()
        return runs

    def path(self, leaf: str | None) -> list[str]:
        """Entry ids from the root to ``leaf`` (inclusive); empty for ``None``."""
        if self._parent is None:
            out: list[str] = []
            for ids, lo, hi, _ in self.path_runs(leaf):
                out += ids[lo:hi]
            return out
        out = []
        append = out.append
        parent = self.parent
        node = leaf
        # bounded, so a cycle (impossible after settle()) cannot loop forever
        for _ in range(len(parent) + 1):
            if node is None:
                break
            append(node)
            node = parent[node]
        else:
            raise RuntimeError("parent cycle in a settled tree")
        out.reverse()
        return out

    def ancestors(self, entry_id: str) -> Iterator[str]:
        node: str | None = entry_id
        while node is not None:
            yield node
            node = self.parent[node]

    def sibling_key(self, entry_id: str) -> float:
        """Where an entry stands among its siblings: its time (ties: file order)."""
        return time_key(self.ts[entry_id])

    def sibling_keys(self, entry_ids: Iterable[str]) -> dict[str, float]:
        """:meth:`sibling_key` of a few entries (the ones that have siblings: ~1% of a real
        session) without merging every timestamp column into :attr:`ts`: the columns are
        scanned for those ids and only their timestamps decoded."""
        wanted = set(entry_ids)
        if not self._stamps:
            ts = self.added_ts
            return {e: time_key(ts[e]) for e in wanted}
        found = {e: self.added_ts[e] for e in wanted if e in self.added_ts}
        for ids, stamps in self._stamps:
            if len(found) == len(wanted):
                break
            at = stamps.__getitem__ if hasattr(stamps, "__getitem__") else list(stamps).__getitem__
            for row in _rows_of(ids, wanted):
                found[ids[row]] = at(row)
        return {e: time_key(t) for e, t in found.items()}

    def file_order(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.parent)}

    def _build_children(self) -> dict[str | None, list[str]]:
        children: dict[str | None, list[str]] = {}
        for node, p in self.parent.items():  # dict order is file order
            lst = children.get(p)
            if lst is None:
                children[p] = [node]
            else:
                lst.append(node)
        ts = self.ts
        seq: dict[str, int] | None = None
        for lst in children.values():
            if len(lst) > 1:
                seq = seq or self.file_order()
                lst.sort(key=lambda n: (time_key(ts[n]), seq[n]))
        self._children = children
        return children

    def _insert_child(self, parent_id: str | None, entry_id: str) -> None:
        assert self._children is not None
        lst = self._children.setdefault(parent_id, [])
        lst.append(entry_id)
        if len(lst) > 1 and time_key(self.ts[lst[-2]]) > time_key(self.ts[entry_id]):
            seq = self.file_order()
            lst.sort(key=lambda n: (time_key(self.ts[n]), seq[n]))

    def children(self, entry_id: str | None) -> list[str]:
        """Children ordered by timestamp, then file order (``None`` gives the roots)."""
        children = self._children if self._children is not None else self._build_children()
        return list(children.get(entry_id, ()))

    def roots(self) -> list[str]:
        return self.children(None)

    def children_map(self) -> dict[str | None, list[str]]:
        """Every entry's ordered children (``None``: the roots), shared: do not modify."""
        return self._children if self._children is not None else self._build_children()

    def preorder(self) -> Iterator[tuple[str, int]]:
        """(entry id, depth) in depth-first order, children in their order."""
        children = self._children if self._children is not None else self._build_children()
        stack: list[tuple[str, int]] = [(r, 0) for r in reversed(children.get(None, ()))]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            kids = children.get(node)
            if kids:
                stack.extend((k, depth + 1) for k in reversed(kids))

    def depth(self, entry_id: str) -> int:
        return sum(1 for _ in self.ancestors(entry_id)) - 1
