"""The session tree as rows with lanes, the way ``git log --graph`` draws history.

One row per entry in depth-first order. The first child of an entry continues its parent's lane;
every later child gets a lane of its own, opened at the branch point (``forks``) and drawn as a
vertical line (``through``) down to the row where that child's subtree starts. A lane closes
when its subtree ends, so lanes are reused and the width stays that of the widest fork.

Bookkeeping entries (``custom`` records such as Claude Code's progress lines, and ``label``
entries) can be hidden: each run of them along one chain becomes a single row that says how many
it holds (``run``), unless an entry of the run is the leaf, a branch point or labelled.

The layout works from ids, parents and types only (``Session.metadata()``: no message is
decoded), so the CLI's ``tree`` and the web viewer's paged tree share it at 100,000 entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import msgspec

#: Entry types hidden by the bookkeeping filter.
BOOKKEEPING_TYPES = frozenset({"custom", "label"})


class EntryInfo(Protocol):
    """What the layout needs of an entry (``Session.metadata()`` rows have it)."""

    id: str
    parent_id: str | None
    entry_type: str  # the record type (message, custom, label, ...), not a content type
    timestamp: str


class GraphRow(msgspec.Struct, kw_only=True):
    """One drawn row: an entry (``run == 0``) or a collapsed run of ``run`` bookkeeping entries
    starting at ``id`` (``run_types``: how many of each type)."""

    id: str
    depth: int
    lane: int
    through: list[int]  # lanes whose vertical line passes this row (not the row's own)
    forks: list[int]  # lanes opened here for later children
    children: int
    run: int = 0
    run_types: dict[str, int] = msgspec.field(default_factory=dict)
    folded: bool = False
    hidden: int = 0  # entries below a folded row


class TreeShape:
    """Children lists from parent links, ordered as the tree orders them: by timestamp, then
    file order (DESIGN §4)."""

    def __init__(self, entries: Iterable[EntryInfo]) -> None:
        self.types: dict[str, str] = {}
        kids: dict[str | None, list[tuple[str, int, str]]] = {}
        for n, e in enumerate(entries):
            self.types[e.id] = e.entry_type
            kids.setdefault(e.parent_id, []).append((e.timestamp or "", n, e.id))
        known = self.types
        roots = kids.pop(None, [])
        for parent in [p for p in kids if p not in known]:  # orphans are roots
            roots.extend(kids.pop(parent))
        self._kids = {p: [eid for _, _, eid in sorted(v)] for p, v in kids.items()}
        self.roots = [eid for _, _, eid in sorted(roots)]

    def children(self, entry_id: str) -> list[str]:
        return self._kids.get(entry_id, [])

    def descendants(self, entry_id: str) -> int:
        n = 0
        stack = list(self.children(entry_id))
        while stack:
            node = stack.pop()
            n += 1
            stack.extend(self.children(node))
        return n


def layout(
    shape: TreeShape,
    *,
    keep: set[str] | frozenset[str] = frozenset(),
    hide_bookkeeping: bool = False,
    fold: Callable[[str, str | None], bool] | None = None,
) -> list[GraphRow]:
    """The rows of the whole tree. ``keep``: ids never collapsed into a run (the leaf, labelled
    entries); ``fold(entry_id, parent_id)``: whether to draw an entry with its subtree folded."""
    rows: list[GraphRow] = []
    active: set[int] = set()  # lanes in use
    lane_of: dict[str, int] = {}  # later children waiting for their row -> reserved lane
    # (entry id, depth, parent id, lane)
    stack: list[tuple[str, int, str | None, int]] = []
    for root in reversed(shape.roots):
        stack.append((root, 0, None, -1))
    run_tail: str | None = None  # the last entry of the run row at rows[-1], if any
    while stack:
        eid, depth, parent, lane = stack.pop()
        if lane < 0:
            lane = lane_of.pop(eid, -1)
            if lane < 0:
                lane = _free(active)
                active.add(lane)
        kids = shape.children(eid)
        folded = bool(kids) and fold is not None and fold(eid, parent)
        shown = [] if folded else kids
        forks = []
        for later in shown[1:]:
            free = _free(active)
            active.add(free)
            lane_of[later] = free
            forks.append(free)
        if not shown:
            active.discard(lane)
        kind = shape.types.get(eid, "")
        collapsible = (
            hide_bookkeeping
            and kind in BOOKKEEPING_TYPES
            and eid not in keep
            and len(shown) <= 1
            and not folded
        )
        if (
            collapsible
            and run_tail is not None
            and run_tail == parent
            and rows
            and rows[-1].lane == lane
        ):
            last = rows[-1]
            last.run += 1
            last.run_types[kind] = last.run_types.get(kind, 0) + 1
            last.children = len(shown)
            last.forks = forks
            run_tail = eid
        else:
            through = sorted(active - {lane} - set(forks))
            row = GraphRow(
                id=eid,
                depth=depth,
                lane=lane,
                through=through,
                forks=forks,
                children=len(kids),
                folded=folded,
                hidden=shape.descendants(eid) if folded else 0,
            )
            if collapsible:
                row.run = 1
                row.run_types = {kind: 1}
                run_tail = eid
            else:
                run_tail = None
            rows.append(row)
        for k in reversed(shown):
            stack.append((k, depth + 1, eid, lane if k == shown[0] else -1))
    return rows


def _free(active: set[int]) -> int:
    n = 0
    while n in active:
        n += 1
    return n


def graph_prefix(row: GraphRow, width: int) -> str:
    """The row's lanes as text: '●' the entry, '│' a lane passing, '╮' a fork opened here."""
    cells = [" "] * max(width, row.lane + 1)
    for lane in row.through:
        cells[lane] = "│"
    for lane in row.forks:
        cells[lane] = "╮"
    cells[row.lane] = "◌" if row.run else "●"
    return " ".join(cells)


def lane_width(rows: Sequence[GraphRow]) -> int:
    """How many lanes the widest row uses."""
    return max((max([r.lane, *r.through, *r.forks]) + 1 for r in rows), default=0)
