"""The tree index: parents, children, paths. Pure, no I/O, never recursive.

Real paths are 100,000 entries deep, so every walk here is a loop. Orphans (unknown parent)
become roots; parent cycles are broken at the entry whose parent reference points forward in the
file. Both are reported, never looped on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import compress


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


class TreeIndex:
    """Effective parent of every tree entry, in file order."""

    __slots__ = ("_children", "_stamps", "added_ts", "cycles", "forward", "orphans", "parent")

    def __init__(self) -> None:
        self.parent: dict[str, str | None] = {}  # insertion order is file order
        # timestamps of the entries added one by one (loads write here directly), and the
        # (ids, timestamps) columns given by add_stamps: both merged on first use of ts
        self.added_ts: dict[str, str] = {}
        self._stamps: list[tuple[Sequence[str], Iterable[str]]] = []
        self.orphans: list[str] = []
        self.cycles: list[str] = []
        self.forward: list[str] = []  # entries whose parent was not yet seen when added
        self._children: dict[str | None, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.parent)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.parent

    def add(self, entry_id: str, parent_id: str | None, timestamp: str) -> None:
        """Add an entry; during a load call :meth:`settle` once all entries are in."""
        parent = self.parent
        if parent_id is not None and parent_id not in parent:
            self.forward.append(entry_id)
        parent[entry_id] = parent_id
        self.added_ts[entry_id] = timestamp
        if self._children is not None:
            if parent_id is None or parent_id in parent:
                self._insert_child(parent_id, entry_id)
            else:
                self._children = None

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

    def path(self, leaf: str | None) -> list[str]:
        """Entry ids from the root to ``leaf`` (inclusive); empty for ``None``."""
        out: list[str] = []
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
            # the rows of the wanted ids, picked out by C loops (no bytecode per row)
            rows = compress(range(len(ids)), map(wanted.__contains__, ids))
            for row in rows:
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
