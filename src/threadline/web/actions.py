"""Actions: every write the viewer can make, previewed before it is applied.

Each action is one library call (``Session.tag``, ``Session.undo``, ``Session.digest`` …), the
same call the CLI and the MCP server make. A preview runs that very call on a scratch copy of the
session in a memory store and reports what changed: where the leaf went, which messages left or
joined the context, the call's own result. Nothing in the web layer re-derives what an action
does, so the preview cannot drift from the library. Confirming runs the call on the real session.

Actions whose library part has its own preview (purge's ``dry_run``, the catalog's
preview-then-token flow) use that instead; they live in :mod:`threadline.web.app`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.errors import UserError
from threadline.web.rows import message_preview

if TYPE_CHECKING:
    from threadline.session import Session

Args = dict[str, Any]


def _int(args: Args, key: str) -> int:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            return int(str(value))
        except ValueError:
            raise UserError(
                f"Action argument '{key}' must be a whole number, got {value!r}"
            ) from None
    return value


def _str(args: Args, key: str, *, optional: bool = False) -> Any:
    value = args.get(key)
    if value is None or value == "":
        if optional:
            return None
        raise UserError(f"Action argument '{key}' is required")
    if not isinstance(value, str):
        raise UserError(f"Action argument '{key}' must be a string, got {value!r}")
    return value


def _tags(args: Args) -> list[str] | None:
    raw = args.get("tags")
    if raw in (None, "", []):
        return None
    if isinstance(raw, str):
        return [t.strip() for t in raw.split(",") if t.strip()]
    if isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        return raw
    raise UserError(f"Action argument 'tags' must be a list of names, got {raw!r}")


def _tag(s: Session, a: Args) -> Any:
    pos = a.get("position")
    return s.tag(_str(a, "name", optional=True), None if pos in (None, "") else _int(a, "position"))


def _op_kwargs(a: Args) -> dict[str, Any]:
    tags = _tags(a)
    return {"tags": tags} if tags else {}


def _messages(args: Args) -> list[dict[str, Any]]:
    """The messages of a revise or insert: ``messages`` (a list of ``{role, content}``, or its
    JSON text), else one message from ``role`` (default assistant) and ``text``."""
    raw = args.get("messages")
    if isinstance(raw, str) and raw.strip():
        import json

        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"Action argument 'messages' is not JSON ({exc.msg}); give a list "
                'like [{"role": "assistant", "content": "…"}]'
            ) from None
    if raw not in (None, "", []):
        if not isinstance(raw, list):
            raise UserError("Action argument 'messages' must be a list of {role, content}")
        return raw
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        raise UserError("Give the text of the message (or a 'messages' list)")
    role = args.get("role") or "assistant"
    return [{"role": role, "content": text}]


def _order(args: Args) -> list[int]:
    raw = args.get("new_order")
    if isinstance(raw, str):
        try:
            return [int(p) for p in raw.replace(" ", ",").split(",") if p.strip()]
        except ValueError:
            raise UserError(f"new_order must list positions like '5,6,3,4', got {raw!r}") from None
    if isinstance(raw, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
        return raw
    raise UserError(f"new_order must list positions like '5,6,3,4', got {raw!r}")


def _label(s: Session, a: Args) -> Any:
    return s.set_label(_str(a, "target_id"), _str(a, "label", optional=True) or "")


ACTIONS: dict[str, Callable[[Session, Args], Any]] = {
    "tag": _tag,
    "untag": lambda s, a: s.untag(_str(a, "name")),
    "undo": lambda s, a: s.undo(_int(a, "n")),
    "undo_to": lambda s, a: s.undo_to(_str(a, "name")),
    "clear": lambda s, a: s.clear(),
    "branch": lambda s, a: s.branch(_str(a, "entry_id")),
    "label": _label,
    "digest": lambda s, a: s.digest(
        _int(a, "start"), _int(a, "end"), _str(a, "summary"), **_op_kwargs(a)
    ),
    "snip": lambda s, a: s.snip(_int(a, "start"), _int(a, "end"), **_op_kwargs(a)),
    "revise": lambda s, a: s.revise(
        _int(a, "start"), _int(a, "end"), _messages(a), **_op_kwargs(a)
    ),
    "resequence": lambda s, a: s.resequence(_order(a), **_op_kwargs(a)),
    "insert": lambda s, a: s.insert(_int(a, "after"), _messages(a), **_op_kwargs(a)),
    "expand": lambda s, a: s.expand(_str(a, "op_id")),
    "collapse": lambda s, a: s.collapse(_str(a, "op_id")),
    "tag_messages": lambda s, a: s.tag_messages(_int(a, "start"), _int(a, "end"), _tags(a) or []),
    "toggle": lambda s, a: s.toggle(_str(a, "op_id"), bool(a.get("active"))),
    "revert": lambda s, a: s.revert(_str(a, "op_id")),
    "repair": lambda s, a: s.repair(apply=True),
    "undo_repair": lambda s, a: s.undo_repair(),
}


def available(session_cls: type) -> list[str]:
    """The actions whose library call exists in this installation (others are not offered)."""
    out = []
    for name in ACTIONS:
        method = {"label": "set_label"}.get(name, name)
        if _implemented(session_cls, method):
            out.append(name)
    return out


def _implemented(session_cls: type, method: str) -> bool:
    if not hasattr(session_cls, method):
        return False
    module = {
        "tag": "bookmarks",
        "tags": "bookmarks",
        "untag": "bookmarks",
        "undo": "bookmarks",
        "undo_to": "bookmarks",
        "clear": "bookmarks",
        "digest": "operations",
        "snip": "operations",
        "tag_messages": "operations",
        "revise": "operations",
        "resequence": "operations",
        "insert": "operations",
        "expand": "operations",
        "collapse": "operations",
        "toggle": "operations",
        "revert": "operations",
    }.get(method)
    if module is None:
        return True
    import importlib

    try:
        mod = importlib.import_module(f"threadline.{module}")
    except ModuleNotFoundError:
        return False
    return callable(getattr(mod, method, None))


def run(session: Session, action: str, args: Args) -> Any:
    """Apply ``action`` to ``session`` through its library call; returns the call's result."""
    fn = ACTIONS.get(action)
    if fn is None:
        raise UserError(f"Unknown action '{action}'; choose one of: {', '.join(ACTIONS)}")
    return fn(session, args)


