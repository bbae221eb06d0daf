"""Rows: what the viewer shows of a session, as JSON-ready dicts, one page at a time.

The page never receives a whole session: the tree and the context are sent as pages of rows
(``offset``/``limit``), each row a one-line summary, and the full content of one entry is sent
only when it is opened. Building a page costs a walk of ids (cheap) plus decoding the rows of
that page, so a session with 100,000 entries pages as fast as a small one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.model.content import Message
from threadline.render import block_text, one_line
from threadline.treeview import TreeShape, lane_width, layout

if TYPE_CHECKING:
    from threadline.context import Context
    from threadline.session import Session

PREVIEW_CHARS = 240
# Entry types a table of contents shows besides branch points and labelled entries.
OUTLINE_TYPES = frozenset({"compaction", "branch_summary", "session_info", "model_change"})


def message_preview(msg: Message, width: int = PREVIEW_CHARS) -> str:
    return one_line(" ".join(block_text(b, with_ids=False) for b in msg.content), width)


def entry_summary(session: Session, entry_id: str) -> tuple[str | None, str]:
    """(role or None, one-line summary) of a tree entry."""
    rec = session.state.record(entry_id)
    kind = rec.type
    p: Any = rec.payload
    if isinstance(p, dict) and p.get("purged"):
        return None, f"[{kind}, purged]"
    if kind == "message":
        return p.role, message_preview(p)
    if kind == "compaction":
        return None, f"compaction: {one_line(p.summary, 160)}"
    if kind == "branch_summary":
        return None, f"branch summary: {one_line(p.summary, 160)}"
    if kind == "model_change":
        return None, f"model → {p.provider}/{p.model_id}"
    if kind == "thinking_level":
        return None, f"thinking level → {p.thinking_level}"
    if kind == "label":
        return None, f"label {p.target_id[:8]} = {p.label or '(cleared)'}"
    if kind == "session_info":
        return None, f"name → {p.name}"
    if kind == "custom":
        return None, f"custom: {p.custom_type}"
    if kind == "context_op":
        return None, f"operation: {p.kind}"
    return None, f"[{kind}]"


def is_sidechain(session: Session, entry_id: str) -> bool:
    """A sub-agent's side conversation (Claude Code ``isSidechain``), folded by default."""
    if session.state.types.get(entry_id) != "message":
        return False
    if b"idechain" not in session.entry_bytes(entry_id):
        return False  # most messages: no decode (the tree pages would decode every message)
    payload: Any = session.state.record(entry_id).payload
    details = getattr(payload, "provider_details", None) or {}
    # importers keep a tool's own fields under the tool's name (provider_details["claude_code"])
    return _sidechain_flag(details) or any(
        isinstance(v, dict) and _sidechain_flag(v) for v in details.values()
    )


def _sidechain_flag(details: dict[str, Any]) -> bool:
    return bool(details.get("isSidechain") or details.get("is_sidechain"))


