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
        isinstance(v, dict) and _sidechain_flag(v) for v in details.values())


def _sidechain_flag(details: dict[str, Any]) -> bool:
    return bool(details.get("isSidechain") or details.get("is_sidechain"))


class TreeRows:
    """The tree in depth-first order with folded subtrees skipped.

    ``indent`` grows only where the conversation branches, so a 10,000-entry linear path stays
    flush left and the branches stand out; ``depth`` is the real depth.
    """

    def __init__(self, session: Session, *, folded: set[str], unfolded: set[str],
                 outline: bool = False) -> None:
        self.session = session
        tree = session.state.tree
        on_path = set(session.path_ids())
        labels = session.state.labels
        types = session.state.types
        rows: list[tuple[str, int, int, bool, int]] = []  # id, depth, indent, folded, hidden
        stack: list[tuple[str, int, int]] = [(r, 0, 0) for r in reversed(tree.roots())]
        sidechain_roots = 0
        while stack:
            eid, depth, indent = stack.pop()
            kids = tree.children(eid)
            parent = tree.parent[eid]
            fold = eid in folded
            if not fold and eid not in unfolded and kids and is_sidechain(session, eid) and (
                    parent is None or not is_sidechain(session, parent)):
                fold = True
                sidechain_roots += 1
            hidden = _descendants(tree, eid) if fold and kids else 0
            notable = (not outline or len(kids) != 1 or eid in labels
                       or types.get(eid) in OUTLINE_TYPES or eid == session.leaf_id)
            if notable:
                rows.append((eid, depth, indent, fold, hidden))
            if kids and not fold:
                step = 1 if len(kids) > 1 else 0
                stack.extend((k, depth + 1, indent + step) for k in reversed(kids))
        self.rows = rows
        self.on_path = on_path
        self.sidechains_folded = sidechain_roots

    def __len__(self) -> int:
        return len(self.rows)

    def index_of(self, entry_id: str) -> int | None:
        for i, row in enumerate(self.rows):
            if row[0] == entry_id:
                return i
        return None

    def page(self, offset: int, limit: int) -> list[dict[str, Any]]:
        s = self.session
        tree = s.state.tree
        out = []
        for eid, depth, indent, fold, hidden in self.rows[offset: offset + limit]:
            role, summary = entry_summary(s, eid)
            out.append({
                "id": eid,
                "type": s.state.types.get(eid),
                "role": role,
                "summary": summary,
                "depth": depth,
                "indent": indent,
                "children": len(tree.children(eid)),
                "label": s.state.labels.get(eid),
                "on_path": eid in self.on_path,
                "leaf": eid == s.leaf_id,
                "folded": fold,
                "hidden": hidden,
                "sidechain": is_sidechain(s, eid),
                "timestamp": tree_timestamp(s, eid),
            })
        return out


def _descendants(tree: Any, entry_id: str) -> int:
    n = 0
    stack = list(tree.children(entry_id))
    while stack:
        node = stack.pop()
        n += 1
        stack.extend(tree.children(node))
    return n


def tree_timestamp(session: Session, entry_id: str) -> str:
    slot = session.state.slots[entry_id]
    return slot.timestamp or ""


def context_page(session: Session, ctx: Context, offset: int, limit: int) -> list[dict[str, Any]]:
    """Rows ``offset .. offset+limit`` of the context: position, origin, role, preview, tags."""
    items = ctx.view[offset: offset + limit]
    out = []
    for i, item in enumerate(items):
        msg = session.state.message_for_view_id(item.id)
        out.append({
            "position": offset + i,
            "view_id": item.id,
            "kind": item.kind,
            "entry_id": item.entry_id,
            "role": msg.role,
            "preview": message_preview(msg, 400),
            "tags": list(item.tags),
            "blocks": [b.__struct_config__.tag for b in msg.content],
        })
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
        "size": session.state.sizes.get(entry_id, 0),
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