def scratch_copy(session: Session) -> Session:
    """An in-memory copy of ``session`` (every record, byte for byte) to try an action on."""
    from threadline.session import Session
    from threadline.store.memory import MemoryStore

    store = MemoryStore()
    log = store.create_log(session.header, list(session.state.log.raw_lines()))
    return Session(store, log, log.load())


def preview(session: Session, action: str, args: Args) -> dict[str, Any]:
    """What ``action`` would change, found by running it on a scratch copy."""
    copy = scratch_copy(session)
    before_leaf = copy.leaf_id
    before = copy.context().view.ids()
    result = run(copy, action, args)
    after = copy.context().view.ids()
    return {
        "action": action,
        "args": args,
        "result": to_json(result),
        "leaf_before": before_leaf,
        "leaf_after": copy.leaf_id,
        "context_before": len(before),
        "context_after": len(after),
        "diff": view_diff(copy, before, after),
    }


def view_diff(
    session: Session, before: list[str], after: list[str], show: int = 6
) -> dict[str, Any]:
    """The changed middle of two views: common prefix and suffix kept, the rest listed."""
    k = 0
    n = min(len(before), len(after))
    while k < n and before[k] == after[k]:
        k += 1
    j = 0
    while j < n - k and before[-1 - j] == after[-1 - j]:
        j += 1
    removed = before[k : len(before) - j]
    added = after[k : len(after) - j]

    def rows(ids: list[str]) -> list[dict[str, Any]]:
        out = []
        for vid in ids[:show]:
            msg = session.state.message_for_view_id(vid)
            out.append({"view_id": vid, "role": msg.role, "preview": message_preview(msg, 160)})
        return out

    return {
        "at": k,
        "removed": len(removed),
        "added": len(added),
        "removed_rows": rows(removed),
        "added_rows": rows(added),
    }


def to_json(value: Any) -> Any:
    try:
        return msgspec.to_builtins(value)
    except TypeError:
        return repr(value)