class TreeRows:
    """The tree in depth-first order, laid out in lanes (:mod:`threadline.treeview`), with
    folded subtrees skipped and, unless ``bookkeeping``, runs of bookkeeping entries collapsed
    into one row each.

    ``lane`` is the column an entry is drawn in: the first child continues its parent's lane,
    later children get lanes of their own, so branches read like ``git log --graph``; ``depth``
    is the real depth.
    """

    def __init__(
        self,
        session: Session,
        *,
        folded: set[str],
        unfolded: set[str],
        outline: bool = False,
        bookkeeping: bool = False,
    ) -> None:
        self.session = session
        shape = TreeShape(session.metadata(content_types=False))
        labels = session.labels()
        leaf = session.leaf_id
        sidechain_roots = 0

        def fold(eid: str, parent: str | None) -> bool:
            nonlocal sidechain_roots
            if eid in folded:
                return True
            if eid in unfolded:
                return False
            if is_sidechain(session, eid) and (parent is None or not is_sidechain(session, parent)):
                sidechain_roots += 1
                return True
            return False

        keep = set(labels) | ({leaf} if leaf else set())
        graph = layout(shape, keep=keep, hide_bookkeeping=not bookkeeping, fold=fold)
        if outline:
            graph = [
                r
                for r in graph
                if r.children != 1
                or r.id in labels
                or r.id == leaf
                or shape.types.get(r.id) in OUTLINE_TYPES
            ]
        self.rows = graph
        self.types = shape.types
        self.width = lane_width(graph)
        self.on_path = set(session.path_ids())
        self.sidechains_folded = sidechain_roots
        self.labels = labels

    def __len__(self) -> int:
        return len(self.rows)

    def index_of(self, entry_id: str) -> int | None:
        for i, row in enumerate(self.rows):
            if row.id == entry_id:
                return i
        return None

    def page(self, offset: int, limit: int) -> list[dict[str, Any]]:
        s = self.session
        out = []
        for r in self.rows[offset : offset + limit]:
            if r.run:
                kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(r.run_types.items()))
                role, summary = None, f"{r.run} bookkeeping entries ({kinds})"
            else:
                role, summary = entry_summary(s, r.id)
            out.append(
                {
                    "id": r.id,
                    "type": "run" if r.run else self.types.get(r.id),
                    "role": role,
                    "summary": summary,
                    "depth": r.depth,
                    "lane": r.lane,
                    "through": r.through,
                    "forks": r.forks,
                    "run": r.run,
                    "children": r.children,
                    "label": self.labels.get(r.id),
                    "on_path": r.id in self.on_path,
                    "leaf": r.id == s.leaf_id,
                    "folded": r.folded,
                    "hidden": r.hidden,
                    "sidechain": False if r.run else is_sidechain(s, r.id),
                    "timestamp": tree_timestamp(s, r.id),
                }
            )
        return out


def tree_timestamp(session: Session, entry_id: str) -> str:
    slot = session.state.slots[entry_id]
    return slot.timestamp or ""


def context_page(session: Session, ctx: Context, offset: int, limit: int) -> list[dict[str, Any]]:
    """Rows ``offset .. offset+limit`` of the context: position, origin, role, preview, tags."""
    items = ctx.view[offset : offset + limit]
    out = []
    for i, item in enumerate(items):
        msg = session.state.message_for_view_id(item.id)
        out.append(
            {
                "position": offset + i,
                "view_id": item.id,
                "kind": item.kind,
                "entry_id": item.entry_id,
                "role": msg.role,
                "preview": message_preview(msg, 400),
                "tags": list(item.tags),
                "blocks": [b.__struct_config__.tag for b in msg.content],
            }
        )
    return out


def entry_details(session: Session, entry_id: str) -> dict[str, Any]:
    """Everything about one entry: the record as stored, its size, place in the tree and view."""
    rec = session.entry(entry_id)
    tree = session.state.tree
    raw: Any
    if hasattr(rec, "raw"):
        raw = json.loads(rec.raw) if rec.raw else None
    else:
        raw = msgspec.to_builtins(rec)
    view_ids = session.context().view.ids()
    positions = [i for i, vid in enumerate(view_ids) if vid == entry_id]
    return {
        "id": entry_id,
        "type": rec.type,
        "parent_id": tree.parent[entry_id],
        "children": tree.children(entry_id),
        "timestamp": rec.timestamp,
        "size": session.state.size(entry_id),
        "depth": tree.depth(entry_id),
        "label": session.state.labels.get(entry_id),
        "on_path": entry_id in set(session.path_ids()),
        "positions": positions,
        "message_tags": list(session.state.message_tags.get(entry_id, ())),
        "purged": entry_id in session.state.purged,
        "record": raw,
    }


def view_item_details(session: Session, view_id: str) -> dict[str, Any]:
    """A message of the view by its view id (synthetic ones included) with its origin."""
    msg = session.state.message_for_view_id(view_id)
    item = session.state.view_item(view_id)
    return {
        "view_id": view_id,
        "kind": item.kind,
        "entry_id": item.entry_id,
        "tags": list(item.tags),
        "message": msgspec.to_builtins(msg),
    }
